"""Consumer groups' retries and dead letters, RocketMQ 5's: a message is delivered to a group at
most ``max_attempts`` times (RocketMQ's default: 16 retries after the first delivery), a consumer
that fails it waits ``backoff[n]`` before the next delivery, and one delivered that many times
and still not acknowledged goes to the group's dead-letter topic ``%DLQ%<group>``, a real topic
every reader can read, carrying where it came from in its properties.

A group that reads by offset (RocketMQ's classic consumers) gets a message again through its
retry topic ``%RETRY%<group>`` instead: a copy sent back there, due later, whose properties name
where it came from as a dead letter's do."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from broker.errors import InvalidArgument
from broker.model import DLQ_PREFIX, RESERVED_PROPERTIES, StoredMessage

# The properties of a dead letter: its topic (RocketMQ's name for it), its message id there, and
# how many times it was delivered to the group.
ORIGIN_TOPIC, ORIGIN_MESSAGE_ID, DELIVERY_ATTEMPTS = "RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "DELIVERY_ATTEMPTS"
# RocketMQ 5's backoff between deliveries to a concurrent group (seconds): its proxy's default
# retry policy (CustomizedRetryPolicy), 1 s, 5 s, 10 s, 30 s, 1 min ... 2 h.
ROCKETMQ_BACKOFF = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
# halfmq's backoff for a FIFO group: a fixed second, the message group waiting meanwhile.
FIFO_BACKOFF = (1.0,)
MAX_ATTEMPTS = 1000
MAX_BACKOFF = 24 * 3600.0  # seconds: one step of a backoff


@dataclass(frozen=True)
class RetryPolicy:
    """``max_attempts`` deliveries at most; ``backoff[n]`` seconds before delivery n + 2, the
    last step repeating. A ``fifo`` group is handed one message of a message group at a time,
    the next once that one is acknowledged or dead-lettered."""

    max_attempts: int
    backoff: tuple[float, ...] = ROCKETMQ_BACKOFF
    fifo: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.max_attempts <= MAX_ATTEMPTS:
            raise InvalidArgument(f"max attempts must be between 1 and {MAX_ATTEMPTS}, got {self.max_attempts}")
        if not 1 <= len(self.backoff) <= 64 or not all(0 < step <= MAX_BACKOFF for step in self.backoff):
            raise InvalidArgument(f"a backoff is 1 to 64 steps, each in (0, {MAX_BACKOFF:.0f}] seconds")


RETRY_PREFIX = "%RETRY%"


def dead_letter_topic(group: str) -> str:
    return f"{DLQ_PREFIX}{group}"


def retry_topic(group: str) -> str:
    return f"{RETRY_PREFIX}{group}"


def origin_of(message: StoredMessage) -> tuple[str, str]:
    """The topic and message id a message was first sent with: its own, or, for a copy sent back
    for a retry or as a dead letter, those its properties name."""
    properties = message.properties
    return properties.get(ORIGIN_TOPIC, message.topic), properties.get(ORIGIN_MESSAGE_ID, message.message_id)


def sent_back_properties(message: StoredMessage, attempts: int) -> dict[str, str]:
    """The properties of a copy of ``message`` sent back after ``attempts`` deliveries: its own,
    but those only the broker sets, and where it came from."""
    own = {k: v for k, v in message.properties.items() if k not in RESERVED_PROPERTIES}
    return dead_letter_properties(own, *origin_of(message), attempts)


def dead_letter_properties(properties: Mapping[str, str], topic: str, message_id: str, attempts: int) -> dict[str, str]:
    """A dead letter's properties: the message's, and where it came from."""
    return {**properties, ORIGIN_TOPIC: topic, ORIGIN_MESSAGE_ID: message_id, DELIVERY_ATTEMPTS: str(attempts)}
