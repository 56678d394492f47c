"""The Kafka APIs halfmq answers, each translated to the core's calls: topics and partitions are
halfmq topics and queues, offsets are queue offsets, a consumer group's committed offsets are
the store's. ``VERSIONS`` lists what ApiVersions advertises; the codecs are kafka-python's.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from kafka import errors as kerr
from kafka.protocol.admin import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeTransactionsRequest,
    ListGroupsRequest,
    ListGroupsResponse,
    ListTransactionsRequest,
)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from broker.errors import (
    GroupNotEmpty,
    GroupNotFound,
    HalfmqError,
    InvalidArgument,
    NotFound,
    OffsetOutOfRange,
    TopicExists,
    TopicNotFound,
)
from broker.kafka_api.admin import KafkaAdmin, KafkaConfigs
from broker.kafka_api.codes import error_code, name_error
from broker.kafka_api.groups import Coordinator, KafkaError
from broker.kafka_api.records import gap_marker, read_batches, record_count, to_batch, to_columns, to_messages
from broker.kafka_api.transactions import KafkaTransactions, txn_error
from broker.messaging import MAX_BATCH, MessagingService
from broker.model import MAX_PULL, MAX_QUEUES, PULL_BYTES
from broker.operators import OperatorService

NODE_ID = 0
FETCH_POLL = 0.05  # seconds between looks at the fetched partitions during a long poll
CLUSTER_ID = "halfmq"
# A produce of up to this many records is checked a message at a time; beyond, as columns, whose
# fixed costs (some 25 Arrow calls, about 0.5 ms) a record's share of the checks then outweighs.
FEW_RECORDS = 200
DEFAULT_PARTITIONS = 1  # Kafka's num.partitions: a topic created on first use, or without a count

# What ApiVersions advertises: (min, max) per API key; a request of another key or version
# closes its connection (``broker.kafka_api.server``). The maxima are the last versions before
# each API's flexible encoding or newer features halfmq does not have; every client tested
# negotiates within them.
VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.Produce: (3, 8),
    ApiKey.Fetch: (4, 11),
    ApiKey.ListOffsets: (1, 5),
    ApiKey.Metadata: (0, 8),
    ApiKey.OffsetCommit: (2, 7),
    ApiKey.OffsetFetch: (1, 7),
    ApiKey.FindCoordinator: (0, 2),
    ApiKey.JoinGroup: (0, 5),
    ApiKey.Heartbeat: (0, 3),
    ApiKey.LeaveGroup: (0, 2),
    ApiKey.SyncGroup: (0, 3),
    ApiKey.DescribeGroups: (0, 6),
    ApiKey.ListGroups: (0, 4),
    ApiKey.SaslHandshake: (0, 1),
    ApiKey.ApiVersions: (0, 3),
    ApiKey.CreateTopics: (2, 4),
    ApiKey.DeleteTopics: (1, 3),
    ApiKey.DeleteGroups: (0, 2),
    ApiKey.InitProducerId: (0, 4),
    ApiKey.AddPartitionsToTxn: (0, 2),
    ApiKey.AddOffsetsToTxn: (0, 2),
    ApiKey.EndTxn: (0, 2),
    ApiKey.TxnOffsetCommit: (0, 3),
    ApiKey.SaslAuthenticate: (0, 1),
    ApiKey.DescribeAcls: (0, 2),
    ApiKey.DescribeConfigs: (1, 4),
    ApiKey.DescribeCluster: (0, 1),
    ApiKey.OffsetDelete: (0, 0),
    ApiKey.ListTransactions: (0, 1),
    ApiKey.DescribeTransactions: (0, 0),
}
REQUESTS: dict[ApiKey, Any] = {
    ApiKey.Produce: ProduceRequest,
    ApiKey.Fetch: FetchRequest,
    ApiKey.ListOffsets: ListOffsetsRequest,
    ApiKey.Metadata: MetadataRequest,
    ApiKey.OffsetCommit: OffsetCommitRequest,
    ApiKey.OffsetFetch: OffsetFetchRequest,
    ApiKey.FindCoordinator: FindCoordinatorRequest,
    ApiKey.JoinGroup: JoinGroupRequest,
    ApiKey.Heartbeat: HeartbeatRequest,
    ApiKey.LeaveGroup: LeaveGroupRequest,
    ApiKey.SyncGroup: SyncGroupRequest,
    ApiKey.DescribeGroups: DescribeGroupsRequest,
    ApiKey.ListGroups: ListGroupsRequest,
    ApiKey.SaslHandshake: SaslHandshakeRequest,
    ApiKey.ApiVersions: ApiVersionsRequest,
    ApiKey.CreateTopics: CreateTopicsRequest,
    ApiKey.DeleteTopics: DeleteTopicsRequest,
    ApiKey.DeleteGroups: DeleteGroupsRequest,
    ApiKey.InitProducerId: InitProducerIdRequest,
    ApiKey.AddPartitionsToTxn: AddPartitionsToTxnRequest,
    ApiKey.AddOffsetsToTxn: AddOffsetsToTxnRequest,
    ApiKey.EndTxn: EndTxnRequest,
    ApiKey.TxnOffsetCommit: TxnOffsetCommitRequest,
    ApiKey.SaslAuthenticate: SaslAuthenticateRequest,
    ApiKey.DescribeAcls: DescribeAclsRequest,
    ApiKey.DescribeConfigs: DescribeConfigsRequest,
    ApiKey.DescribeCluster: DescribeClusterRequest,
    ApiKey.OffsetDelete: OffsetDeleteRequest,
    ApiKey.ListTransactions: ListTransactionsRequest,
    ApiKey.DescribeTransactions: DescribeTransactionsRequest,
}
PLAIN = "PLAIN"


@dataclass
class Connection:
    """What the APIs know of the client on one connection."""

    client_host: str
    local: tuple[str, int]  # the address the client connected to
    authenticated: bool
    mechanism: str | None = None


def overlaps(api_key: ApiKey, request: Any) -> bool:
    """Whether the request may be handled beside the requests before it on its connection that
    may too (``broker.kafka_api.server``): a produce outside a transaction whose every partition's
    records are one store write (MAX_BATCH at most), so that the writes of produces handled
    together reach the store in the order they came."""
    if api_key != ApiKey.Produce or request.transactional_id is not None:
        return False
    counts = (record_count(part.records or b"") for data in request.topic_data for part in data.partition_data)
    return all(count is not None and count <= MAX_BATCH for count in counts)


class KafkaApis:
    def __init__(
        self,
        messaging: MessagingService,
        transactions: KafkaTransactions,
        coordinator: Coordinator,
        operators: OperatorService,
        configs: KafkaConfigs,
        *,
        advertised_host: str | None,
        advertised_port: int | None,
        auto_create_topics: bool,
        auth_token: str | None,
    ) -> None:
        self._messaging = messaging
        self._txns = transactions
        self._groups = coordinator
        self._operators = operators
        self._advertised_host = advertised_host
        self._advertised_port = advertised_port
        self._auto_create = auto_create_topics
        self._auth_token = auth_token
        admin = KafkaAdmin(messaging, operators, configs, node_id=NODE_ID, cluster_id=CLUSTER_ID, address=self._address)
        self.handlers: dict[ApiKey, Callable[[Any, Connection], Awaitable[Any]]] = {
            ApiKey.ApiVersions: self.api_versions,
            ApiKey.Metadata: self.metadata,
            ApiKey.CreateTopics: self.create_topics,
            ApiKey.DeleteTopics: self.delete_topics,
            ApiKey.Produce: self.produce,
            ApiKey.Fetch: self.fetch,
            ApiKey.ListOffsets: self.list_offsets,
            ApiKey.FindCoordinator: self.find_coordinator,
            ApiKey.JoinGroup: self.join_group,
            ApiKey.SyncGroup: self.sync_group,
            ApiKey.Heartbeat: self.heartbeat,
            ApiKey.LeaveGroup: self.leave_group,
            ApiKey.OffsetCommit: self.offset_commit,
            ApiKey.OffsetFetch: self.offset_fetch,
            ApiKey.DescribeGroups: self.describe_groups,
            ApiKey.ListGroups: self.list_groups,
            ApiKey.DeleteGroups: self.delete_groups,
            ApiKey.InitProducerId: self.init_producer_id,
            ApiKey.AddPartitionsToTxn: lambda request, _: transactions.add_partitions(request, self._topic_exists),
            ApiKey.AddOffsetsToTxn: lambda request, _: transactions.add_offsets(request),
            ApiKey.TxnOffsetCommit: lambda request, _: transactions.txn_offset_commit(request, self._member_error),
            ApiKey.EndTxn: lambda request, _: transactions.end(request),
            ApiKey.SaslHandshake: self.sasl_handshake,
            ApiKey.SaslAuthenticate: self.sasl_authenticate,
            ApiKey.DescribeAcls: admin.describe_acls,
            ApiKey.DescribeConfigs: admin.describe_configs,
            ApiKey.DescribeCluster: admin.describe_cluster,
            ApiKey.OffsetDelete: admin.offset_delete,
            ApiKey.ListTransactions: lambda request, _: transactions.list_transactions(request),
            ApiKey.DescribeTransactions: lambda request, _: transactions.describe_transactions(request),
        }

    async def api_versions(self, request: Any, _: Connection) -> Any:
        keys = [
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in VERSIONS.items()
        ]
        return ApiVersionsResponse(error_code=0, api_keys=keys, throttle_time_ms=0)

    def _address(self, connection: Connection) -> tuple[str, int]:
        """The broker's address as clients are told it: the advertised host and port, each where
        given, else the host and port the client connected to."""
        host, port = connection.local
        return self._advertised_host or host, self._advertised_port or port

    async def metadata(self, request: Any, connection: Connection) -> Any:
        host, port = self._address(connection)
        names = None if request.topics is None else [t.name for t in request.topics]
        # Before v4 a request cannot say; Kafka then creates.
        auto_create = self._auto_create and getattr(request, "allow_auto_topic_creation", True)
        topics = []
        for name in [t.name for t in self._messaging.topics()] if names is None else names:
            try:
                try:
                    queues = self._messaging.queue_count(name)
                except TopicNotFound:
                    if not auto_create:
                        raise
                    await self._messaging.create_topic(name, DEFAULT_PARTITIONS)
                    queues = self._messaging.queue_count(name)
            except HalfmqError as exc:
                topics.append(
                    MetadataResponse.MetadataResponseTopic(error_code=error_code(exc), name=name, partitions=[])
                )
                continue
            partitions = [
                MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                    error_code=0,
                    partition_index=q,
                    leader_id=NODE_ID,
                    leader_epoch=0,
                    replica_nodes=[NODE_ID],
                    isr_nodes=[NODE_ID],
                    offline_replicas=[],
                )
                for q in range(queues)
            ]
            topics.append(MetadataResponse.MetadataResponseTopic(error_code=0, name=name, partitions=partitions))
        broker = MetadataResponse.MetadataResponseBroker(node_id=NODE_ID, host=host, port=port, rack=None)
        return MetadataResponse(
            throttle_time_ms=0, brokers=[broker], cluster_id=CLUSTER_ID, controller_id=NODE_ID, topics=topics
        )

    async def create_topics(self, request: Any, _: Connection) -> Any:
        results = []
        for topic in request.topics:
            invalid = name_error(topic.name)
            code, message = (
                (invalid, f"invalid topic name {topic.name!r}")
                if invalid is not None
                else await self._create_topic(topic, request.validate_only)
            )
            results.append(
                CreateTopicsResponse.CreatableTopicResult(name=topic.name, error_code=code, error_message=message)
            )
        return CreateTopicsResponse(throttle_time_ms=0, topics=results)

    async def _create_topic(self, topic: Any, validate_only: bool) -> tuple[int, str | None]:
        try:
            if topic.assignments:
                raise InvalidArgument("halfmq places partitions itself: give a partition count, not assignments")
            queues = DEFAULT_PARTITIONS if topic.num_partitions == -1 else topic.num_partitions
            if not 1 <= queues <= MAX_QUEUES:
                raise InvalidArgument(f"partitions must be between 1 and {MAX_QUEUES}, got {topic.num_partitions}")
            if validate_only:
                self._messaging.topic(topic.name)
                raise TopicExists(f"Topic '{topic.name}' already exists.")
            if not await self._messaging.create_topic(topic.name, queues):
                raise TopicExists(f"Topic '{topic.name}' already exists.")
        except NotFound:
            pass  # validate_only: it could be created
        except HalfmqError as exc:
            return error_code(exc), str(exc)
        return 0, None

    async def delete_topics(self, request: Any, _: Connection) -> Any:
        """Each topic deleted with its messages and offsets, or its error: POLICY_VIOLATION while a
        transaction or a delayed message of it is pending (halfmq's promise keeps their messages)."""
        results = []
        for name in request.topic_names:
            try:
                await self._operators.delete_topic(name)
                code = 0
            except HalfmqError as exc:
                code = error_code(exc)
            results.append(DeleteTopicsResponse.DeletableTopicResult(name=name, error_code=code))
        return DeleteTopicsResponse(throttle_time_ms=0, responses=results)

    async def produce(self, request: Any, _: Connection) -> Any:
        """Each partition's records are stored on their own, all at once, so that one group
        commit of the store's writer takes them together."""
        stored = iter(
            await asyncio.gather(
                *(
                    self._produce_partition(data.name, part, request.transactional_id)
                    for data in request.topic_data
                    for part in data.partition_data
                )
            )
        )
        topics = [
            ProduceResponse.TopicProduceResponse(
                name=data.name, partition_responses=[next(stored) for _ in data.partition_data]
            )
            for data in request.topic_data
        ]
        return None if request.acks == 0 else ProduceResponse(responses=topics, throttle_time_ms=0)

    async def _produce_partition(self, topic: str, part: Any, transactional_id: str | None) -> Any:
        try:
            base = await self._append(topic, part.index, part.records or b"", transactional_id)
            code, message = 0, None
        except HalfmqError as exc:
            base, message = -1, str(exc)
            code = error_code(exc) if transactional_id is None else txn_error(exc)
        return ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
            index=part.index, error_code=code, base_offset=base, error_message=message
        )

    async def _append(self, topic: str, partition: int, records: bytes, transactional_id: str | None) -> int:
        """Store a partition's record batches (in the producer's transaction, for a transactional
        producer); the first record's offset."""
        self._messaging.topic(topic)
        batches = read_batches(records)
        count = sum(len(batch.records) for batch in batches)
        if not count:
            raise InvalidArgument("a produce to a partition holds at least one record")
        if transactional_id is not None:
            if not all(batch.transactional for batch in batches):
                raise InvalidArgument("a transactional producer's record batches are marked transactional")
            messages = to_messages(topic, batches, partition)
            return await self._txns.send(transactional_id, batches[0].producer_epoch, partition, messages)
        if count <= FEW_RECORDS:
            sends = [partial(self._messaging.send_rows, to_messages(topic, batches, partition))]
        else:
            columns = to_columns(topic, batches, partition)
            sends = [
                partial(self._messaging.send_columns, columns.slice(start, MAX_BATCH))
                for start in range(0, count, MAX_BATCH)
            ]
        base = -1
        for start, send in zip(range(0, count, MAX_BATCH), sends, strict=True):
            appended = await send(queue_id=partition, all_or_none=True)
            for index, refusal in sorted(appended.refused.items())[:1]:
                raise type(refusal)(f"record {start + index}: {refusal}")
            base = appended.queue_offsets[0] if base < 0 else base
        return base

    async def fetch(self, request: Any, _: Connection) -> Any:
        deadline = time.monotonic() + request.max_wait_ms / 1000  # a wait in real time, whatever the broker's clock
        while True:
            responses, size = await self._fetch_once(request)
            if size >= max(request.min_bytes, 1) or time.monotonic() >= deadline:
                return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=responses)
            await asyncio.sleep(FETCH_POLL)

    async def _fetch_once(self, request: Any) -> tuple[list[Any], int]:
        budget = min(request.max_bytes, PULL_BYTES)
        responses, total = [], 0
        for topic in request.topics:
            partitions = []
            for part in topic.partitions:
                records: bytes | bytearray = b""
                low, high, code = -1, -1, 0
                try:
                    batch = await self._messaging.pull_unpacked(
                        topic.topic, part.partition, part.fetch_offset, MAX_PULL
                    )
                    low, high = batch.min_offset, batch.max_offset
                    if part.fetch_offset > high:
                        raise OffsetOutOfRange(f"offset {part.fetch_offset} is past the partition's end {high}")
                    count = _within(batch.messages.bodies, min(part.partition_max_bytes, budget - total), total == 0)
                    if count:
                        records = to_batch(batch.messages, count)
                        total += len(records)
                    elif not batch.messages and batch.next_offset > part.fetch_offset:  # only aborted offsets ahead
                        records = gap_marker(part.fetch_offset, batch.next_offset)
                except HalfmqError as exc:
                    code = error_code(exc)
                partitions.append(
                    FetchResponse.FetchableTopicResponse.PartitionData(
                        partition_index=part.partition,
                        error_code=code,
                        high_watermark=high,
                        last_stable_offset=high,
                        log_start_offset=low,
                        aborted_transactions=[],
                        records=records,
                    )
                )
            responses.append(FetchResponse.FetchableTopicResponse(topic=topic.topic, partitions=partitions))
        return responses, total

    async def list_offsets(self, request: Any, _: Connection) -> Any:
        topics = []
        for topic in request.topics:
            partitions = []
            for part in topic.partitions:
                code, offset = 0, -1
                try:
                    offset = await self._offset_for(topic.name, part.partition_index, part.timestamp)
                except HalfmqError as exc:
                    code = error_code(exc)
                partitions.append(
                    ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                        partition_index=part.partition_index, error_code=code, timestamp=-1, offset=offset
                    )
                )
            topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
        return ListOffsetsResponse(throttle_time_ms=0, topics=topics)

    async def _offset_for(self, topic: str, partition: int, timestamp: int) -> int:
        """-1: the partition's end; -2: its start; else the first offset stored at or after
        ``timestamp``, -1 if none was (Kafka's answer, from which clients fall back to the end)."""
        queues = await self._messaging.queue_offsets(topic)
        if partition not in queues:
            raise NotFound(f"topic {topic!r} has no partition {partition}")
        low, high = queues[partition]
        if timestamp == -1:
            return high
        if timestamp == -2:
            return low
        found = await self._messaging.first_offset_at(topic, partition, timestamp)
        return -1 if found is None else found

    async def find_coordinator(self, request: Any, connection: Connection) -> Any:
        host, port = self._address(connection)
        return FindCoordinatorResponse(
            throttle_time_ms=0, error_code=0, error_message=None, node_id=NODE_ID, host=host, port=port
        )

    async def join_group(self, request: Any, connection: Connection) -> Any:
        header = request.header
        rebalance = request.rebalance_timeout_ms if request.rebalance_timeout_ms >= 0 else request.session_timeout_ms
        try:
            joined = await self._groups.join(
                request.group_id,
                request.member_id,
                client_id=header.client_id or "",
                client_host=connection.client_host,
                protocol_type=request.protocol_type,
                protocols={p.name: bytes(p.metadata) for p in request.protocols},
                session_timeout=request.session_timeout_ms / 1000,
                rebalance_timeout=rebalance / 1000,
            )
        except KafkaError as exc:
            return JoinGroupResponse(throttle_time_ms=0, error_code=exc.errno, generation_id=-1, protocol_name="",
                                     leader="", member_id=request.member_id, members=[])  # fmt: skip
        members = [JoinGroupResponse.JoinGroupResponseMember(member_id=m, metadata=meta) for m, meta in joined.members]
        return JoinGroupResponse(
            throttle_time_ms=0,
            error_code=0,
            generation_id=joined.generation,
            protocol_name=joined.protocol,
            leader=joined.leader,
            member_id=joined.member_id,
            members=members,
        )

    async def sync_group(self, request: Any, _: Connection) -> Any:
        assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
        try:
            assignment = await self._groups.sync(
                request.group_id, request.member_id, request.generation_id, assignments
            )
            code = 0
        except KafkaError as exc:
            assignment, code = b"", exc.errno
        return SyncGroupResponse(throttle_time_ms=0, error_code=code, assignment=assignment)

    async def heartbeat(self, request: Any, _: Connection) -> Any:
        return HeartbeatResponse(
            throttle_time_ms=0,
            error_code=_code(self._groups.heartbeat, request.group_id, request.member_id, request.generation_id),
        )

    async def leave_group(self, request: Any, _: Connection) -> Any:
        return LeaveGroupResponse(
            throttle_time_ms=0, error_code=_code(self._groups.leave, request.group_id, request.member_id)
        )

    async def offset_commit(self, request: Any, _: Connection) -> Any:
        generation = request.generation_id_or_member_epoch
        group_code = _code(self._groups.check_generation, request.group_id, request.member_id, generation)
        topics = []
        for topic in request.topics:
            partitions = []
            for part in topic.partitions:
                code = group_code
                if not code:
                    try:
                        await self._messaging.commit_consumer_offset(
                            request.group_id, topic.name, part.partition_index, part.committed_offset, past_end=True
                        )
                    except HalfmqError as exc:
                        code = error_code(exc)
                partitions.append(
                    OffsetCommitResponse.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
                        partition_index=part.partition_index, error_code=code
                    )
                )
            topics.append(OffsetCommitResponse.OffsetCommitResponseTopic(name=topic.name, partitions=partitions))
        return OffsetCommitResponse(throttle_time_ms=0, topics=topics)

    async def offset_fetch(self, request: Any, _: Connection) -> Any:
        """The group's committed offsets; with ``require_stable``, a partition whose offset waits
        in an open transaction gets UNSTABLE_OFFSET_COMMIT (the client asks again), as in Kafka."""
        wanted = request.topics
        if wanted is None:
            committed = await self._messaging.committed_offsets(request.group_id)
            names = sorted({topic for _, topic, _, _ in committed})
            wanted = [OffsetFetchRequest.OffsetFetchRequestTopic(name=n, partition_indexes=None) for n in names]
        pending = await self._txns.pending_offsets(request.group_id) if request.require_stable else set()
        topics = []
        for topic in wanted:
            partitions = []
            try:
                offsets = await self._messaging.consumer_offsets(request.group_id, topic.name)
                code = 0
            except HalfmqError as exc:
                offsets, code = {}, error_code(exc)
            indexes = sorted(offsets) if topic.partition_indexes is None else topic.partition_indexes
            for index in indexes:
                unstable = (topic.name, index) in pending
                partitions.append(
                    OffsetFetchResponse.OffsetFetchResponseTopic.OffsetFetchResponsePartition(
                        partition_index=index,
                        committed_offset=-1 if unstable else offsets.get(index, -1),
                        metadata="",
                        error_code=kerr.UnstableOffsetCommitError.errno if unstable else code,
                    )
                )
            topics.append(OffsetFetchResponse.OffsetFetchResponseTopic(name=topic.name, partitions=partitions))
        return OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=0)

    async def describe_groups(self, request: Any, _: Connection) -> Any:
        """Each group's state and live members. A group only offsets are kept of is Empty; one
        nothing is known of is Dead, and from v6 GROUP_ID_NOT_FOUND, as Kafka answers."""
        stored = await self._stored_groups()
        described = []
        for name in request.groups:
            group = self._groups.group(name)
            state = self._state(name, stored)
            unknown = state is None and request.API_VERSION >= 6
            members = (
                []
                if group is None
                else [
                    DescribeGroupsResponse.DescribedGroup.DescribedGroupMember(
                        member_id=m.member_id,
                        client_id=m.client_id,
                        client_host=f"/{m.client_host}",  # as Kafka shows an address (Java's InetAddress)
                        member_metadata=m.protocols.get(group.protocol, b""),
                        member_assignment=m.assignment,
                    )
                    for m in group.members.values()
                ]
            )
            protocol_type = group.protocol_type if group is not None else "consumer" if state else ""
            described.append(
                DescribeGroupsResponse.DescribedGroup(
                    error_code=kerr.GroupIdNotFoundError.errno if unknown else 0,
                    error_message=f"Group {name} not found." if unknown else None,
                    group_id=name,
                    group_state=state or "Dead",
                    protocol_type=protocol_type,
                    protocol_data="" if group is None else group.protocol,
                    members=members,
                )
            )
        return DescribeGroupsResponse(throttle_time_ms=0, groups=described)

    async def list_groups(self, request: Any, _: Connection) -> Any:
        """Every group with live members or kept offsets, with its state (v4+), only those in the
        request's states if it names any."""
        stored = await self._stored_groups()
        live = {g.name: g.protocol_type for g in self._groups.groups()}
        wanted = set(getattr(request, "states_filter", None) or ())
        listed = []
        for name in sorted(stored | set(live)):
            state = self._state(name, stored) or "Dead"
            if not wanted or state in wanted:
                listed.append(
                    ListGroupsResponse.ListedGroup(
                        group_id=name, protocol_type=live.get(name, "consumer"), group_state=state
                    )
                )
        return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=listed)

    async def _stored_groups(self) -> set[str]:
        """The groups whose committed offsets are kept, or wait in an open transaction."""
        committed = {group for group, _, _, _ in await self._messaging.committed_offsets()}
        return committed | await self._txns.pending_groups()

    def _state(self, name: str, stored: set[str]) -> str | None:
        """Kafka's name of a group's state: its coordinator's, Empty for a group only offsets
        are kept of, None for one nothing is known of."""
        group = self._groups.group(name)
        if group is not None:
            return group.state.value
        return "Empty" if name in stored else None

    async def delete_groups(self, request: Any, _: Connection) -> Any:
        """Each group's offsets, deliveries and retry policy forgotten, or its error: NON_EMPTY_GROUP
        while it has live members (of any protocol), GROUP_ID_NOT_FOUND if nothing of it is kept."""
        results = []
        for name in request.groups_names:
            try:
                await self._operators.delete_group(name)
                code = 0
            except GroupNotEmpty:
                code = kerr.NonEmptyGroupError.errno
            except (GroupNotFound, InvalidArgument):
                code = kerr.GroupIdNotFoundError.errno
            except HalfmqError as exc:
                code = error_code(exc)
            results.append(DeleteGroupsResponse.DeletableGroupResult(group_id=name, error_code=code))
        return DeleteGroupsResponse(throttle_time_ms=0, results=results)

    def _topic_exists(self, name: str) -> bool:
        try:
            self._messaging.topic(name)
        except HalfmqError:
            return False
        return True

    async def init_producer_id(self, request: Any, _: Connection) -> Any:
        if request.transactional_id is not None:
            return await self._txns.init_producer_id(request)
        # An idempotent producer's id: random 62 bits, so that no producer, before or after a
        # restart, shares one (its records' message ids are made of it).
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=0, producer_id=random.getrandbits(62), producer_epoch=0
        )

    def _member_error(self, request: Any) -> int:
        """For TxnOffsetCommit v3 (KIP-447): the group membership check an offset commit gets, 0 if
        it passes; before v3 the request names no member."""
        if request.API_VERSION < 3:
            return 0
        return _code(self._groups.check_generation, request.group_id, request.member_id, request.generation_id)

    async def sasl_handshake(self, request: Any, connection: Connection) -> Any:
        code = 0 if request.mechanism == PLAIN else kerr.UnsupportedSaslMechanismError.errno
        if not code:
            connection.mechanism = PLAIN
        return SaslHandshakeResponse(error_code=code, mechanisms=[PLAIN])

    async def sasl_authenticate(self, request: Any, connection: Connection) -> Any:
        parts = bytes(request.auth_bytes).split(b"\0")
        password = parts[2].decode(errors="replace") if len(parts) == 3 else None
        if connection.mechanism != PLAIN or self._auth_token is None or password != self._auth_token:
            return SaslAuthenticateResponse(
                error_code=kerr.SaslAuthenticationFailedError.errno,
                error_message="authentication failed: PLAIN with the broker's auth token as the password",
                auth_bytes=b"",
            )
        connection.authenticated = True
        return SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=b"")


def _within(bodies: Sequence[bytes], budget: int, first: bool) -> int:
    """How many of the leading messages fit ``budget`` bytes; one at least if ``first``."""
    size = 0
    for count, body in enumerate(bodies):
        size += len(body) + 64
        if size > budget and (count or not first):
            return count
    return len(bodies)


def _code(call: Callable[..., None], *args: Any) -> int:
    try:
        call(*args)
    except KafkaError as exc:
        return exc.errno
    return 0
