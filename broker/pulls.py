"""Pulls: a queue's messages by offset, as rows or columns, and the queues' offset ranges.

``PullService`` needs only reads of the store's file, so it runs in the broker (as part of
``MessagingService``) and in a pull process (``broker.pull_process``) alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from broker.errors import InvalidArgument, OffsetOutOfRange
from broker.model import (
    MAX_PULL,
    PULL_BYTES,
    M,
    Packed,
    PullBatch,
    QueueColumns,
    StoredMessage,
    Topic,
    check_data_topic,
    check_queue,
)
from broker.store.reads import QueueReader
from broker.store.segments import Decode


def _next_offset(messages: list[StoredMessage] | QueueColumns | Packed, offset: int, high: int) -> int:
    """Where the pull after one from ``offset`` that read ``messages`` starts: after the last
    message read, or, when only gaps (offsets rolled back) lay below the queue's end, at the end."""
    if isinstance(messages, Packed):
        return messages.end
    if not len(messages):
        return max(offset, high)
    return (messages.queue_offsets[-1] if isinstance(messages, QueueColumns) else messages[-1].queue_offset) + 1


class PullService:
    """Read real topics' queues by offset; system topics are refused."""

    def __init__(self, reads: QueueReader, unpack: Decode | None = None) -> None:
        """``unpack``: the messages of a packed segment, from its bytes (the front end's that
        packs them); without it, ``pull_unpacked`` reads rows alone."""
        self._reads = reads
        self._unpack = unpack

    async def pull(self, topic: str, queue_id: int, offset: int, max_messages: int) -> PullBatch[list[StoredMessage]]:
        """Return up to ``max_messages`` messages of a queue from ``offset`` on, within PULL_BYTES
        (at least one message, whatever its size).

        Raises InvalidArgument, HiddenTopic or TopicNotFound.
        """
        return await self._pull(self._reads.read, topic, queue_id, offset, max_messages)

    async def pull_unpacked(self, topic: str, queue_id: int, offset: int, max_messages: int) -> PullBatch[QueueColumns]:
        """``pull_columns`` with a packed segment's messages unpacked, for a front end that
        encodes messages its own way (the Kafka port's record batches)."""
        if self._unpack is None:
            return await self._pull(self._reads.read_columns, topic, queue_id, offset, max_messages)
        batch = await self.pull_columns(topic, queue_id, offset, max_messages)
        messages = batch.messages
        if isinstance(messages, Packed):
            messages = self._unpack(messages.data)
        return PullBatch(messages, batch.next_offset, batch.min_offset, batch.max_offset)

    async def pull_columns(
        self, topic: str, queue_id: int, offset: int, max_messages: int
    ) -> PullBatch[QueueColumns | Packed]:
        """``pull`` as columns, or as the packed segment that holds exactly those messages. From
        inside a segment, the messages up to its end only (fewer than ``pull`` may return), so
        the next pull starts where a segment does."""
        return await self._pull(self._reads.read_packed, topic, queue_id, offset, max_messages)

    async def read_columns(
        self, topic: str, queue_id: int, offset: int, end: int, max_messages: int
    ) -> AsyncIterator[PullBatch[QueueColumns | Packed]]:
        """``pull_columns`` from ``offset`` on, each pull where the last one ended, until one
        reaches ``end`` or holds no message and does not move (the queue holds nothing more).
        Raises what ``pull_columns`` raises, and InvalidArgument for ``end`` not above ``offset``."""
        _check_max_messages(max_messages)
        if end <= offset:
            raise InvalidArgument(f"end must be above offset, got offset {offset} and end {end}")
        while offset < end:
            batch = await self.pull_columns(topic, queue_id, offset, min(max_messages, end - offset))
            yield batch
            if batch.next_offset <= offset:
                return
            offset = batch.next_offset

    async def _pull(
        self, read: Callable[[str, int, int, int, int], M], topic: str, queue_id: int, offset: int, max_messages: int
    ) -> PullBatch[M]:
        self._check_queue(topic, queue_id)
        if offset < 0:
            raise InvalidArgument(f"offset must be >= 0, got {offset}")
        _check_max_messages(max_messages)
        messages, (low, high) = await self._reads.query(self._read_with_range, read, topic, queue_id, offset,
                                                        max_messages)  # fmt: skip
        # Retention deletes a queue's oldest messages only, and ``low`` is where it stopped: a read
        # from below it found nothing at ``offset``, or a segment that outlived the rows deleted
        # from its front.
        if offset < low:
            raise OffsetOutOfRange(
                f"offset {offset} of {topic}/{queue_id} is below the queue's low offset {low}: retention deleted"
                f" those messages; pull from {low} on"
            )
        return PullBatch(messages, _next_offset(messages, offset, high), low, high)

    def _read_with_range(
        self, read: Callable[[str, int, int, int, int], M], topic: str, queue_id: int, offset: int, max_messages: int
    ) -> tuple[M, tuple[int, int]]:
        """The read and the queue's range as of one moment, on one reader thread."""
        with self._reads.snapshot():
            return read(topic, queue_id, offset, max_messages, PULL_BYTES), self._reads.queue_range(topic, queue_id)

    def topic(self, name: str) -> Topic:
        """A real topic. Raises InvalidArgument, HiddenTopic or TopicNotFound."""
        check_data_topic(name)
        return self._reads.topic(name)

    def queue_count(self, topic: str) -> int:
        """How many queues a real topic has. Raises InvalidArgument, HiddenTopic or TopicNotFound."""
        return self.topic(topic).queues

    async def queue_offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """``{queue_id: (min_offset, max_offset)}``, max being one past the newest message."""
        queues = range(self.queue_count(topic))
        return await self._reads.query(lambda: {q: self._reads.queue_range(topic, q) for q in queues})

    def _check_queue(self, topic: str, queue_id: int) -> None:
        check_queue(self.topic(topic), queue_id)


def _check_max_messages(max_messages: int) -> None:
    if not 1 <= max_messages <= MAX_PULL:
        raise InvalidArgument(f"max_messages must be between 1 and {MAX_PULL}, got {max_messages}")
