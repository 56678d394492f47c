"""Domain objects of the broker: messages, topics, transactions and their lifecycle.

Plain frozen dataclasses; they know nothing of protobuf, HTTP or SQL.
"""

from __future__ import annotations

import random
import re
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from functools import cached_property
from itertools import chain
from typing import Generic, TypeVar

from broker.errors import (
    HalfmqError,
    HiddenTopic,
    InvalidArgument,
    MessageTooLarge,
    MessageTypeMismatch,
    ProducerGroupMismatch,
    ResolutionConflict,
)

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
DISCARD_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SYSTEM_TOPICS = (HALF_TOPIC, OP_TOPIC, DISCARD_TOPIC)
# Properties the broker adds to a half message; never shown to producers or consumers.
SYSTEM_PROPERTIES = ("REAL_TOPIC", "REAL_QID", "PGROUP", "__transactionId__", "UNIQ_KEY")

MAX_QUEUES = 256
MAX_RETENTION = 100 * 365 * 86400.0  # seconds: a century; longer is a mistake (0 keeps forever)
# The largest gRPC message either side accepts. A message's size limit must leave room under it
# for the envelope, and a pull reply stays within PULL_BYTES (always at least one message).
MAX_WIRE_BYTES = 64 * 1024 * 1024
WIRE_ENVELOPE_BYTES = 1024 * 1024
PULL_BYTES = 16 * 1024 * 1024
MAX_PULL = 1024  # messages in one pull
# Like RocketMQ 5's proxy: at most 128 user properties, 16 KiB of them; keys are few and short.
MAX_PROPERTIES = 128
MAX_PROPERTIES_BYTES = 16 * 1024
MAX_KEYS = 64
# A delayed message's due time (broker ms), kept with it once delivered: RocketMQ's own name.
# A consumer's filter: whether the message with this tag and these properties is for it.
Admits = Callable[[str, Mapping[str, str]], bool]
DELIVER_AT = "TIMER_DELIVER_MS"
RESERVED_PROPERTIES = (*SYSTEM_PROPERTIES, "TRANSACTION_CHECK_TIMES", DELIVER_AT)
# The property holding a FIFO message's message group, RocketMQ's own name for it: messages of one
# group go to one queue, in the order they were sent.
MESSAGE_GROUP = "__SHARDINGKEY"
DLQ_PREFIX = "%DLQ%"  # a consumer group's dead-letter topic is %DLQ%<group>
MAX_MESSAGE_GROUP = 128  # characters
# RocketMQ's characters and Kafka's dot (Debezium's server.schema.table, orders.created).
_NAME = re.compile(r"[A-Za-z0-9._%|-]{1,127}")
_MESSAGE_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_TRANSACTION_ID = re.compile(r"[0-9a-f]{32}")
_CLIENT_ID = re.compile(r"[\x21-\x7e]{1,256}")


@dataclass(frozen=True)
class Message:
    """A message as a producer sends it; ``born_timestamp`` is the producer's clock (ms);
    ``deliver_at`` (broker ms), when set, makes it a delayed message: held until then, and, with
    ``timer`` (a time its producer named), delivered saying when it was due (``DELIVER_AT``), as
    RocketMQ's broker does for a timer and not for a delay level or a retry;
    ``queue_id``, when set, is the queue the producer chose (RocketMQ's remoting clients choose
    one), else the broker picks it."""

    topic: str
    body: bytes
    message_id: str
    keys: tuple[str, ...] = ()
    tags: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)
    born_timestamp: int = 0
    deliver_at: int | None = None
    queue_id: int | None = None
    timer: bool = True


@dataclass(frozen=True)
class StoredMessage:
    """A message at its position in a topic queue; ``store_timestamp`` is the broker's clock (ms)."""

    topic: str
    queue_id: int
    queue_offset: int
    message_id: str
    transaction_id: str
    keys: tuple[str, ...]
    tags: str
    properties: Mapping[str, str]
    body: bytes
    born_timestamp: int
    store_timestamp: int


# What a message found is (``Found.state``, besides a half message's transaction state), and
# what it is to a consumer group (``GroupTrace.state``).
STORED, DELAYED = "STORED", "DELAYED"
WAITING, DELIVERED, RETRYING, ACKNOWLEDGED, DEAD_LETTERED = (
    "WAITING", "DELIVERED", "RETRYING", "ACKNOWLEDGED", "DEAD_LETTERED"
)  # fmt: skip


@dataclass(frozen=True)
class Found:
    """A message found for an operator: ``state`` is STORED (at its position), DELAYED (held
    until ``due_at``, position -1) or, for a transaction's half message not committed, its
    transaction's state (PENDING, ROLLED_BACK, DISCARDED; position -1)."""

    message: StoredMessage
    state: str
    due_at: int | None = None


@dataclass(frozen=True)
class GroupTrace:
    """What became of a message for one consumer group: ``state`` is WAITING (not reached yet),
    DELIVERED (handed out, not acknowledged yet), RETRYING (sent back to the group's retry topic),
    ACKNOWLEDGED (its offset committed, or acknowledged) or DEAD_LETTERED; ``attempts`` counts
    deliveries where the broker knows them (0 where it does not); ``copies`` are its retries and
    its dead letter, oldest first."""

    group: str
    state: str
    attempts: int
    copies: tuple[StoredMessage, ...] = ()


@dataclass(frozen=True)
class Delivery:
    """A message handed to a consumer; ack it with ``receipt_handle`` before ``visible_at``."""

    message: StoredMessage
    receipt_handle: str
    attempt: int
    visible_at: int


@dataclass(frozen=True)
class Trace:
    """Where a message went: as sent (held, stored), its transaction if it had one, and each
    consumer group's part."""

    message_id: str
    found: tuple[Found, ...]
    transaction: Transaction | None
    groups: tuple[GroupTrace, ...]


@dataclass(frozen=True)
class Placement:
    """Where a sent message is stored. A delayed message has no offset (-1) until it is due, and a
    ``recall_handle`` that names it until then."""

    topic: str
    queue_id: int
    queue_offset: int
    message_id: str
    recall_handle: str = ""


@dataclass(frozen=True)
class QueueColumns:
    """Consecutive messages of one queue as columns, one value per message: text as UTF-8 bytes,
    keys and properties as their stored JSON. The columnar twin of a list of StoredMessage."""

    queue_offsets: Sequence[int]
    message_ids: Sequence[bytes]
    transaction_ids: Sequence[bytes]
    keys: Sequence[bytes]
    tags: Sequence[bytes]
    properties: Sequence[bytes]
    bodies: Sequence[bytes]
    born_timestamps: Sequence[int]
    store_timestamps: Sequence[int]

    def __len__(self) -> int:
        return len(self.queue_offsets)

    def cut(self, start: int, stop: int | None = None) -> QueueColumns:
        """The messages from ``start`` up to ``stop``."""
        return QueueColumns(*(list(getattr(self, f.name)[start:stop]) for f in fields(self)))

    @staticmethod
    def joined(parts: Sequence[QueueColumns]) -> QueueColumns:
        """The messages of ``parts``, one part after another."""
        return QueueColumns(
            *(list(chain.from_iterable(getattr(part, f.name) for part in parts)) for f in fields(QueueColumns))
        )

    @cached_property
    def body_bytes(self) -> int:
        """Bytes of the bodies (counted once: the batch service and the packer both bound by it)."""
        return sum(map(len, self.bodies))


@dataclass(frozen=True)
class MessageRows:
    """Checked messages as columns, one value per message, ready to store: keys and properties as
    their stored JSON. The columnar twin of a list of Message."""

    topics: Sequence[str]
    message_ids: Sequence[str]
    keys: Sequence[str]
    tags: Sequence[str]
    properties: Sequence[str]
    bodies: Sequence[bytes]
    born_timestamps: Sequence[int]

    def __len__(self) -> int:
        return len(self.message_ids)

    def take(self, indexes: Sequence[int]) -> MessageRows:
        """The messages at ``indexes``, in that order."""
        return MessageRows(*([getattr(self, f.name)[i] for i in indexes] for f in fields(self)))

    def as_stored(self, queue_offsets: Sequence[int], store_timestamp: int) -> QueueColumns:
        """These messages (of one queue, with no transaction) as the store holds them, stored at
        ``queue_offsets`` at ``store_timestamp``."""
        return QueueColumns(
            queue_offsets=queue_offsets,
            message_ids=_utf8(self.message_ids),
            transaction_ids=[b""] * len(self),
            keys=_utf8(self.keys),
            tags=_utf8(self.tags),
            properties=_utf8(self.properties),
            bodies=self.bodies,
            born_timestamps=self.born_timestamps,
            store_timestamps=[store_timestamp] * len(self),
        )


def _utf8(values: Sequence[str]) -> list[bytes]:
    """``values`` encoded, once when they are all the same (keys, tags or properties mostly are)."""
    first = values[0]
    return [first.encode()] * len(values) if values.count(first) == len(values) else [v.encode() for v in values]


@dataclass(frozen=True)
class Appended:
    """Where each message of a batch was stored (``queue_ids[i]``, ``queue_offsets[i]``; a
    message id already stored keeps its first position), or, by index, why it was refused
    (-1 in both then)."""

    queue_ids: Sequence[int]
    queue_offsets: Sequence[int]
    refused: Mapping[int, HalfmqError]
    # How many were stored by this call (not before, nor earlier in the batch).
    new: int

    def placements(self, topics: Sequence[str], message_ids: Sequence[str]) -> list[Placement | HalfmqError]:
        """Each message's Placement or refusal (one object per message: for per-message callers)."""
        return [
            self.refused[i] if i in self.refused else Placement(topic, queue_id, offset, message_id)
            for i, (topic, queue_id, offset, message_id) in enumerate(
                zip(topics, self.queue_ids, self.queue_offsets, message_ids, strict=True)
            )
        ]


@dataclass(frozen=True)
class Packed:
    """Messages of one queue up to offset ``end`` (exclusive), in the form the front end that
    serves them packed them in (``broker.store.segments``)."""

    data: bytes
    end: int


M = TypeVar("M", list[StoredMessage], QueueColumns, QueueColumns | Packed)


@dataclass(frozen=True)
class PullBatch(Generic[M]):
    """Messages of one queue, as StoredMessages or as QueueColumns; the next pull starts at
    ``next_offset``. ``max_offset`` is one past the newest."""

    messages: M
    next_offset: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True)
class Topic:
    """A real or system topic; ``retention`` in seconds overrides the broker's (0 keeps everything,
    None follows the broker's setting); ``message_type``: the one type it accepts (None: all)."""

    name: str
    queues: int
    retention: float | None = None
    message_type: MessageType | None = None


class MessageType(Enum):
    """RocketMQ 5's message types (LITE and PRIORITY are not supported)."""

    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"


def message_type_of(name: str) -> MessageType:
    """The message type named ``name`` (NORMAL, FIFO, DELAY, TRANSACTION, any case). Raises
    InvalidArgument for another."""
    try:
        return MessageType(name.upper())
    except ValueError:
        raise InvalidArgument(
            f"message type must be one of {', '.join(t.value for t in MessageType)}, got {name[:40]!r}"
        ) from None


def type_of(message: Message) -> MessageType:
    """A message's type as sent outside a transaction: FIFO with a message group, DELAY with a
    due time, else NORMAL."""
    if MESSAGE_GROUP in message.properties:
        return MessageType.FIFO
    return MessageType.NORMAL if message.deliver_at is None else MessageType.DELAY


def check_type(topic: Topic, sent: MessageType) -> None:
    """Raise MessageTypeMismatch unless ``topic`` accepts messages of type ``sent``."""
    if topic.message_type not in (None, sent):
        raise MessageTypeMismatch(
            f"topic {topic.name!r} accepts {topic.message_type.value} messages only, not {sent.value}"
        )


class Resolution(Enum):
    """What a producer says about its local transaction."""

    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"


class Source(Enum):
    """Who resolved a transaction: the producer's own call, its answer to a check, the check
    service's limits (discards), or an operator through the admin API."""

    CLIENT = "CLIENT"
    CHECK = "CHECK"
    OPERATOR = "OPERATOR"


class TransactionState(Enum):
    """Lifecycle of a half message. A resolved state is final."""

    PENDING = "PENDING"
    COMMITTED = "COMMITTED"
    ROLLED_BACK = "ROLLED_BACK"
    DISCARDED = "DISCARDED"

    def transition(self, target: TransactionState) -> bool:
        """Return True if moving to ``target`` changes the state, False if it repeats it.

        Raises ResolutionConflict when the move is not allowed (the first resolution wins).
        """
        if target is self:
            return False
        if target not in _TRANSITIONS[self]:
            raise ResolutionConflict(f"transaction already {self.value}; cannot become {target.value}")
        return True


_TRANSITIONS: dict[TransactionState, frozenset[TransactionState]] = {
    TransactionState.PENDING: frozenset(
        {TransactionState.COMMITTED, TransactionState.ROLLED_BACK, TransactionState.DISCARDED}
    ),
    TransactionState.COMMITTED: frozenset(),
    TransactionState.ROLLED_BACK: frozenset(),
    # An operator may resume a discarded message: it is pending again, with a fresh check budget.
    TransactionState.DISCARDED: frozenset({TransactionState.PENDING}),
}

RESOLVED_STATE = {Resolution.COMMIT: TransactionState.COMMITTED, Resolution.ROLLBACK: TransactionState.ROLLED_BACK}


@dataclass(frozen=True)
class Transaction:
    """A half message's transaction record; times are broker milliseconds."""

    transaction_id: str
    producer_group: str
    half_offset: int
    topic: str
    queue_id: int
    message_id: str
    state: TransactionState
    check_times: int
    half_stored_at: int
    last_check_at: int | None
    resolved_at: int | None = None
    resolution_source: str | None = None
    resumes: int = 0

    def check_owner(self, producer_group: str) -> None:
        """Raise ProducerGroupMismatch unless ``producer_group`` prepared this transaction."""
        if producer_group != self.producer_group:
            raise ProducerGroupMismatch(
                f"transaction {self.transaction_id} belongs to producer group {self.producer_group!r},"
                f" not {producer_group!r}"
            )


@dataclass(frozen=True)
class CheckRecord:
    """One check delivered to a producer session (broker milliseconds)."""

    check_no: int
    checked_at: int
    client_id: str


@dataclass(frozen=True)
class EndResult:
    """The recorded outcome of an end request; ``already_resolved`` when it repeated an earlier one."""

    state: TransactionState
    already_resolved: bool
    half_stored_at: int


@dataclass(frozen=True)
class OpenRange:
    """Messages of an exactly-once batch stored at offsets ``[first_offset, end_offset)`` of one
    queue, invisible until their batch commits; ``already_stored`` more were committed before
    (their ids were), so not stored again."""

    range_id: int
    queue_id: int
    first_offset: int
    end_offset: int
    already_stored: int


@dataclass(frozen=True)
class BatchEnd:
    """What ending an exactly-once batch did: ``already_committed`` when an earlier end had
    committed it (nothing committed now); how many messages it made visible and how many it
    deleted (its own ranges on a rollback, the group's earlier ranges left open)."""

    already_committed: bool
    committed: int
    rolled_back: int


class TxnState(Enum):
    """Where a transactional id's current or last Kafka-model transaction is."""

    READY = "READY"  # initialised, no transaction yet
    OPEN = "OPEN"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"


class AbortedBy(Enum):
    """Who aborted a Kafka-model transaction."""

    PRODUCER = "PRODUCER"
    FENCED = "FENCED"  # a producer with the same transactional id started
    TIMEOUT = "TIMEOUT"  # the broker: open longer than the producer's transaction timeout


@dataclass(frozen=True)
class ProducerEpoch:
    """What InitTransactions handed a producer: its epoch, the number of the id's last
    transaction (its next is one more), and whether it aborted one the id had open (with how
    many messages)."""

    epoch: int
    txn_number: int
    aborted: bool
    aborted_messages: int


@dataclass(frozen=True)
class TxnEnd:
    """What ending a Kafka-model transaction did: ``already_ended`` when an earlier end had ended
    it the same way (a retried end: nothing done now); messages made visible or deleted, and
    consumer offsets written or dropped."""

    already_ended: bool
    messages: int
    offsets: int


@dataclass(frozen=True)
class TransactionalId:
    """A transactional id as operators see it: its epoch and its current or last transaction."""

    transactional_id: str
    epoch: int
    timeout_ms: int
    txn_number: int
    state: TxnState
    aborted_by: AbortedBy | None
    began_at: int | None
    ended_at: int | None
    messages: int
    offsets: int
    committed: int
    aborted: int


@dataclass(frozen=True)
class OffsetInTxn:
    """A consumer group's next offset of a queue, sent to a Kafka-model transaction."""

    topic: str
    queue_id: int
    offset: int


def check_name(kind: str, value: str) -> str:
    """Return ``value`` if it is a valid topic or group name, else raise InvalidArgument."""
    if not _NAME.fullmatch(value):
        raise InvalidArgument(f"{kind} must be 1-127 characters of [A-Za-z0-9._%|-], got {value!r}")
    return value


def check_data_topic(name: str) -> str:
    """Return ``name`` if clients may produce to or read from it; raise otherwise. A consumer
    group's dead-letter topic, ``%DLQ%<group>``, is as long as its group allows."""
    check_name("topic", name.removeprefix(DLQ_PREFIX))
    if name in SYSTEM_TOPICS:
        raise HiddenTopic(f"topic {name!r} is a hidden system topic")
    return name


def check_message_id(value: str) -> str:
    if not _MESSAGE_ID.fullmatch(value):
        raise InvalidArgument(f"message_id must be 1-128 characters of [A-Za-z0-9_.:-], got {value!r}")
    return value


def check_transaction_id(value: str) -> str:
    if not _TRANSACTION_ID.fullmatch(value):
        raise InvalidArgument(f"transaction_id must be 32 lowercase hex characters, got {value!r}")
    return value


def check_batch_id(value: int) -> int:
    """Return ``value`` if it can name an exactly-once batch (at least 0), else raise InvalidArgument."""
    if value < 0:
        raise InvalidArgument(f"batch_id must be at least 0, got {value}")
    return value


def check_client_id(value: str) -> str:
    """Return ``value`` if it can name a producer session (shown to operators); raise otherwise."""
    if not _CLIENT_ID.fullmatch(value):
        raise InvalidArgument(f"client_id must be 1-256 printable ASCII characters without spaces, got {value[:64]!r}")
    return value


def message_size(message: Message | StoredMessage) -> int:
    """Bytes a message takes, counted the way its size limit counts them: body, keys, tags and properties."""
    return (
        len(message.body)
        + sum(len(k.encode()) for k in message.keys)
        + len(message.tags.encode())
        + sum(len(k.encode()) + len(v.encode()) for k, v in message.properties.items())
    )


def check_message(message: Message, max_message_bytes: int) -> Message:
    """Return ``message`` if every field is well formed and its size (body, keys, tags and
    properties together) is within ``max_message_bytes``; raise InvalidArgument or MessageTooLarge."""
    check_data_topic(message.topic)
    check_message_id(message.message_id)
    if len(message.keys) > MAX_KEYS or any(not key or len(key) > 1024 for key in message.keys):
        raise InvalidArgument(f"at most {MAX_KEYS} keys, each a non-empty string of at most 1024 characters")
    if len(message.tags) > 1024:
        raise InvalidArgument("tags must be at most 1024 characters")
    properties = message.properties
    if len(properties) > MAX_PROPERTIES:
        raise InvalidArgument(f"at most {MAX_PROPERTIES} properties, got {len(properties)}")
    properties_bytes = sum(len(k.encode()) + len(v.encode()) for k, v in properties.items())
    if properties_bytes > MAX_PROPERTIES_BYTES:
        raise InvalidArgument(f"properties take {properties_bytes} bytes; the limit is {MAX_PROPERTIES_BYTES}")
    if any(not key for key in properties) or set(properties) & set(RESERVED_PROPERTIES):
        raise InvalidArgument(f"property names must be non-empty and not one of {', '.join(RESERVED_PROPERTIES)}")
    group = properties.get(MESSAGE_GROUP)
    if group is not None and not (0 < len(group) <= MAX_MESSAGE_GROUP and group.strip()):
        raise InvalidArgument(f"a message group is 1 to {MAX_MESSAGE_GROUP} characters, not all blank")
    if group is not None and message.deliver_at is not None:
        raise InvalidArgument("a FIFO message (one with a message group) cannot be delayed")
    size = message_size(message)
    if size > max_message_bytes:
        raise MessageTooLarge(
            f"the message is {size} bytes (body {len(message.body)}, with keys, tags and properties);"
            f" the limit is {max_message_bytes}"
        )
    return message


T = TypeVar("T")


def single(outcomes: Sequence[T | HalfmqError]) -> T:
    """The outcome of a one-item batch: its result, or its refusal raised."""
    (outcome,) = outcomes
    if isinstance(outcome, HalfmqError):
        raise outcome
    return outcome


def merged(checked: Sequence[T | HalfmqError | None], written: Sequence[T | HalfmqError]) -> list[T | HalfmqError]:
    """A batch's outcomes in item order: an item refused before the write keeps its error, and
    each ``None`` (an item sent to the write) takes the next of the write's outcomes."""
    outcomes = iter(written)
    return [next(outcomes) if item is None else item for item in checked]


def new_transaction_id() -> str:
    """A fresh transaction id: 32 hex characters, nanoseconds first, then 64 random bits. Ids
    made one after another sort one after another, so the indexes keyed by them grow at their
    right edge instead of touching a random page per insert (as UUIDv7 does for databases)."""
    # The ids are unique, not secret: the random bits come from Python's generator (reseeded in
    # every forked child), not the OS's, whose call lets go of the GIL and then waits for it back.
    return f"{time.time_ns():016x}{random.getrandbits(64):016x}"


def check_queue(topic: Topic, queue_id: int) -> int:
    """``queue_id`` if ``topic`` has that queue; raise InvalidArgument otherwise."""
    if not 0 <= queue_id < topic.queues:
        raise InvalidArgument(f"topic {topic.name!r} has queues 0..{topic.queues - 1}, not {queue_id}")
    return queue_id


def queue_for(message_id: str, queues: int) -> int:
    """The queue a message goes to: stable for a message id, spread evenly over the queues."""
    return zlib.crc32(message_id.encode()) % queues


def queue_of(message: Message, queues: int) -> int:
    """The queue its producer chose; else ``queue_for`` its message group for a FIFO message (all
    of a group in one queue), else for its id. Raises InvalidArgument for a chosen queue the
    topic does not have."""
    if message.queue_id is not None:
        if not 0 <= message.queue_id < queues:
            raise InvalidArgument(f"queue {message.queue_id} of topic {message.topic} does not exist: it has {queues}")
        return message.queue_id
    return queue_for(message.properties.get(MESSAGE_GROUP, message.message_id), queues)


def check_view(half: StoredMessage) -> StoredMessage:
    """The half message as its producer sent it, for a check: the real topic and queue, the
    user's properties only (RocketMQ restores these the same way before it checks)."""
    properties = half.properties
    return replace(
        half,
        topic=properties.get("REAL_TOPIC", half.topic),
        queue_id=int(properties.get("REAL_QID", half.queue_id)),
        properties={k: v for k, v in properties.items() if k not in SYSTEM_PROPERTIES},
    )
