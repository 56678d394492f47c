"""Pydantic schemas of the admin API: the HTTP edge's view of the core's domain objects."""

from __future__ import annotations

from typing import Annotated, Generic, Literal, TypeVar

from fastapi import Path, Query
from pydantic import BaseModel, Field

from broker.clock import to_ms
from broker.model import (
    MAX_QUEUES,
    MAX_RETENTION,
    AbortedBy,
    CheckRecord,
    Found,
    Transaction,
    TransactionalId,
    TransactionState,
    TxnState,
)
from broker.transaction.check import CheckPolicy

T = TypeVar("T")
MAX_OFFSET = 2**62  # list offsets beyond SQLite's 64-bit integers are refused, not a server error


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


# The pagination query parameters every list endpoint takes.
Limit = Annotated[int, Query(ge=1, le=1000, description="items per page")]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="items to skip")]


# Every time in the admin API, as in the SDK, is broker time in epoch milliseconds; durations are seconds.
EpochMs = Annotated[int, Field(description="broker time, milliseconds since the epoch")]
_RETENTION = "seconds its committed messages are kept; 0 keeps them all, null follows the broker's --retention"


# A topic's or consumer group's name, as ``broker.model.check_name`` takes it.
NAME_PATTERN = r"^[A-Za-z0-9._%|-]{1,127}$"
GroupName = Annotated[str, Path(pattern=NAME_PATTERN, description="a consumer group")]
TopicName = Annotated[str, Field(pattern=NAME_PATTERN)]

MessageTypeName = Literal["NORMAL", "FIFO", "DELAY", "TRANSACTION"]
_MESSAGE_TYPE = "the one message type it accepts; null accepts every type"


class TopicIn(BaseModel):
    name: str = Field(min_length=1, max_length=127, pattern=r"^[A-Za-z0-9._%|-]+$")
    queues: int = Field(default=4, ge=1, le=MAX_QUEUES)
    retention_seconds: float | None = Field(
        default=None, ge=0, le=MAX_RETENTION, description=f"{_RETENTION}; null leaves an existing topic's as it is"
    )
    message_type: MessageTypeName | None = Field(default=None, description=f"{_MESSAGE_TYPE}; fixed at creation")


class TopicOut(BaseModel):
    name: str
    queues: int
    retention_seconds: float | None = Field(description=_RETENTION)
    message_type: MessageTypeName | None = Field(description=_MESSAGE_TYPE)
    delayed: int = Field(default=0, description="delayed messages waiting to be delivered")
    next_due: int | None = Field(default=None, description="when the first of them is due, broker epoch ms")


class TopicCreated(TopicOut):
    created: bool


class RetryPolicyIn(BaseModel):
    """A consumer group's retry policy; null follows the broker's (``--max-delivery-attempts``,
    RocketMQ 5's backoff of 1 s, 5 s, 10 s, 30 s, 1 min ... 2 h, or a fixed 1 s for a FIFO group)."""

    max_attempts: int | None = Field(default=None, ge=1, le=1000, description="deliveries before the dead letters")
    backoff_seconds: list[float] | None = Field(
        default=None, min_length=1, max_length=64, description="seconds before each redelivery; the last repeats"
    )
    fifo: bool = Field(
        default=False, description="a FIFO group gets one message of a message group at a time, in send order"
    )


class RetryPolicyOut(BaseModel):
    group: str
    max_attempts: int
    backoff_seconds: list[float]
    fifo: bool
    dead_letter_topic: str
    retrying: int = Field(description="messages the group got more than once and has not acknowledged yet")
    dead_letters: int = Field(description="messages in its dead-letter topic")


class RetryCountsOut(BaseModel):
    group: str
    retrying: int = Field(description="messages the group got more than once and has not acknowledged yet")
    dead_letters: int = Field(description="messages in its dead-letter topic")


class MessageIn(BaseModel):
    """A test message sent through the admin API (normal, not transactional)."""

    body: str = Field(description="UTF-8 text")
    keys: list[str] = Field(default_factory=list)
    tags: str = ""
    properties: dict[str, str] = Field(default_factory=dict)


class SendReceiptOut(BaseModel):
    message_id: str
    topic: str
    queue_id: int
    queue_offset: int


class QueueOut(BaseModel):
    queue_id: int
    min_offset: int
    max_offset: int


class CheckOut(BaseModel):
    check_no: int
    checked_at: EpochMs
    client_id: str

    @classmethod
    def of(cls, check: CheckRecord) -> CheckOut:
        return cls(check_no=check.check_no, checked_at=check.checked_at, client_id=check.client_id)


class TransactionOut(BaseModel):
    transaction_id: str
    message_id: str
    producer_group: str
    topic: str
    queue_id: int
    state: TransactionState
    check_times: int
    half_stored_at: EpochMs
    age_seconds: float
    last_check_at: EpochMs | None
    next_check_at: EpochMs | None = Field(
        description="pending only: the earliest time of its next check (the first check round from then sends it);"
        " null when no check will go, because no producer of its group is online (orphaned) or the checks are used up"
    )
    discard_at: EpochMs | None = Field(
        description="pending only: when the check service discards it if it is still unresolved then"
    )
    orphaned: bool = Field(description="pending, and no producer of its group is online")
    resolved_at: EpochMs | None
    resolution_source: str | None


class TransactionDetail(TransactionOut):
    keys: list[str]
    tags: str
    properties: dict[str, str]
    body_size: int
    checks: list[CheckOut]


class KafkaMemberOut(BaseModel):
    member_id: str
    client_id: str
    client_host: str
    assigned: list[str] = Field(description="its partitions, as topic/partition")


class KafkaGroupOut(BaseModel):
    """A consumer group of Kafka clients, as its coordinator holds it."""

    name: str
    state: str = Field(description="Empty, PreparingRebalance, CompletingRebalance or Stable")
    protocol: str = Field(description="the assignor its members agreed on")
    generation: int
    members: list[KafkaMemberOut]


class ClientOut(BaseModel):
    """A connected client, under one group it produces to or consumes for."""

    protocol: str = Field(description="the port it came through: grpc (native), rocketmq, remoting, kafka")
    group: str = Field(description="the producer or consumer group")
    role: str = Field(description="producer or consumer")
    client_id: str
    address: str = Field(description="host:port it connects from (Kafka: the host)")


class TransactionalIdOut(BaseModel):
    """A Kafka-model producer's transactional id: its epoch and its current or last transaction."""

    transactional_id: str
    epoch: int = Field(description="the producer epoch of the producer holding the id; older ones are fenced")
    txn_number: int = Field(description="the number of the id's current or last transaction")
    state: TxnState = Field(description="of that transaction; READY when the id has had none")
    aborted_by: AbortedBy | None = Field(description="ABORTED only: the producer, fencing, or the timeout")
    began_at: EpochMs | None
    ended_at: EpochMs | None
    age_seconds: float | None = Field(description="OPEN only: seconds since the transaction began")
    timeout_seconds: float = Field(description="how long a transaction of this producer may stay open")
    messages: int = Field(description="messages sent in that transaction")
    offsets: int = Field(description="OPEN only: consumer offsets waiting to commit with it")
    committed: int = Field(description="transactions of the id committed in all")
    aborted: int = Field(description="transactions of the id aborted in all")

    @classmethod
    def of(cls, given: TransactionalId, now_ms: int) -> TransactionalIdOut:
        is_open = given.state is TxnState.OPEN and given.began_at is not None
        return cls(
            transactional_id=given.transactional_id,
            epoch=given.epoch,
            txn_number=given.txn_number,
            state=given.state,
            aborted_by=given.aborted_by,
            began_at=given.began_at,
            ended_at=given.ended_at,
            age_seconds=max(now_ms - given.began_at, 0) / 1000 if is_open and given.began_at is not None else None,
            timeout_seconds=given.timeout_ms / 1000,
            messages=given.messages,
            offsets=given.offsets,
            committed=given.committed,
            aborted=given.aborted,
        )


class ConsumerOut(BaseModel):
    group: str
    topic: str
    queue_id: int
    offset: int
    max_offset: int
    lag: int


class Stats(BaseModel):
    """Counters since the broker started, for rates: differences between two readings."""

    time: EpochMs
    pending_half_messages: int
    totals: dict[str, float] = Field(description="committed, rolled_back, discarded, checks_<outcome>")
    store_bytes: int = Field(description="bytes every file of the store takes on disk: databases, logs and indexes")
    store_used_bytes: int = Field(description="bytes of the databases' pages in use; free pages left out")


class Health(BaseModel):
    status: str
    pending_half_messages: int
    producer_sessions: int
    ports: dict[str, int] = Field(description="the port each protocol serves: grpc, http, rocketmq (0: off), kafka")


def transaction_out(txn: Transaction, *, now_ms: int, online: bool, policy: CheckPolicy) -> dict[str, object]:
    """The fields of TransactionOut for ``txn`` at broker time ``now_ms``: times to come are never in the past."""
    pending = txn.state is TransactionState.PENDING
    answer_by = None if txn.last_check_at is None else txn.last_check_at + to_ms(policy.check_timeout)
    checks_left = txn.check_times < policy.check_max
    next_check = discard = None
    if pending:
        discard = txn.half_stored_at + to_ms(policy.max_half_age)
        if checks_left and online:
            next_check = max(txn.half_stored_at + to_ms(policy.transaction_timeout), answer_by or 0, now_ms)
        elif not checks_left:
            discard = min(discard, max(answer_by or 0, now_ms))
        discard = max(discard, now_ms)
    return {
        "transaction_id": txn.transaction_id,
        "message_id": txn.message_id,
        "producer_group": txn.producer_group,
        "topic": txn.topic,
        "queue_id": txn.queue_id,
        "state": txn.state,
        "check_times": txn.check_times,
        "half_stored_at": txn.half_stored_at,
        "age_seconds": max(now_ms - txn.half_stored_at, 0) / 1000,
        "last_check_at": txn.last_check_at,
        "next_check_at": next_check,
        "discard_at": discard,
        "orphaned": pending and not online,
        "resolved_at": txn.resolved_at,
        "resolution_source": txn.resolution_source,
    }


class FoundOut(BaseModel):
    """A message found: where it is, or why it is held."""

    state: str = Field(
        description="STORED; DELAYED (held until due_at); or a half message's transaction state (PENDING,"
        " ROLLED_BACK, DISCARDED), not delivered"
    )
    topic: str
    queue_id: int
    queue_offset: int = Field(description="-1 while held")
    message_id: str
    transaction_id: str
    keys: list[str]
    tags: str
    properties: dict[str, str]
    body: str = Field(description="UTF-8 text, each byte that is not replaced by U+FFFD")
    body_size: int
    born_at: EpochMs
    stored_at: EpochMs = Field(description="when it was stored, or held")
    due_at: EpochMs | None = None

    @classmethod
    def of(cls, found: Found) -> FoundOut:
        m = found.message
        return cls(
            state=found.state, topic=m.topic, queue_id=m.queue_id, queue_offset=m.queue_offset,
            message_id=m.message_id, transaction_id=m.transaction_id, keys=list(m.keys), tags=m.tags,
            properties=dict(m.properties), body=m.body.decode(errors="replace"), body_size=len(m.body),
            born_at=m.born_timestamp, stored_at=m.store_timestamp, due_at=found.due_at,
        )  # fmt: skip


class GroupTraceOut(BaseModel):
    group: str
    state: str = Field(description="WAITING, DELIVERED, RETRYING, ACKNOWLEDGED or DEAD_LETTERED")
    attempts: int = Field(description="deliveries, where the broker knows them (0 where it does not)")
    copies: list[FoundOut] = Field(description="its retries and its dead letter, oldest first")


class TraceOut(BaseModel):
    message_id: str
    found: list[FoundOut] = Field(description="the message as held or stored, newest first")
    transaction: TransactionOut | None
    groups: list[GroupTraceOut]


class ResetToEnd(BaseModel):
    topic: TopicName
    to: Literal["EARLIEST", "LATEST"]


class ResetToOffset(BaseModel):
    topic: TopicName
    to: Literal["OFFSET"]
    offset: int = Field(ge=0, description="the offset, kept within each queue's range")


class ResetToDatetime(BaseModel):
    topic: TopicName
    to: Literal["DATETIME"]
    timestamp: EpochMs = Field(ge=0, description="each queue's first message stored at or after it")


ResetIn = Annotated[ResetToEnd | ResetToOffset | ResetToDatetime, Field(discriminator="to")]


class ResetOut(BaseModel):
    group: str
    topic: str
    offsets: dict[int, int] = Field(description="each queue's new committed offset")


class ResendIn(BaseModel):
    message_id: str | None = Field(default=None, description="only the dead letter of this original message id")


class QueueMessagesOut(BaseModel):
    """Messages of one queue from an offset on; the next read starts at ``next_offset``."""

    messages: list[FoundOut]
    next_offset: int
    min_offset: int
    max_offset: int = Field(description="one past the newest")
