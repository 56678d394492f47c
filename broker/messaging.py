"""Topics, normal messages, pulls (``PullService``) and consumer offsets: everything but transactions."""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections.abc import Callable, Sequence
from typing import cast

from broker.clock import Clock, system_clock, to_ms
from broker.coalesce import Coalescer
from broker.columns import CheckedColumns, MessageColumns, check_columns, check_messages
from broker.delays import DelayService, due_of
from broker.errors import HalfmqError, InvalidArgument, TopicExists, TopicNotFound
from broker.model import (
    MAX_PULL,
    MAX_QUEUES,
    MAX_RETENTION,
    PULL_BYTES,
    SYSTEM_TOPICS,
    Admits,
    Appended,
    Delivery,
    Message,
    MessageRows,
    MessageType,
    Placement,
    QueueColumns,
    StoredMessage,
    Topic,
    check_data_topic,
    check_message,
    check_name,
    check_queue,
    check_type,
    merged,
    queue_of,
    type_of,
)
from broker.pulls import PullService
from broker.retry import (
    FIFO_BACKOFF,
    ROCKETMQ_BACKOFF,
    RetryPolicy,
    dead_letter_topic,
    retry_topic,
    sent_back_properties,
)
from broker.store import Store
from broker.store.segments import Decode

MAX_BATCH = 1024


class MessagingService(PullService):
    """Produce to and consume from real topics; system topics are refused."""

    def __init__(
        self,
        store: Store,
        delays: DelayService,
        *,
        max_body_bytes: int,
        max_delivery_attempts: int = 17,
        clock: Clock = system_clock,
        on_written: Callable[[str, int, QueueColumns], None] | None = None,
        unpack: Decode | None = None,
    ) -> None:
        """``delays`` holds the delayed messages sent; ``on_written(topic, queue_id, columns)`` is
        told of each run of new messages a table stored in one queue, as the store holds them
        (the packer packs them from there); ``unpack`` reads a packed segment (``PullService``)."""
        super().__init__(store, unpack)
        self._store = store
        self._delays = delays
        self._max_delivery_attempts = max_delivery_attempts
        self._on_written = on_written
        self._max_body_bytes = max_body_bytes
        self._clock = clock
        self._turns: dict[str, itertools.count[int]] = {}  # per topic: which queue takes the next table
        self._singles = Coalescer(self._send_items, MAX_BATCH)  # single sends arriving together: one write

    async def create_topic(
        self, name: str, queues: int, retention: float | None = None, message_type: MessageType | None = None
    ) -> bool:
        """Create a topic; True if created, False if it already existed with ``queues`` queues and
        ``message_type`` (the one type it accepts; None: every type). ``retention`` (seconds, 0
        keeps everything) is set on it, new or not; None leaves the topic's as it is (a new one
        follows the broker's).

        Raises InvalidArgument, HiddenTopic or TopicExists.
        """
        check_data_topic(name)
        if not 1 <= queues <= MAX_QUEUES:
            raise InvalidArgument(f"queues must be between 1 and {MAX_QUEUES}, got {queues}")
        if retention is not None and not 0 <= retention <= MAX_RETENTION:
            raise InvalidArgument(f"retention must be between 0 and {MAX_RETENTION:.0f} seconds, got {retention}")
        return await self._store.create_topic(name, queues, retention, message_type)

    def topics(self) -> list[Topic]:
        """The real topics (system topics are hidden)."""
        return [t for t in self._store.topics() if t.name not in SYSTEM_TOPICS]

    async def send(self, messages: Sequence[Message], *, typed: bool = True) -> list[Placement]:
        """Store messages, all or none, and return their positions; a retried message id is
        stored once. Delayed messages (``deliver_at`` ahead) are held until due: a batch holds
        them or immediate ones, not both. ``typed=False`` stores them whatever type their topic
        takes, as RocketMQ's broker does for its classic clients (its proxy checks types).
        Raises InvalidArgument, MessageTooLarge, InvalidDeliveryTime, MessageTypeMismatch,
        HiddenTopic or TopicNotFound."""
        if not 1 <= len(messages) <= MAX_BATCH:
            raise InvalidArgument(f"a batch holds 1 to {MAX_BATCH} messages, got {len(messages)}")
        now_ms = to_ms(self._clock())
        placed, delayed = [], set()
        for message in messages:
            placed.append((message, self._queue_of(message, typed)))
            if self._delays.is_delayed(message, now_ms):
                delayed.add(message.message_id)
        if delayed:
            if len(delayed) < len(messages):
                raise InvalidArgument("a batch holds delayed messages or immediate ones, not both")
            return await self._delays.hold(placed, now_ms)
        appended = await self._store.append(placed, now_ms)
        return cast(list[Placement], _placements(messages, appended))

    async def send_one(self, message: Message, *, typed: bool = True) -> Placement:
        """``send`` of one message; single sends that arrive together are stored in one write
        (``send_each``), as a RocketMQ producer's threads send one message each."""
        return await self._singles.submit((message, typed))

    async def send_each(self, messages: Sequence[Message]) -> list[Placement | HalfmqError]:
        """``send``, each message on its own, stored in one write (and the delayed ones in
        another): each gets its position or its own error. Raises InvalidArgument for a batch of
        the wrong size, or a failure of a write."""
        if not 1 <= len(messages) <= MAX_BATCH:
            raise InvalidArgument(f"a batch holds 1 to {MAX_BATCH} messages, got {len(messages)}")
        return await self._send_items([(message, True) for message in messages])

    async def _send_items(self, items: Sequence[tuple[Message, bool]]) -> list[Placement | HalfmqError]:
        """``send_each`` for (message, typed) items."""
        now_ms = to_ms(self._clock())
        results: list[Placement | HalfmqError | None] = []
        placed: list[tuple[Message, int]] = []
        held: list[tuple[Message, int]] = []
        waits: list[bool] = []  # per message that may be stored, whether it is held
        for message, typed in items:
            try:
                queue_id = self._queue_of(message, typed)
                waits.append(self._delays.is_delayed(message, now_ms))
            except HalfmqError as exc:
                results.append(exc)
                continue
            results.append(None)
            (held if waits[-1] else placed).append((message, queue_id))
        stored: list[Placement | HalfmqError] = []
        if placed:
            stored = _placements([m for m, _ in placed], await self._store.append_each(placed, now_ms))
        appended, holds = iter(stored), iter(await self._delays.hold(held, now_ms) if held else [])
        return merged(results, [next(holds) if wait else next(appended) for wait in waits])

    async def recall(self, topic: str, recall_handle: str) -> str:
        """Cancel a delayed message of ``topic`` before it is due; return its message id. Raises
        InvalidArgument, HiddenTopic, TopicNotFound or DelayedMessageNotFound."""
        check_data_topic(topic)
        self._store.topic(topic)
        return await self._delays.recall(topic, recall_handle)

    def is_due(self, recall_handle: str) -> bool:
        """Whether the delayed message a recall handle names was due by now: delivered, unless
        recalled before. Raises InvalidArgument for a malformed handle."""
        return due_of(recall_handle)[1] <= to_ms(self._clock())

    def _queue_of(self, message: Message, typed: bool = True) -> int:
        """The queue a message goes to, once it is found fit for its topic (its size, names and,
        when ``typed``, type). Raises InvalidArgument, MessageTooLarge, MessageTypeMismatch,
        HiddenTopic or TopicNotFound."""
        check_message(message, self._max_body_bytes)
        topic = self._store.topic(message.topic)
        if typed:
            check_type(topic, type_of(message))
        return queue_of(message, topic.queues)

    async def send_columns(
        self, columns: MessageColumns, queue_id: int | None = None, *, all_or_none: bool = False
    ) -> Appended:
        """Store a table of messages of one topic, all in one queue (``queue_id``, or, as RocketMQ
        stores a batch, the topic's queues in turns), each message on its own: its position or
        its refusal; with ``all_or_none``, a message the checks refuse refuses the table (its
        error raised, naming the message) and nothing is stored. A message id already in the
        topic keeps its position. Raises InvalidArgument for a table of the wrong size or a
        queue the topic lacks, HiddenTopic or TopicNotFound."""
        self._check_table(columns.topic, len(columns), queue_id)
        checked = check_columns(columns, self._max_body_bytes)
        return await self._send_checked(columns.topic, len(columns), checked, queue_id, all_or_none)

    async def send_rows(
        self, messages: Sequence[Message], queue_id: int | None = None, *, all_or_none: bool = False
    ) -> Appended:
        """``send_columns`` of messages of one topic already apart, checked one at a time: up to
        about 200 messages, cheaper than a table's checks. Raises InvalidArgument for messages of
        more than one topic too."""
        topic = messages[0].topic if messages else ""
        self._check_table(topic, len(messages), queue_id)
        if any(message.topic != topic for message in messages):
            raise InvalidArgument("the messages of a batch are of one topic")
        checked = check_messages(messages, self._max_body_bytes)
        return await self._send_checked(topic, len(messages), checked, queue_id, all_or_none)

    def _check_table(self, topic_name: str, count: int, queue_id: int | None) -> None:
        if not 1 <= count <= MAX_BATCH:
            raise InvalidArgument(f"a batch holds 1 to {MAX_BATCH} messages, got {count}")
        check_data_topic(topic_name)
        topic = self._store.topic(topic_name)
        check_type(topic, MessageType.NORMAL)
        if queue_id is not None:
            check_queue(topic, queue_id)

    async def _send_checked(
        self, topic: str, count: int, checked: CheckedColumns, queue_id: int | None, all_or_none: bool
    ) -> Appended:
        for index, refusal in sorted(checked.refused.items())[:1] if all_or_none else ():
            raise type(refusal)(f"message {index}: {refusal}")
        queue_id = self.take_turn(topic) if queue_id is None else queue_id
        stored = Appended([], [], {}, 0)
        if len(checked.rows):
            now_ms = to_ms(self._clock())
            stored = await self._store.append_rows(checked.rows, [queue_id] * len(checked.rows), now_ms)
            self._written(checked.rows, queue_id, stored, now_ms)
        if not checked.refused:
            return stored
        # Back to the table's rows: the refused ones in place, the stored ones in order.
        queue_ids, offsets, refused = [-1] * count, [-1] * count, dict(checked.refused)
        for row, index in enumerate(i for i in range(count) if i not in checked.refused):
            queue_ids[index], offsets[index] = stored.queue_ids[row], stored.queue_offsets[row]
            if row in stored.refused:
                refused[index] = stored.refused[row]
        return Appended(queue_ids, offsets, refused, stored.new)

    def take_turn(self, topic: str) -> int:
        """The queue of an existing topic that takes its next table."""
        return next(self._turns.setdefault(topic, itertools.count())) % self._store.topic(topic).queues

    def _written(self, rows: MessageRows, queue_id: int, stored: Appended, now_ms: int) -> None:
        """Tell ``on_written`` of ``rows`` if all were stored anew (so one after another)."""
        if self._on_written is not None and stored.new == len(rows):
            self._on_written(rows.topics[0], queue_id, rows.as_stored(stored.queue_offsets, now_ms))

    async def commit_consumer_offset(
        self, group: str, topic: str, queue_id: int, offset: int, *, past_end: bool = False
    ) -> None:
        """Store ``group``'s next offset of a queue; see ``check_offset`` for ``past_end``."""
        check_name("consumer group", group)
        await self.check_offset(topic, queue_id, offset, past_end=past_end)
        await self._store.commit_consumer_offset(group, topic, queue_id, offset)

    async def check_offset(self, topic: str, queue_id: int, offset: int, *, past_end: bool = False) -> None:
        """Raise unless ``offset`` can be a consumer's next offset of the queue: 0 up to its end,
        or any offset from 0 with ``past_end`` (Kafka stores whatever offset its clients commit;
        its readers then find it out of range and start again where their reset policy says)."""
        self._check_queue(topic, queue_id)
        if past_end and offset >= 0:
            return
        _, high = await self._store.query(self._store.queue_range, topic, queue_id)
        if not 0 <= offset <= high:
            raise InvalidArgument(
                f"offset of {topic!r} queue {queue_id} must be between 0 and the queue's end ({high}), got {offset}"
            )

    async def first_offset_at(self, topic: str, queue_id: int, timestamp_ms: int) -> int | None:
        """The offset of the queue's first message stored at or after ``timestamp_ms`` (broker ms),
        None if none was. Raises InvalidArgument, HiddenTopic or TopicNotFound."""
        self._check_queue(topic, queue_id)
        return await self._store.query(self._store.queue_offset_at, topic, queue_id, timestamp_ms)

    async def offset_at(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """As first_offset_at, but the queue's end if no message was stored at or after ``timestamp_ms``."""
        found = await self.first_offset_at(topic, queue_id, timestamp_ms)
        if found is not None:
            return found
        _, high = await self._store.query(self._store.queue_range, topic, queue_id)
        return high

    async def consumer_offsets(self, group: str, topic: str) -> dict[int, int]:
        check_name("consumer group", group)
        check_data_topic(topic)
        self._store.topic(topic)
        return await self._store.query(self._store.consumer_offsets, group, topic)

    async def committed_offsets(self, group: str | None = None) -> list[tuple[str, str, int, int]]:
        """Every committed consumer offset (of ``group`` only, if given) as (group, topic, queue_id, offset)."""
        return await self._store.query(self._store.consumer_groups, group)

    async def receive(
        self, group: str, topic: str, queue_id: int, batch: int, invisible_seconds: float, admits: Admits | None
    ) -> list[Delivery]:
        """Hand ``group`` up to ``batch`` messages of a queue, invisible to it for ``invisible_seconds``
        unless acknowledged; ``admits`` is the group's filter (None: every message). Raises InvalidArgument,
        HiddenTopic or TopicNotFound."""
        check_name("consumer group", group)
        self._check_queue(topic, queue_id)
        if not 1 <= batch <= MAX_PULL:
            raise InvalidArgument(f"batch must be between 1 and {MAX_PULL}, got {batch}")
        if not 0 < invisible_seconds <= 12 * 3600:
            raise InvalidArgument(f"invisible duration must be in (0, 12 h], got {invisible_seconds}s")
        policy = await self.retry_policy(group)
        return await self._store.receive(
            group,
            topic,
            queue_id,
            batch,
            to_ms(invisible_seconds),
            to_ms(self._clock()),
            admits,
            PULL_BYTES,
            policy,
        )

    async def retry_policy(self, group: str) -> RetryPolicy:
        """``group``'s retry policy: its own, else the broker's maximum and the default backoff
        (RocketMQ's for a concurrent group, a fixed second for a FIFO one)."""
        check_name("consumer group", group)
        max_attempts, backoff, fifo = await self._store.query(self._store.retry_policy_of, group)
        return self._policy(max_attempts, backoff, fifo)

    def _policy(self, max_attempts: int | None, backoff: tuple[float, ...] | None, fifo: bool) -> RetryPolicy:
        default = FIFO_BACKOFF if fifo else ROCKETMQ_BACKOFF
        return RetryPolicy(max_attempts or self._max_delivery_attempts, backoff or default, fifo)

    async def set_retry_policy(
        self, group: str, max_attempts: int | None, backoff: tuple[float, ...] | None, fifo: bool = False
    ) -> None:
        """Set ``group``'s retry policy (what ``mqadmin updateSubGroup`` sets); None follows the
        broker's. Raises InvalidArgument."""
        check_name("consumer group", group)
        self._policy(max_attempts, backoff, fifo)  # checks both
        await self._store.set_retry_policy(group, max_attempts, backoff, fifo)

    async def send_back(self, group: str, message: StoredMessage, attempts: int, delay: float | None) -> Placement:
        """Give ``group`` a message it failed, after its ``attempts``-th delivery: a copy through
        its retry topic, due ``delay`` seconds from now, or with ``delay`` None, to its dead-letter
        topic. Either topic is created, with one queue, on first use. Raises InvalidArgument."""
        check_name("consumer group", group)
        topic = retry_topic(group) if delay is not None else dead_letter_topic(group)
        await self.create_group_topic(topic)
        copy = Message(
            topic, message.body, uuid.uuid4().hex, message.keys, message.tags, sent_back_properties(message, attempts),
            message.born_timestamp, None if delay is None else to_ms(self._clock()) + round(delay * 1000), queue_id=0,
            timer=False,
        )  # fmt: skip
        return (await self.send([copy]))[0]

    async def create_group_topic(self, topic: str) -> None:
        """Create a group's retry or dead-letter topic, one queue, unless it exists (looked up in
        memory: each message sent back asks, and a write for a topic that exists is wasted)."""
        try:
            self.topic(topic)
        except TopicNotFound:
            with contextlib.suppress(TopicExists):  # another call made it meanwhile
                await self.create_topic(topic, 1)

    async def forward_to_dead_letters(self, group: str, topic: str, receipt_handle: str) -> None:
        """Move a received message to ``group``'s dead-letter topic now. Raises StaleReceiptHandle."""
        check_name("consumer group", group)
        check_data_topic(topic)
        await self._store.forward_to_dead_letters(group, topic, receipt_handle, to_ms(self._clock()))

    async def ack(self, group: str, topic: str, receipt_handle: str) -> None:
        """Acknowledge a received message. Raises StaleReceiptHandle if acknowledged or redelivered since."""
        check_name("consumer group", group)
        check_data_topic(topic)
        await self._store.ack(group, topic, receipt_handle)

    async def change_invisible(self, group: str, topic: str, receipt_handle: str, invisible_seconds: float) -> str:
        """Make a received message visible again after ``invisible_seconds``; returns its new receipt handle."""
        check_name("consumer group", group)
        check_data_topic(topic)
        if not 0 <= invisible_seconds <= 12 * 3600:
            raise InvalidArgument(f"invisible duration must be in [0, 12 h], got {invisible_seconds}s")
        return await self._store.change_invisible(
            group, topic, receipt_handle, to_ms(self._clock()) + to_ms(invisible_seconds)
        )


def _placements(messages: Sequence[Message], appended: Appended) -> list[Placement | HalfmqError]:
    return appended.placements([m.topic for m in messages], [m.message_id for m in messages])
