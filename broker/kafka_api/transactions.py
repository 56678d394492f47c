"""Kafka's transactional producer APIs over halfmq's Kafka-model transactions (the same ids,
epochs, fencing and timeouts as the native SDK's): InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn, and the transactional Produce.

Kafka's requests name no transaction, only a transactional id and its producer's epoch; the core
numbers transactions. ``_number`` finds the one the producer works in: the id's open one, else
the next, read from the store once and followed in memory as transactions end (a restarted
broker reads it again).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from kafka import errors as kerr
from kafka.protocol.admin import DescribeTransactionsResponse, ListTransactionsResponse
from kafka.protocol.producer import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    InitProducerIdResponse,
    TxnOffsetCommitResponse,
)

from broker.errors import HalfmqError, InvalidTxnState, ProducerFenced, TransactionAborted, TransactionalIdNotFound
from broker.kafka_txn import MAX_TIMEOUT, KafkaTxnService
from broker.messaging import MAX_BATCH
from broker.model import Message, OffsetInTxn, TransactionalId, TxnState

MAX_EPOCH = 32767  # a Kafka producer epoch is an int16
# Kafka's names of a transactional id's state (its TransactionState) for halfmq's.
STATE_NAMES = {TxnState.READY: "Empty", TxnState.OPEN: "Ongoing", TxnState.COMMITTED: "CompleteCommit",
               TxnState.ABORTED: "CompleteAbort"}  # fmt: skip


def producer_id_of(transactional_id: str) -> int:
    """A transactional id's producer id: the same for the id on every broker start (62 bits of a
    hash of it; idempotent producers draw theirs at random from the same space)."""
    return int.from_bytes(hashlib.blake2b(transactional_id.encode(), digest_size=8).digest(), "big") >> 2


def txn_error(exc: HalfmqError) -> int:
    """Kafka's code for a refused transactional call. A fenced producer, and one whose
    transaction the broker aborted at its timeout, get INVALID_PRODUCER_EPOCH, as Kafka's
    coordinator answers once it bumped the epoch."""
    if isinstance(exc, ProducerFenced | TransactionAborted):
        return int(kerr.InvalidProducerEpochError.errno)
    if isinstance(exc, InvalidTxnState):
        return int(kerr.InvalidTxnStateError.errno)
    if isinstance(exc, TransactionalIdNotFound):
        return int(kerr.InvalidProducerIdMappingError.errno)
    return int(kerr.InvalidRequestError.errno)


class KafkaTransactions:
    def __init__(self, txns: KafkaTxnService) -> None:
        self._txns = txns
        self._numbers: dict[str, int] = {}  # per transactional id: the transaction its producer works in

    async def init_producer_id(self, request: Any) -> Any:
        timeout = request.transaction_timeout_ms / 1000
        if not 0 < timeout <= MAX_TIMEOUT:
            return _init_failed(kerr.InvalidTransactionTimeoutError.errno)
        producer_id = producer_id_of(request.transactional_id)
        held = getattr(request, "producer_id", -1), getattr(request, "producer_epoch", -1)  # v3+: an epoch bump
        fenced = kerr.ProducerFencedError.errno if request.API_VERSION >= 4 else kerr.InvalidProducerEpochError.errno
        if held[0] not in (-1, producer_id):
            return _init_failed(fenced)
        try:
            started = await self._txns.init(request.transactional_id, timeout, None if held[1] == -1 else held[1])
        except ProducerFenced:
            return _init_failed(fenced)
        except HalfmqError:
            return _init_failed(kerr.InvalidRequestError.errno)
        if started.epoch > MAX_EPOCH:
            return _init_failed(kerr.ProducerFencedError.errno)
        self._numbers[request.transactional_id] = started.txn_number + 1
        return InitProducerIdResponse(
            throttle_time_ms=0,
            error_code=0,
            producer_id=producer_id,
            producer_epoch=started.epoch,
        )

    async def add_partitions(self, request: Any, topic_exists: Any) -> Any:
        code = await self._check(request.v3_and_below_transactional_id, request.v3_and_below_producer_epoch)
        results = []
        for topic in request.v3_and_below_topics:
            topic_code = code or (0 if topic_exists(topic.name) else kerr.UnknownTopicOrPartitionError.errno)
            results.append(
                AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(
                    name=topic.name,
                    results_by_partition=[
                        AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult(
                            partition_index=p, partition_error_code=topic_code
                        )
                        for p in topic.partitions
                    ],
                )
            )
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=results)

    async def add_offsets(self, request: Any) -> Any:
        code = await self._check(request.transactional_id, request.producer_epoch)
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)

    async def txn_offset_commit(self, request: Any, member_error: Callable[[Any], int]) -> Any:
        """The offsets kept with the transaction, once ``member_error`` (the group's membership
        check of the request) finds nothing wrong."""
        offsets = [
            OffsetInTxn(topic.name, part.partition_index, part.committed_offset)
            for topic in request.topics
            for part in topic.partitions
        ]
        code = member_error(request)
        try:
            if not code:
                number = await self._number(request.transactional_id)
                await self._txns.send_offsets(
                    request.transactional_id, request.producer_epoch, number, request.group_id, offsets, past_end=True
                )
        except HalfmqError as exc:
            code = txn_error(exc)
        topics = [
            TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition(
                        partition_index=part.partition_index, error_code=code
                    )
                    for part in topic.partitions
                ],
            )
            for topic in request.topics
        ]
        return TxnOffsetCommitResponse(throttle_time_ms=0, topics=topics)

    async def end(self, request: Any) -> Any:
        tid = request.transactional_id
        try:
            number = await self._number(tid)
            await self._txns.end(tid, request.producer_epoch, number, request.committed)
            self._numbers[tid] = number + 1
            code = 0
        except HalfmqError as exc:
            code = txn_error(exc)
        return EndTxnResponse(throttle_time_ms=0, error_code=code)

    async def send(self, transactional_id: str, epoch: int, partition: int, messages: Sequence[Message]) -> int:
        """Store a transactional producer's records of one partition in its transaction; the first
        one's offset. Raises as KafkaTxnService.send."""
        number = await self._number(transactional_id)
        base = -1
        for start in range(0, len(messages), MAX_BATCH):
            placed = await self._txns.send(
                transactional_id, epoch, number, messages[start : start + MAX_BATCH], queue_id=partition
            )
            base = placed[0][1] if base < 0 else base
        return base

    async def list_transactions(self, request: Any) -> Any:
        """The transactional ids, filtered as Kafka's coordinator filters them: by state name,
        producer id, and (v1+) a transaction begun more than ``duration_filter`` ms ago."""
        states = set(request.state_filters)
        producers = set(request.producer_id_filters)
        duration = getattr(request, "duration_filter", -1)
        now_ms = self._txns.now_ms()
        listed = [
            ListTransactionsResponse.TransactionState(
                transactional_id=found.transactional_id,
                producer_id=producer_id_of(found.transactional_id),
                transaction_state=STATE_NAMES[found.state],
            )
            for found in await self._txns.transactional_ids()
            if (not states or STATE_NAMES[found.state] in states)
            and (not producers or producer_id_of(found.transactional_id) in producers)
            and (duration < 0 or now_ms - _started(found) > duration)
        ]
        unknown = sorted(states - set(STATE_NAMES.values()))
        return ListTransactionsResponse(
            throttle_time_ms=0, error_code=0, unknown_state_filters=unknown, transaction_states=listed
        )

    async def describe_transactions(self, request: Any) -> Any:
        """Each transactional id's producer, state and open transaction's partitions;
        TRANSACTIONAL_ID_NOT_FOUND for an id never initialised."""
        described = []
        for transactional_id in request.transactional_ids:
            found = await self._txns.transactional_ids(transactional_id)
            if not found:
                described.append(
                    DescribeTransactionsResponse.TransactionState(
                        error_code=kerr.TransactionalIdNotFoundError.errno,
                        transactional_id=transactional_id,
                        transaction_state="",
                        transaction_timeout_ms=0,
                        transaction_start_time_ms=-1,
                        producer_id=-1,
                        producer_epoch=-1,
                        topics=[],
                    )
                )
                continue
            queues = await self._txns.open_queues(transactional_id)
            topics = [
                DescribeTransactionsResponse.TransactionState.TopicData(
                    topic=topic, partitions=[q for t, q in queues if t == topic]
                )
                for topic in dict.fromkeys(t for t, _ in queues)
            ]
            described.append(
                DescribeTransactionsResponse.TransactionState(
                    error_code=0,
                    transactional_id=transactional_id,
                    transaction_state=STATE_NAMES[found[0].state],
                    transaction_timeout_ms=found[0].timeout_ms,
                    transaction_start_time_ms=_started(found[0]),
                    producer_id=producer_id_of(transactional_id),
                    producer_epoch=found[0].epoch,
                    topics=topics,
                )
            )
        return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=described)

    async def pending_groups(self) -> set[str]:
        """The groups with offsets waiting in an open transaction."""
        return await self._txns.pending_groups()

    async def pending_offsets(self, group: str) -> set[tuple[str, int]]:
        """The (topic, queue) offsets of ``group`` that wait in an open transaction."""
        return await self._txns.pending_offsets(group)

    async def _check(self, transactional_id: str, epoch: int) -> int:
        """0 if ``epoch`` is the id's producer's, else the error code for it."""
        found = await self._txns.transactional_ids(transactional_id)
        if not found:
            return int(kerr.InvalidProducerIdMappingError.errno)
        if epoch != found[0].epoch:
            return int(kerr.InvalidProducerEpochError.errno)
        return 0

    async def _number(self, transactional_id: str) -> int:
        if transactional_id not in self._numbers:
            found = await self._txns.transactional_ids(transactional_id)
            if not found:
                raise TransactionalIdNotFound(f"transactional id {transactional_id!r} was never initialised")
            self._numbers[transactional_id] = found[0].txn_number + (found[0].state is not TxnState.OPEN)
        return self._numbers[transactional_id]


def _started(found: TransactionalId) -> int:
    """When the id's open or last transaction began (ms), as Kafka's coordinator keeps it after
    the transaction ends; -1 when the id has had none."""
    return -1 if found.began_at is None else found.began_at


def _init_failed(code: int) -> Any:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
