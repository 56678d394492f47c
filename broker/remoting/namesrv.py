"""halfmq's name server: routes every topic to halfmq's one remoting broker.

A topic that does not exist gets TOPIC_NOT_EXIST, as from RocketMQ's name server; with topics
created on first use (``--auto-create-topics``, on by default), the clients then ask for the
route of ``TBW102`` (RocketMQ's auto-create key topic) and send with it as their default
topic, which the broker takes as leave to create the topic. The route's broker address is
``--advertised-address``'s host, else the address the client reached the name server on,
with the remoting broker's port.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from broker import errors
from broker.messaging import MessagingService
from broker.remoting.codes import Request, Response
from broker.remoting.frame import Command
from broker.remoting.server import Connection, Handler

BROKER_NAME = "halfmq"
CLUSTER = "DefaultCluster"  # RocketMQ's default, so tools and clients need no cluster name
AUTO_CREATE_TOPIC = "TBW102"
AUTO_CREATE_QUEUES = 8  # RocketMQ's defaultTopicQueueNums: the clients take 4 of them
PERM_READ_WRITE = 6
PERM_INHERIT_READ_WRITE = 7
# What RocketMQ's name server adds to a missing route's remark (FAQUrl.suggestTodo), so that its
# clients print it instead of their own pointer.
FAQ_TOPIC = "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
STANDARD_JSON_VERSION = 401  # MQVersion.Version.V4_9_4's ordinal: clients from it on read standard JSON


class NameServer:
    def __init__(
        self, messaging: MessagingService, broker_port: Callable[[], int], *, advertised_host: str | None,
        auto_create_topics: bool,
    ) -> None:  # fmt: skip
        self._messaging = messaging
        self._broker_port = broker_port
        self._advertised_host = advertised_host
        self._auto_create_topics = auto_create_topics

    def handlers(self) -> dict[int, Handler]:
        return {
            Request.GET_ROUTEINFO_BY_TOPIC: self.route,
            Request.GET_BROKER_CLUSTER_INFO: self.cluster,
            Request.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.topic_list,
            Request.GET_KV_CONFIG: self.kv_config,
            Request.DELETE_KV_CONFIG: self.done,
            Request.DELETE_TOPIC_IN_NAMESRV: self.done,
        }

    def broker_address(self, connection: Connection) -> str:
        return f"{self._advertised_host or connection.local[0]}:{self._broker_port()}"

    async def route(self, request: Command, connection: Connection) -> Command:
        topic = request.fields.get("topic", "")
        if topic == AUTO_CREATE_TOPIC and self._auto_create_topics:
            queues, perm = AUTO_CREATE_QUEUES, PERM_INHERIT_READ_WRITE
        else:
            try:
                queues, perm = self._messaging.topic(topic).queues, PERM_READ_WRITE
            except (errors.TopicNotFound, errors.HiddenTopic, errors.InvalidArgument):
                return request.answer(
                    Response.TOPIC_NOT_EXIST,
                    f"No topic route info in name server for the topic: {topic}\n{FAQ_TOPIC}",
                )
        body = {
            "brokerDatas": [self._broker_data(connection)],
            "filterServerTable": {},
            "queueDatas": [
                {"brokerName": BROKER_NAME, "perm": perm, "readQueueNums": queues, "topicSysFlag": 0,
                 "writeQueueNums": queues}
            ],
        }  # fmt: skip
        standard = request.fields.get("acceptStandardJsonOnly") == "true" or request.version >= STANDARD_JSON_VERSION
        return request.answer(Response.SUCCESS, body=_json(body, standard))

    async def cluster(self, request: Command, connection: Connection) -> Command:
        body = {
            "brokerAddrTable": {BROKER_NAME: self._broker_data(connection)},
            "clusterAddrTable": {CLUSTER: [BROKER_NAME]},
        }
        return request.answer(Response.SUCCESS, body=_json(body, standard=False))

    async def topic_list(self, request: Command, connection: Connection) -> Command:
        names = [t.name for t in self._messaging.topics()]
        return request.answer(Response.SUCCESS, body=json.dumps({"topicList": names}).encode())

    async def kv_config(self, request: Command, connection: Connection) -> Command:
        """halfmq keeps no name server settings (RocketMQ's clients and tools ask for ORDER_TOPIC_CONFIG)."""
        namespace, key = request.fields.get("namespace"), request.fields.get("key")
        return request.answer(Response.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}")

    async def done(self, request: Command, connection: Connection) -> Command:
        """A change halfmq's name server has nothing to do for: it keeps no settings, and routes
        to the broker's topics (a topic deleted at the broker has no route any more)."""
        return request.answer(Response.SUCCESS)

    def _broker_data(self, connection: Connection) -> dict[str, object]:
        return {"brokerAddrs": {"0": self.broker_address(connection)}, "brokerName": BROKER_NAME, "cluster": CLUSTER}


def _json(body: Mapping[str, object], standard: bool) -> bytes:
    """``body`` as JSON; unless ``standard``, in fastjson's form, with the broker ids that key
    ``brokerAddrs`` unquoted, as RocketMQ's name server writes them for clients older than 4.9.4
    that do not ask for standard JSON."""
    text = json.dumps(body, separators=(",", ":"))
    return (text if standard else text.replace('"brokerAddrs":{"0":', '"brokerAddrs":{0:')).encode()
