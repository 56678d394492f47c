"""What producers send and consumers receive."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from enum import Enum
from typing import Generic, TypeVar


def new_message_id() -> str:
    """A fresh message id: 32 hex characters, nanoseconds first, then 64 random bits. Ids made
    one after another sort one after another, so the broker's indexes keyed by message id grow
    at their right edge (as UUIDv7 keys do), which makes its writes about 1.5x as fast."""
    # The ids are unique, not secret: the random bits come from Python's generator (reseeded in
    # every forked child), not the OS's, whose call lets go of the GIL and then waits for it back.
    return f"{time.time_ns():016x}{random.getrandbits(64):016x}"


MESSAGE_GROUP = "__SHARDINGKEY"  # the property that carries a FIFO message's group


@dataclass(frozen=True)
class Message:
    """A message to send. ``message_id`` defaults to a fresh id; a retried send reuses it.
    ``keys`` is a sequence of keys, or one key as a plain string (``keys="o-1"``).

    A delayed message: ``deliver_at`` (milliseconds since the epoch) is when the broker delivers
    it, invisible to every reader until then; ``delay`` (seconds from now) sets it for you. One
    already due is delivered at once. Raises ValueError given both.

    A FIFO message: the messages of one ``message_group`` go to one queue in the order they were
    sent, and a FIFO consumer group gets them one at a time. It travels as the property
    ``__SHARDINGKEY``, as in RocketMQ. It cannot be delayed (ValueError)."""

    topic: str
    body: bytes
    keys: Sequence[str] = ()
    tags: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)
    message_id: str = field(default_factory=new_message_id)
    deliver_at: int | None = None
    delay: InitVar[float | None] = None
    message_group: str | None = None

    def __post_init__(self, delay: float | None) -> None:
        if isinstance(self.keys, str):  # one key, not one key per character
            object.__setattr__(self, "keys", (self.keys,))
        if delay is not None:
            if self.deliver_at is not None:
                raise ValueError("give deliver_at or delay, not both")
            object.__setattr__(self, "deliver_at", int((time.time() + delay) * 1000))
        if self.message_group is not None and self.deliver_at is not None:
            raise ValueError("a FIFO message (with a message_group) cannot be delayed")


class LocalTransactionState(Enum):
    """What the listener says about its local transaction (RocketMQ's names are aliases)."""

    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"
    COMMIT_MESSAGE = "COMMIT"
    ROLLBACK_MESSAGE = "ROLLBACK"
    UNKNOW = "UNKNOWN"


class TransactionState(Enum):
    """The outcome the broker recorded for a transaction."""

    PENDING = "PENDING"
    COMMITTED = "COMMITTED"
    ROLLED_BACK = "ROLLED_BACK"
    DISCARDED = "DISCARDED"


@dataclass(frozen=True)
class TransactionSendResult:
    """Result of ``send_message_in_transaction`` (RocketMQ's name).

    ``state`` is what the broker recorded when it answered the end of the transaction
    (PENDING after UNKNOWN: the broker will check back), or None when the end could not be
    delivered in time; the broker's checks then resolve the transaction.
    """

    message_id: str
    transaction_id: str
    local_state: LocalTransactionState
    state: TransactionState | None


@dataclass(frozen=True)
class SendReceipt:
    """Where a normal message was stored. A delayed message's ``queue_offset`` is -1 (it takes one
    when due), and its ``recall_handle`` cancels it until then (``Producer.recall``)."""

    message_id: str
    topic: str
    queue_id: int
    queue_offset: int
    recall_handle: str = ""


@dataclass(frozen=True)
class ReceivedMessage:
    """A committed message read from a topic queue; timestamps are milliseconds."""

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

    @property
    def message_group(self) -> str | None:
        """The message group of a FIFO message, None for another."""
        return self.properties.get(MESSAGE_GROUP)


M = TypeVar("M")


@dataclass(frozen=True)
class PullResult(Generic[M]):
    """Messages of one queue (a list of ReceivedMessage, or a ``pyarrow.Table`` from
    ``pull_table``); pull again from ``next_offset``."""

    messages: M
    next_offset: int
    min_offset: int
    max_offset: int
