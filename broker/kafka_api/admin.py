"""The Kafka admin APIs that Kafka's tools call beside the client APIs: DescribeConfigs (a
topic's and the broker's settings, in Kafka's names), DescribeCluster, OffsetDelete and
DescribeAcls. Each answers from the core's calls, as the client APIs do."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from kafka import errors as kerr
from kafka.protocol.admin import DescribeAclsResponse, DescribeClusterResponse, DescribeConfigsResponse
from kafka.protocol.consumer import OffsetDeleteResponse

from broker.config import Settings
from broker.errors import GroupNotEmpty, GroupNotFound, HalfmqError, InvalidArgument
from broker.kafka_api.codes import error_code
from broker.messaging import MessagingService
from broker.operators import OperatorService

TOPIC, BROKER = 2, 4  # Kafka's config resource types
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5  # Kafka's config sources
BROKERS_ENDPOINT = 1  # DescribeCluster's endpoint type of a broker listener


@dataclass(frozen=True)
class Config:
    """A setting in Kafka's name, with halfmq's value and where it comes from (Kafka's source)."""

    name: str
    value: str
    source: int = DEFAULT_CONFIG


@dataclass(frozen=True)
class KafkaConfigs:
    """What DescribeConfigs reports: a topic's settings (the broker's, but for a topic's own
    retention) and the broker's. None can be altered through Kafka's APIs: they are read-only."""

    topic: tuple[Config, ...]
    broker: tuple[Config, ...]

    @classmethod
    def of(cls, settings: Settings, node_id: int, partitions: int) -> KafkaConfigs:
        defaults = {f.name: f.default for f in fields(Settings)}

        def setting(name: str, field: str, value: str) -> Config:
            given = getattr(settings, field) != defaults[field]
            return Config(name, value, STATIC_BROKER_CONFIG if given else DEFAULT_CONFIG)

        retention_ms = _retention_ms(settings.retention)
        max_bytes = str(settings.max_body_bytes)
        return cls(
            topic=(
                Config("cleanup.policy", "delete"),
                setting("max.message.bytes", "max_body_bytes", max_bytes),
                Config("min.insync.replicas", "1"),
                setting("retention.ms", "retention", retention_ms),
            ),
            broker=(
                setting("auto.create.topics.enable", "auto_create_topics", str(settings.auto_create_topics).lower()),
                setting("log.retention.ms", "retention", retention_ms),
                setting("message.max.bytes", "max_body_bytes", max_bytes),
                Config("node.id", str(node_id)),
                Config("num.partitions", str(partitions)),
            ),
        )


class KafkaAdmin:
    def __init__(
        self,
        messaging: MessagingService,
        operators: OperatorService,
        configs: KafkaConfigs,
        *,
        node_id: int,
        cluster_id: str,
        address: Callable[[Any], tuple[str, int]],
    ) -> None:
        self._messaging = messaging
        self._operators = operators
        self._configs = configs
        self._node_id = node_id
        self._cluster_id = cluster_id
        self._address = address

    async def describe_configs(self, request: Any, _: Any) -> Any:
        results = []
        for resource in request.resources:
            code, message = 0, None
            configs: Sequence[Config] = ()
            try:
                configs = self._resource_configs(resource.resource_type, resource.resource_name)
            except HalfmqError as exc:
                code, message = error_code(exc), str(exc)
            wanted = resource.configuration_keys
            results.append(
                DescribeConfigsResponse.DescribeConfigsResult(
                    error_code=code,
                    error_message=message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=[_entry(c) for c in configs if wanted is None or c.name in wanted],
                )
            )
        return DescribeConfigsResponse(throttle_time_ms=0, results=results)

    def _resource_configs(self, resource_type: int, name: str) -> Sequence[Config]:
        if resource_type == TOPIC:
            retention = self._messaging.topic(name).retention  # raises for a topic that is not there
            if retention is None:
                return self._configs.topic
            own = Config("retention.ms", _retention_ms(retention), DYNAMIC_TOPIC_CONFIG)
            return tuple(own if c.name == own.name else c for c in self._configs.topic)
        if resource_type == BROKER:
            if name not in ("", str(self._node_id)):
                raise InvalidArgument(
                    f"Unexpected broker id, expected {self._node_id} or empty string, but received {name}"
                )
            return self._configs.broker
        raise InvalidArgument(f"halfmq describes topic and broker configs only, not resource type {resource_type}")

    async def describe_cluster(self, request: Any, connection: Any) -> Any:
        """This broker, its own controller, as a one-node Kafka cluster reports itself to a
        client of its broker listener; a request for controllers gets UNSUPPORTED_ENDPOINT_TYPE."""
        host, port = self._address(connection)
        endpoint = getattr(request, "endpoint_type", BROKERS_ENDPOINT)
        if endpoint != BROKERS_ENDPOINT:
            return DescribeClusterResponse(
                throttle_time_ms=0, error_code=kerr.UnsupportedEndpointTypeError.errno,
                error_message="The request was sent to a broker, which lists brokers only",
                endpoint_type=endpoint, cluster_id="", controller_id=-1, brokers=[],
                authorized_operations=None,
            )  # fmt: skip
        broker = DescribeClusterResponse.DescribeClusterBroker(
            broker_id=self._node_id, host=host, port=port, rack=None, is_fenced=False
        )
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=BROKERS_ENDPOINT,
            cluster_id=self._cluster_id, controller_id=self._node_id, brokers=[broker],
            authorized_operations=None,
        )  # fmt: skip

    async def offset_delete(self, request: Any, _: Any) -> Any:
        """Each partition's committed offset forgotten: GROUP_ID_NOT_FOUND for a group nothing of
        which is kept; GROUP_SUBSCRIBED_TO_TOPIC for each partition of a topic that live consumers
        of the group consume; UNKNOWN_TOPIC_OR_PARTITION for a partition that is not."""
        group_code, topics = 0, []
        for topic in request.topics:
            queue_ids = [p.partition_index for p in topic.partitions]
            try:
                await self._operators.delete_offsets(request.group_id, topic.name, queue_ids)
                code = 0
            except GroupNotFound:
                group_code, code = kerr.GroupIdNotFoundError.errno, 0
            except GroupNotEmpty:
                code = kerr.GroupSubscribedToTopicError.errno
            except InvalidArgument:
                group_code, code = kerr.InvalidGroupIdError.errno, 0
            except HalfmqError:
                code = kerr.UnknownTopicOrPartitionError.errno
            partitions = [
                OffsetDeleteResponse.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition(
                    partition_index=index, error_code=code
                )
                for index in queue_ids
            ]
            topics.append(OffsetDeleteResponse.OffsetDeleteResponseTopic(name=topic.name, partitions=partitions))
        return OffsetDeleteResponse(error_code=group_code, throttle_time_ms=0, topics=[] if group_code else topics)

    async def describe_acls(self, _: Any, __: Any) -> Any:
        """As a Kafka broker without an authorizer answers (halfmq has no ACLs): SECURITY_DISABLED."""
        return DescribeAclsResponse(
            throttle_time_ms=0,
            error_code=kerr.SecurityDisabledError.errno,
            error_message="No Authorizer is configured.",
            resources=[],
        )


def _retention_ms(seconds: float) -> str:
    """A retention in Kafka's terms: milliseconds, or -1 to keep everything, as halfmq's 0 does."""
    return str(round(seconds * 1000)) if seconds else "-1"


def _entry(config: Config) -> Any:
    return DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult(
        name=config.name, value=config.value, read_only=True, config_source=config.source,
        is_default=config.source == DEFAULT_CONFIG,
        is_sensitive=False, synonyms=[], config_type=0, documentation=None,
    )  # fmt: skip
