"""Exactly-once batches (the Spark sink): a producer group prepares tables of messages as open
ranges of a batch (stored at their final offsets, invisible until the batch commits), then ends
the batch once: commit makes its ranges visible and records the batch, so a replay commits
nothing; every end rolls back what the group still has open at that batch or below. A batch
never ended is rolled back after ``timeout``, so that no queue's readers wait on it for good.

A prepared range's messages are kept, as the store holds them, until their batch ends (within
HELD_BYTES): a commit hands them to the packer, which packs them without reading them back."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker.clock import Clock, system_clock, to_ms
from broker.columns import MessageColumns, check_columns
from broker.errors import HalfmqError, InvalidArgument
from broker.messaging import MAX_BATCH, MessagingService
from broker.model import (
    BatchEnd,
    MessageRows,
    MessageType,
    OpenRange,
    QueueColumns,
    Resolution,
    check_batch_id,
    check_data_topic,
    check_name,
    check_type,
)
from broker.ratelog import RateLimitedLog
from broker.store import Store

log = logging.getLogger(__name__)

SWEEP_INTERVAL = 1.0  # seconds between looks for batches past their timeout
HELD_BYTES = 128 * 1024 * 1024  # bodies of prepared ranges kept until their batch ends; more are read back


@dataclass(frozen=True)
class _Held:
    """A prepared range's messages as the store holds them, until its batch ends."""

    producer_group: str
    batch_id: int
    topic: str
    opened: OpenRange
    columns: QueueColumns
    opened_ms: int


class BatchService:
    def __init__(
        self,
        store: Store,
        messaging: MessagingService,
        *,
        max_body_bytes: int,
        timeout: float,
        clock: Clock = system_clock,
        on_committed: Callable[[str, int, QueueColumns], None] | None = None,
    ) -> None:
        """``on_committed(topic, queue_id, columns)`` is told of each committed range it kept
        (the packer packs them from there), in offset order per queue."""
        self._store = store
        self._messaging = messaging
        self._max_body_bytes = max_body_bytes
        self._timeout_ms = to_ms(timeout)
        self._clock = clock
        self._log = RateLimitedLog(log)
        self._on_committed = on_committed
        self._held: dict[int, _Held] = {}  # by range id
        self._held_bytes = 0

    async def prepare(self, producer_group: str, batch_id: int, columns: MessageColumns) -> OpenRange:
        """Store a table of messages of one topic in one queue (the topic's queues take turns) as
        an open range of the group's batch, all or none. Raises InvalidArgument,
        MessageTooLarge, HiddenTopic or TopicNotFound, or for a row the error a single send
        would get, naming the row."""
        check_name("producer group", producer_group)
        check_batch_id(batch_id)
        if not 1 <= len(columns) <= MAX_BATCH:
            raise InvalidArgument(f"a batch holds 1 to {MAX_BATCH} messages, got {len(columns)}")
        check_data_topic(columns.topic)
        check_type(self._store.topic(columns.topic), MessageType.NORMAL)
        checked = check_columns(columns, self._max_body_bytes)
        for row, refusal in sorted(checked.refused.items())[:1]:
            raise type(refusal)(f"row {row}: {refusal}")
        queue_id = self._messaging.take_turn(columns.topic)
        now_ms = self._now_ms()
        opened = await self._store.prepare_range(producer_group, batch_id, checked.rows, queue_id, now_ms)
        self._hold(producer_group, batch_id, checked.rows, opened, now_ms)
        return opened

    async def end(
        self, producer_group: str, batch_id: int, resolution: Resolution, range_ids: Sequence[int]
    ) -> BatchEnd:
        """End a batch of ``producer_group``. COMMIT makes ``range_ids`` visible and records the
        batch, in one store transaction, unless it was recorded before (then nothing is
        committed: a replayed batch). ROLLBACK commits nothing. Both roll back whatever the group
        still has open at ``batch_id`` or below.

        Raises InvalidArgument (a malformed group or batch id, a resolution other than COMMIT or
        ROLLBACK, ranges given with ROLLBACK) or RangeNotOpen; nothing is written then."""
        check_name("producer group", producer_group)
        check_batch_id(batch_id)
        if resolution not in (Resolution.COMMIT, Resolution.ROLLBACK):
            raise InvalidArgument("a batch ends with COMMIT or ROLLBACK")
        if resolution is Resolution.ROLLBACK and range_ids:
            raise InvalidArgument("ROLLBACK names no ranges: it rolls back all that is open of the batch")
        commit = range_ids if resolution is Resolution.COMMIT else None
        ended = await self._store.end_batch(producer_group, batch_id, commit, self._now_ms())
        if commit and not ended.already_committed and self._on_committed is not None:
            runs = [self._held[range_id] for range_id in set(commit) if range_id in self._held]
            for held in sorted(runs, key=lambda h: (h.opened.queue_id, h.opened.first_offset)):
                self._on_committed(held.topic, held.opened.queue_id, held.columns)
        self._release(lambda h: h.producer_group == producer_group and h.batch_id <= batch_id)
        return ended

    async def expire(self) -> int:
        """Roll back the ranges open longer than the timeout; return how many messages went.
        Looks on a reader first, so that a broker with no batch past its time writes nothing."""
        cutoff = self._now_ms() - self._timeout_ms
        self._release(lambda h: h.opened_ms < cutoff)
        oldest = await self._store.query(self._store.oldest_open_range)
        return 0 if oldest is None or oldest >= cutoff else await self._store.expire_ranges(cutoff)

    async def run(self) -> None:
        while True:
            try:
                if expired := await self.expire():
                    log.warning("rolled back %d messages of batches left open over the batch timeout", expired)
            except HalfmqError as exc:  # the store failed this time: try again next time
                self._log.warning(exc.code, "rolling back timed-out batches failed: %s", exc)
            await asyncio.sleep(SWEEP_INTERVAL)

    def _hold(self, producer_group: str, batch_id: int, rows: MessageRows, opened: OpenRange, now_ms: int) -> None:
        """Keep a range of messages all stored anew, while HELD_BYTES allows."""
        if self._on_committed is None or opened.already_stored or opened.first_offset == opened.end_offset:
            return
        columns = rows.as_stored(list(range(opened.first_offset, opened.end_offset)), now_ms)
        if self._held_bytes + columns.body_bytes <= HELD_BYTES:
            self._held[opened.range_id] = _Held(producer_group, batch_id, rows.topics[0], opened, columns, now_ms)
            self._held_bytes += columns.body_bytes

    def _release(self, done: Callable[[_Held], bool]) -> None:
        """Forget the kept ranges ``done`` picks."""
        for range_id in [range_id for range_id, held in self._held.items() if done(held)]:
            self._held_bytes -= self._held.pop(range_id).columns.body_bytes

    def _now_ms(self) -> int:
        return to_ms(self._clock())
