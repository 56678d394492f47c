"""What operators ask of a broker's data, one implementation behind the admin API, the CLI and
the dashboard: find messages and trace one, the consumer groups' progress, retries and the
delayed messages waiting, the store's size, move a consumer group's offsets, delete a group or
a topic, and send a group's dead letters back to where they came from."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from broker.clients import CONSUMER, Client, Clients
from broker.clock import Clock, system_clock, to_ms
from broker.errors import GroupNotEmpty, GroupNotFound, InvalidArgument, MessageNotFound, NotFound, TopicNotFound
from broker.messaging import MAX_BATCH, MessagingService
from broker.model import (
    RESERVED_PROPERTIES,
    Found,
    Message,
    Placement,
    StoredMessage,
    Trace,
    check_data_topic,
    check_message_id,
    check_name,
)
from broker.retry import DELIVERY_ATTEMPTS, ORIGIN_MESSAGE_ID, ORIGIN_TOPIC, dead_letter_topic
from broker.store import Store

MAX_FOUND = 1000
# A dead letter's properties that its message sent again does not carry: the broker's own, and
# where the letter came from (the new message is not a copy of it).
_NOT_RESENT = (*RESERVED_PROPERTIES, ORIGIN_TOPIC, ORIGIN_MESSAGE_ID, DELIVERY_ATTEMPTS)


@dataclass(frozen=True)
class ConsumerProgress:
    """A consumer group's committed offset in a queue, and the queue's end (the offset its next
    message will take): the group's lag is the difference."""

    group: str
    topic: str
    queue_id: int
    committed: int
    end: int


@dataclass(frozen=True)
class OffsetTarget:
    """Where a reset moves a group: ``EARLIEST`` or ``LATEST`` of each queue, ``OFFSET``
    (``value``, kept within each queue's range, as Kafka's tool does) or ``DATETIME`` (the
    first message stored at or after ``value``, broker ms; a queue's end when none was)."""

    kind: str
    value: int | None = None

    EARLIEST, LATEST, OFFSET, DATETIME = "EARLIEST", "LATEST", "OFFSET", "DATETIME"

    def __post_init__(self) -> None:
        valued = self.kind in (self.OFFSET, self.DATETIME)
        if self.kind not in (self.EARLIEST, self.LATEST, self.OFFSET, self.DATETIME):
            raise InvalidArgument(f"a reset goes to EARLIEST, LATEST, OFFSET or DATETIME, not {self.kind!r}")
        if valued != (self.value is not None) or (self.value is not None and self.value < 0):
            raise InvalidArgument(f"a reset to {self.kind} takes {'a number of at least 0' if valued else 'no value'}")


class OperatorService:
    def __init__(self, store: Store, messaging: MessagingService, clients: Clients, clock: Clock = system_clock):
        self._store = store
        self._messaging = messaging
        self._clients = clients
        self._clock = clock

    async def find(
        self,
        *,
        message_id: str | None = None,
        key: str | None = None,
        topic: str | None = None,
        since_ms: int | None = None,
        until_ms: int | None = None,
        limit: int = 100,
    ) -> list[Found]:
        """Messages, held or stored, newest first: by id, by key (of one topic if given), or of a
        topic stored from ``since_ms`` (default: ever) until before ``until_ms`` (default: now).
        Raises InvalidArgument (not exactly one of id, key, topic; a bad limit) or TopicNotFound."""
        if not 1 <= limit <= MAX_FOUND:
            raise InvalidArgument(f"a search returns 1 to {MAX_FOUND} messages, got {limit}")
        if sum(x is not None for x in (message_id, key)) + (topic is not None and key is None) != 1:
            raise InvalidArgument("find messages by an id, a key (with or without a topic), or a topic")
        if topic is not None:
            self._store.topic(topic)
        if message_id is not None:
            check_message_id(message_id)
            return await self._store.query(self._store.find_by_id, message_id, limit)
        if key is not None:
            return await self._store.query(self._store.find_by_key, key, topic, limit)
        assert topic is not None
        until = to_ms(self._clock()) + 1 if until_ms is None else until_ms
        return await self._store.query(self._store.find_in_time, topic, since_ms or 0, until, limit)

    async def message_at(self, topic: str, queue_id: int, offset: int) -> StoredMessage:
        """The message stored at ``offset`` of a queue. Raises MessageNotFound (none is there:
        never, not yet, or no longer), HiddenTopic or TopicNotFound."""
        self._store.topic(topic)
        found = await self._store.query(self._store.read, topic, queue_id, offset, 1, 1 << 62)
        if not found or found[0].queue_offset != offset:
            raise MessageNotFound(f"no message is stored at offset {offset} of queue {queue_id} of {topic!r}")
        return found[0]

    async def trace(self, message_id: str) -> Trace:
        """Where the message went, and each consumer group's part. Raises InvalidArgument or
        MessageNotFound."""
        check_message_id(message_id)
        trace = await self._store.query(self._store.trace, message_id)
        if not trace.found and trace.transaction is None:
            raise MessageNotFound(f"no message has id {message_id!r}")
        return trace

    async def consumer_progress(self, limit: int, offset: int) -> tuple[list[ConsumerProgress], int]:
        """A page of every consumer group's committed offsets, by group, topic and queue, each
        with its queue's end; and how many there are. Read in one snapshot."""

        def read() -> tuple[list[ConsumerProgress], int]:
            with self._store.snapshot():
                groups = self._store.consumer_groups()
                page = [
                    ConsumerProgress(group, topic, queue_id, committed, self._store.queue_range(topic, queue_id)[1])
                    for group, topic, queue_id, committed in groups[offset : offset + limit]
                ]
            return page, len(groups)

        return await self._store.query(read)

    async def retry_counts(self) -> dict[str, tuple[int, int]]:
        """Per consumer group: how many messages it is retrying, how many are in its dead-letter topic."""
        return await self._store.query(self._store.retry_counts)

    async def delayed_by_topic(self) -> dict[str, tuple[int, int]]:
        """Per topic with delayed messages waiting: how many, and when the first is due (ms)."""
        return await self._store.query(self._store.delayed_by_topic)

    async def usage(self) -> tuple[int, int]:
        """Bytes every file of the store takes on disk, and bytes of its databases' pages in use."""
        return await self._store.query(self._store.usage)

    async def reset_offsets(self, group: str, topic: str, target: OffsetTarget) -> dict[int, int]:
        """Move ``group``'s committed offsets in every queue of ``topic`` to ``target``; return
        them by queue. Refused with GroupNotEmpty while the group has live consumers, as Kafka
        refuses it; raises InvalidArgument, HiddenTopic or TopicNotFound."""
        check_name("consumer group", group)
        ranges = await self._messaging.queue_offsets(topic)
        self._check_empty(group, "reset")
        offsets = {}
        for queue_id, (low, high) in ranges.items():
            if target.kind == OffsetTarget.DATETIME:
                assert target.value is not None
                offsets[queue_id] = await self._messaging.offset_at(topic, queue_id, target.value)
            else:
                wanted = {OffsetTarget.EARLIEST: low, OffsetTarget.LATEST: high}.get(target.kind, target.value)
                assert wanted is not None
                offsets[queue_id] = min(max(wanted, low), high)
        await self._store.reset_offsets(group, topic, offsets)
        return offsets

    async def delete_offsets(self, group: str, topic: str, queue_ids: list[int]) -> None:
        """Forget ``group``'s committed offsets (and deliveries) in ``queue_ids`` of ``topic``: it
        reads them from where a new group starts. Refused with GroupNotEmpty while live consumers
        of the group consume the topic (as Kafka's OffsetDelete: a topic the group no longer
        consumes can be cleared while it runs); raises GroupNotFound if nothing of it is stored,
        InvalidArgument, HiddenTopic, TopicNotFound, or NotFound for a queue the topic does not have."""
        check_name("consumer group", group)
        ranges = await self._messaging.queue_offsets(topic)
        missing = sorted(set(queue_ids) - set(ranges))
        if missing:
            raise NotFound(f"topic {topic!r} has no queue {missing[0]}")
        self._refuse_live(group, self._clients.readers(group, topic), f"changed in {topic!r}")
        if not await self._store.delete_offsets(group, topic, queue_ids):
            raise GroupNotFound(f"consumer group {group!r} has no offsets, deliveries or retry policy")

    async def delete_group(self, group: str) -> None:
        """Forget a consumer group: its offsets (those waiting in an open Kafka transaction too,
        as Kafka drops them), deliveries and retry policy, and what front ends keep of it.
        Raises GroupNotEmpty while it has live consumers, GroupNotFound if nothing of it is kept."""
        check_name("consumer group", group)
        self._check_empty(group, "deleted")
        stored = await self._store.delete_group(group)
        known = self._clients.forget_group(group)  # told whether or not the store kept anything
        if not stored and not known:
            raise GroupNotFound(f"consumer group {group!r} has no offsets, deliveries or retry policy")

    async def delete_topic(self, name: str) -> None:
        """Delete a topic: its messages, consumer offsets, deliveries, segments and resolved
        transactions, their disk space handed back. Raises HiddenTopic, TopicNotFound, or
        TopicInUse while a transaction or a delayed message of it is pending (nothing changes)."""
        check_data_topic(name)
        await self._store.delete_topic(name)
        self._clients.forget_topic(name)
        await self._store.in_background(self._store.drop_topic_segments, name)

    async def resend_dead_letters(self, group: str, message_id: str | None = None) -> list[Placement]:
        """Send ``group``'s dead letters (only the one whose original message id is
        ``message_id``, if given) back to their original topics as new messages, which every
        group of those topics reads; the dead letters stay where they are; a group without any
        resends none. Every original topic is checked before any letter is sent, and letters go
        in writes of up to MAX_BATCH, each all or none. Raises InvalidArgument, MessageNotFound
        (no such dead letter), HiddenTopic or TopicNotFound (an original topic, since deleted)."""
        check_name("consumer group", group)
        letters_topic = dead_letter_topic(group)
        messages = []
        try:
            (low, high), *_ = (await self._messaging.queue_offsets(letters_topic)).values()
        except TopicNotFound:  # no dead letter yet
            low = high = 0
        for offset in range(low, high, MAX_FOUND):
            for letter in await self._store.query(self._store.read, letters_topic, 0, offset, MAX_FOUND, 1 << 62):
                if message_id is None or letter.properties.get(ORIGIN_MESSAGE_ID) == message_id:
                    kept = {k: v for k, v in letter.properties.items() if k not in _NOT_RESENT}
                    messages.append(Message(letter.properties.get(ORIGIN_TOPIC, ""), letter.body, uuid.uuid4().hex,
                                            letter.keys, letter.tags, kept, letter.born_timestamp))  # fmt: skip
        if message_id is not None and not messages:
            raise MessageNotFound(f"no dead letter of {group!r} comes from message {message_id!r}")
        for topic in sorted({m.topic for m in messages}):
            check_data_topic(topic)
            self._store.topic(topic)
        resent = []
        for first in range(0, len(messages), MAX_BATCH):
            resent += await self._messaging.send(messages[first : first + MAX_BATCH], typed=False)
        return resent

    def _check_empty(self, group: str, what: str) -> None:
        self._refuse_live(group, [c for c in self._clients.listed() if c.group == group and c.role == CONSUMER], what)

    @staticmethod
    def _refuse_live(group: str, live: list[Client], what: str) -> None:
        """Refuse with GroupNotEmpty when ``live``, the group's consumers in the way, has any."""
        if live:
            raise GroupNotEmpty(
                f"consumer group {group!r} has {len(live)} live consumer(s) ({live[0].protocol} {live[0].address});"
                f" it can be {what} once they have left"
            )
