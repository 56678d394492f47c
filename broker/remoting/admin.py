"""The broker requests of RocketMQ's admin tools (mqadmin, RocketMQ's dashboard): topics and
their queues' offsets, consumer groups and their progress, messages by key or id, and offset
resets; each through the core's services, as the client requests are.

Bodies are RocketMQ's (fastjson) JSON, where a table keyed by message queue is written with each
queue as a JSON object in key position (``{{"brokerName":..,"queueId":0,"topic":..}:{..}}``),
as RocketMQ's broker writes it and its tools read it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from broker import errors
from broker.clock import Clock, to_ms
from broker.messaging import MessagingService
from broker.model import MAX_QUEUES, StoredMessage
from broker.operators import OffsetTarget, OperatorService
from broker.remoting import messages
from broker.remoting.codes import Request, Response
from broker.remoting.frame import Command
from broker.remoting.handlers import RemotingBroker, stored_bytes
from broker.remoting.namesrv import BROKER_NAME, PERM_READ_WRITE
from broker.remoting.server import Connection, Handler
from broker.remoting.status import code_of

VERSION_DESC = "V5_5_0"  # the RocketMQ release whose remoting protocol halfmq speaks
MAX_QUERIED = 64  # QUERY_MESSAGE's answer at most, whatever maxNum asks (RocketMQ's defaultQueryMaxNum)


class RemotingAdmin:
    def __init__(
        self, messaging: MessagingService, operators: OperatorService, broker: RemotingBroker, *, clock: Clock
    ) -> None:
        self._messaging = messaging
        self._operators = operators
        self._broker = broker
        self._clock = clock

    def handlers(self) -> dict[int, Handler]:
        return {
            Request.UPDATE_AND_CREATE_TOPIC: self.update_topic,
            Request.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            Request.GET_TOPIC_CONFIG: self.topic_config,
            Request.GET_TOPIC_STATS_INFO: self.topic_stats,
            Request.QUERY_TOPIC_CONSUME_BY_WHO: self.consumed_by,
            Request.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_group,
            Request.DELETE_SUBSCRIPTIONGROUP: self.delete_group,
            Request.GET_CONSUME_STATS: self.consume_stats,
            Request.GET_CONSUMER_CONNECTION_LIST: self.connections,
            Request.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            Request.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset,
            Request.QUERY_MESSAGE: self.query_message,
            Request.VIEW_MESSAGE_BY_ID: self.view_message,
            Request.GET_BROKER_RUNTIME_INFO: self.runtime_info,
        }

    async def update_topic(self, request: Command, _: Connection) -> Command:
        """Create the topic with ``writeQueueNums`` queues; an existing topic of that many queues
        stays as it is. halfmq keeps a topic's queue count: another count is refused."""
        topic = request.fields.get("topic", "")
        try:
            queues = int(request.fields.get("writeQueueNums", "0"))
            if not 1 <= queues <= MAX_QUEUES:
                raise errors.InvalidArgument(f"a topic has 1 to {MAX_QUEUES} queues, not {queues}")
            with contextlib.suppress(errors.TopicExists):
                await self._messaging.create_topic(topic, queues, None, None)
            held = self._messaging.topic(topic).queues
        except ValueError:
            return request.answer(Response.SYSTEM_ERROR, "writeQueueNums is not a number")
        except errors.HalfmqError as exc:
            return request.answer(code_of(exc), str(exc))
        if held != queues:
            return request.answer(
                Response.SYSTEM_ERROR, f"topic {topic} has {held} queues; halfmq does not change a topic's queue count"
            )
        return request.answer(Response.SUCCESS)

    async def delete_topic(self, request: Command, _: Connection) -> Command:
        """Delete the topic with its messages and offsets (a topic that is not there: done, as
        RocketMQ answers); refused while a transaction or delayed message of it is pending."""
        try:
            await self._operators.delete_topic(request.fields.get("topic", ""))
        except errors.TopicNotFound:
            pass
        except errors.HalfmqError as exc:
            return request.answer(code_of(exc), str(exc))
        return request.answer(Response.SUCCESS)

    async def topic_config(self, request: Command, _: Connection) -> Command:
        topic = request.fields.get("topic", "")
        try:
            queues = self._messaging.topic(topic).queues
        except errors.HalfmqError:
            return request.answer(Response.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        body = {"order": False, "perm": PERM_READ_WRITE, "readQueueNums": queues, "topicFilterType": "SINGLE_TAG",
                "topicName": topic, "topicSysFlag": 0, "writeQueueNums": queues, "attributes": {}}  # fmt: skip
        return request.answer(Response.SUCCESS, body=json.dumps(body).encode())

    async def topic_stats(self, request: Command, _: Connection) -> Command:
        """Each queue's first and next offsets, and when its last message was stored."""
        topic = request.fields.get("topic", "")
        try:
            ranges = await self._messaging.queue_offsets(topic)
            table = {
                queue_id: {
                    "lastUpdateTimestamp": await self._stored_at(topic, queue_id, high - 1) if high > low else 0,
                    "maxOffset": high,
                    "minOffset": low,
                }
                for queue_id, (low, high) in sorted(ranges.items())
            }
        except errors.HalfmqError:
            return request.answer(Response.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        body = "{" + f'"offsetTable":{_by_queue(topic, table)},"topicPutTps":0.0' + "}"
        return request.answer(Response.SUCCESS, body=body.encode())

    async def consumed_by(self, request: Command, _: Connection) -> Command:
        """The groups with committed offsets in the topic."""
        topic = request.fields.get("topic", "")
        groups = sorted({group for group, t, _, _ in await self._messaging.committed_offsets() if t == topic})
        return request.answer(Response.SUCCESS, body=json.dumps({"groupList": groups}).encode())

    async def update_group(self, request: Command, _: Connection) -> Command:
        """A SubscriptionGroupConfig: its ``retryMaxTimes`` becomes the group's retry policy (a
        message is delivered once and retried that often), ``consumeMessageOrderly`` a FIFO group."""
        try:
            config = json.loads(request.body)
            group = str(config["groupName"])
            retries = int(config.get("retryMaxTimes", 16))
            fifo = bool(config.get("consumeMessageOrderly", False))
            await self._messaging.set_retry_policy(group, retries + 1, None, fifo)
        except (ValueError, TypeError, KeyError) as exc:
            return request.answer(Response.SYSTEM_ERROR, f"a subscription group config that does not parse: {exc}")
        except errors.HalfmqError as exc:
            return request.answer(code_of(exc), str(exc))
        return request.answer(Response.SUCCESS)

    async def delete_group(self, request: Command, _: Connection) -> Command:
        """Forget the group: its offsets, deliveries and retry policy (a group nothing is kept
        of: done, as RocketMQ answers); refused while it has live consumers."""
        try:
            await self._operators.delete_group(request.fields.get("groupName", ""))
        except errors.GroupNotFound:
            pass
        except errors.HalfmqError as exc:
            return request.answer(code_of(exc), str(exc))
        return request.answer(Response.SUCCESS)

    async def consume_stats(self, request: Command, _: Connection) -> Command:
        """The group's progress in each queue of the topic named, else of every topic it has
        offsets in: the queue's end, the group's committed offset, how far its pulls reached,
        and when the last message it consumed was stored."""
        group, named = request.fields.get("consumerGroup", ""), request.fields.get("topic")
        committed = [(t, q, o) for _, t, q, o in await self._messaging.committed_offsets(group)]
        topics = [named] if named else sorted({t for t, _, _ in committed})
        table = {}
        for topic in topics:
            try:
                ranges = await self._messaging.queue_offsets(topic)
            except errors.HalfmqError:
                continue
            offsets = {q: o for t, q, o in committed if t == topic}
            for queue_id, (_low, high) in sorted(ranges.items()):
                consumed = offsets.get(queue_id, 0)
                pulled = max(consumed, self._broker.pull_offset(group, topic, queue_id) or 0)
                last = await self._stored_at(topic, queue_id, consumed - 1) if consumed > 0 else 0
                table[(topic, queue_id)] = {"brokerOffset": high, "consumerOffset": consumed,
                                            "lastTimestamp": last, "pullOffset": pulled}  # fmt: skip
        if not table:
            return request.answer(Response.SYSTEM_ERROR, f"the consumer group[{group}] has no offsets")
        body = "{" + f'"consumeTps":0.0,"offsetTable":{_by_queues(table)}' + "}"
        return request.answer(Response.SUCCESS, body=body.encode())

    async def connections(self, request: Command, _: Connection) -> Command:
        group = request.fields.get("consumerGroup", "")
        found = self._broker.connections(group)
        if found is None:
            return request.answer(Response.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        return request.answer(Response.SUCCESS, body=json.dumps(found).encode())

    async def reset_offset(self, request: Command, _: Connection) -> Command:
        """Move the group's offsets in every queue of the topic to the first message stored at or
        after ``timestamp`` (a negative one: the end), as RocketMQ's broker resets them itself;
        refused while the group has live consumers, as Kafka refuses it."""
        fields = request.fields
        topic, group = fields.get("topic", ""), fields.get("group", "")
        try:
            timestamp = int(fields.get("timestamp", "-1"))
            target = (
                OffsetTarget(OffsetTarget.LATEST) if timestamp < 0 else OffsetTarget(OffsetTarget.DATETIME, timestamp)
            )
            offsets = await self._operators.reset_offsets(group, topic, target)
        except ValueError:
            return request.answer(Response.SYSTEM_ERROR, "timestamp is not a number")
        except errors.HalfmqError as exc:
            return request.answer(code_of(exc), str(exc))
        body = "{" + f'"offsetTable":{_by_queue(topic, dict(sorted(offsets.items())))}' + "}"
        return request.answer(Response.SUCCESS, body=body.encode())

    async def search_offset(self, request: Command, _: Connection) -> Command:
        fields = request.fields
        try:
            topic, queue_id = fields.get("topic", ""), int(fields.get("queueId", "-1"))
            offset = await self._messaging.offset_at(topic, queue_id, int(fields.get("timestamp", "0")))
        except ValueError:
            return request.answer(Response.SYSTEM_ERROR, "queueId and timestamp are numbers")
        except errors.HalfmqError as exc:
            return request.answer(code_of(exc), str(exc))
        return request.answer(Response.SUCCESS, offset=offset)

    async def query_message(self, request: Command, connection: Connection) -> Command:
        """The topic's messages with a key (or, with ``_UNIQUE_KEY_QUERY``, the message id) asked
        for, stored within the time range, in RocketMQ's store encoding, newest first."""
        fields = request.fields
        topic, key = fields.get("topic", ""), fields.get("key", "")
        try:
            limit = min(max(int(fields.get("maxNum", str(MAX_QUERIED))), 1), MAX_QUERIED)
            begin, end = int(fields.get("beginTimestamp", "0")), int(fields.get("endTimestamp", str(1 << 63)))
            if fields.get("_UNIQUE_KEY_QUERY") == "true":
                found = [f for f in await self._operators.find(message_id=key, limit=limit) if f.message.topic == topic]
            else:
                found = await self._operators.find(key=key, topic=topic, limit=limit)
        except ValueError:
            return request.answer(Response.SYSTEM_ERROR, "maxNum, beginTimestamp and endTimestamp are numbers")
        except errors.HalfmqError as exc:
            return request.answer(code_of(exc), str(exc))
        stored = [f.message for f in found if f.message.queue_offset >= 0 and begin <= f.message.store_timestamp <= end]
        now_ms = to_ms(self._clock())
        if not stored:
            return request.answer(
                Response.QUERY_NOT_FOUND, "can not find message, maybe time range not correct",
                indexLastUpdateTimestamp=now_ms, indexLastUpdatePhyoffset=0,
            )  # fmt: skip
        body = b"".join(stored_bytes(m, connection.local) for m in stored)
        return request.answer(Response.SUCCESS, body=body, indexLastUpdateTimestamp=now_ms, indexLastUpdatePhyoffset=0)

    async def view_message(self, request: Command, connection: Connection) -> Command:
        """The message an offset message id names (its queue and place, see messages.position)."""
        topic = request.fields.get("topic", "")
        try:
            _, queue_id, offset = messages.place(int(request.fields.get("offset", "-1")))
            message = await self._operators.message_at(topic, queue_id, offset)
        except ValueError:
            return request.answer(Response.SYSTEM_ERROR, "offset is not a number")
        except errors.HalfmqError as exc:
            return request.answer(Response.SYSTEM_ERROR, f"can not find message by the offset: {exc}")
        return request.answer(Response.SUCCESS, body=stored_bytes(message, connection.local))

    async def runtime_info(self, request: Command, _: Connection) -> Command:
        """What RocketMQ's broker reports of itself, as far as halfmq keeps it: its protocol's
        release, that it is active, and no throughput figures (zero)."""
        table = {
            "ackThreadPoolQueueHeadWaitTimeMills": "0",
            "ackThreadPoolQueueSize": "0",
            "brokerActive": "true",
            "brokerVersionDesc": VERSION_DESC,
            "commitLogDiskRatio": "0.0",
            "earliestMessageTimeStamp": "",
            "getTransferredTps": "0.0 0.0 0.0",
            "msgGetTotalTodayMorning": "0",
            "msgGetTotalTodayNow": "0",
            "msgGetTotalYesterdayMorning": "0",
            "msgPutTotalTodayMorning": "0",
            "msgPutTotalTodayNow": "0",
            "msgPutTotalYesterdayMorning": "0",
            "pageCacheLockTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueSize": "0",
            "putTps": "0.0 0.0 0.0",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "sendThreadPoolQueueSize": "0",
        }
        return request.answer(Response.SUCCESS, body=json.dumps({"table": table}).encode())

    async def _stored_at(self, topic: str, queue_id: int, offset: int) -> int:
        """When the message at ``offset`` was stored (ms), 0 if none is there any more."""
        try:
            message: StoredMessage = await self._operators.message_at(topic, queue_id, offset)
        except errors.MessageNotFound:
            return 0
        return message.store_timestamp


def _by_queue(topic: str, table: Mapping[int, Any]) -> str:
    return _by_queues({(topic, queue_id): value for queue_id, value in table.items()})


def _by_queues(table: Mapping[tuple[str, int], Any]) -> str:
    """A table keyed by message queue, as fastjson writes a ``Map<MessageQueue, ...>``."""
    entries: Iterable[str] = (
        json.dumps({"brokerName": BROKER_NAME, "queueId": queue_id, "topic": topic}, separators=(",", ":"))
        + ":"
        + json.dumps(value, separators=(",", ":"))
        for (topic, queue_id), value in table.items()
    )
    return "{" + ",".join(entries) + "}"
