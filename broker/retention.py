"""Retention, in the spirit of Kafka's ``retention.ms`` / ``retention.bytes`` and RocketMQ's
``fileReservedTime``: what is older than its retention leaves the store, and the file hands the
space back.

- A topic's messages (the discard topic's too) leave once older than the topic's retention, or the
  broker's when the topic has none; a queue's low offset moves up.
- A resolved transaction (record, half message, op records, check history) leaves once resolved
  longer ago than the broker's retention. PENDING ones never do: ``max_half_age`` governs them.
- With a byte limit, while the store uses more, the oldest of all that may leave goes first,
  whatever its topic's retention.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from broker.clock import Clock, system_clock, to_ms
from broker.errors import HalfmqError
from broker.metrics import Metrics
from broker.model import HALF_TOPIC, OP_TOPIC
from broker.ratelog import RateLimitedLog
from broker.store import Store

log = logging.getLogger(__name__)

STEP = 1000  # rows deleted per write job: other writes never wait behind more than one step
RECLAIM_PAGES = 256  # pages handed back per write job (4 MiB moved within the file at most)
MIN_INTERVAL, MAX_INTERVAL = 0.5, 10.0


@dataclass(frozen=True)
class RetentionPolicy:
    """``seconds``: the broker's retention (0 keeps everything); ``max_bytes``: the most the store
    may use (None: no limit)."""

    seconds: float
    max_bytes: int | None = None


@dataclass
class Swept:
    """What one sweep deleted."""

    messages: int = 0
    transactions: int = 0

    def __add__(self, other: Swept) -> Swept:
        return Swept(self.messages + other.messages, self.transactions + other.transactions)

    def __bool__(self) -> bool:
        return bool(self.messages or self.transactions)


class RetentionService:
    """Sweeps the store now and then, a quarter of the shortest retention apart (0.5 s to 10 s)."""

    def __init__(self, store: Store, policy: RetentionPolicy, *, metrics: Metrics, clock: Clock = system_clock) -> None:
        self._store = store
        self._policy = policy
        self._metrics = metrics
        self._clock = clock
        self._log = RateLimitedLog(log)

    def _retention_of(self, topic_retention: float | None) -> float:
        return self._policy.seconds if topic_retention is None else topic_retention

    def interval(self) -> float:
        retentions = [self._retention_of(t.retention) for t in self._store.topics()] + [self._policy.seconds]
        shortest = min((r for r in retentions if r > 0), default=MAX_INTERVAL * 4)
        return min(MAX_INTERVAL, max(MIN_INTERVAL, shortest / 4))

    async def run(self) -> None:
        while True:
            try:
                await self.sweep()
            except HalfmqError as exc:  # the store failed this time: try again next time
                self._log.warning(exc.code, "retention sweep failed: %s", exc)
            await asyncio.sleep(self.interval())

    async def sweep(self) -> Swept:
        """Delete what retention says must go, then give the freed space back."""
        now = to_ms(self._clock())
        cutoffs = {
            topic.name: now - round(seconds * 1000)
            for topic in self._store.topics()
            if (seconds := self._retention_of(topic.retention)) > 0
        }
        swept = await self._expire(cutoffs, now - round(self._policy.seconds * 1000) if self._policy.seconds else None)
        if self._policy.max_bytes is not None:
            swept += await self._fit(now, self._policy.max_bytes)
        if swept:
            await self._reclaim()
            self._metrics.retention_deleted(swept.messages, swept.transactions)
            log.debug("retention deleted %d messages and %d transactions", swept.messages, swept.transactions)
        return swept

    async def _reclaim(self) -> None:
        """Hand the pages freed back to the file system (beyond those kept for reuse)."""
        while await self._store.reclaim(RECLAIM_PAGES):
            pass

    async def _fit(self, now: int, max_bytes: int) -> Swept:
        """Delete the oldest of everything, a slice of time at a time, until the store's files
        take at most ``max_bytes``, or nothing more may go (pending half messages). The files are
        counted as they will be once their logs are copied: the logs as a checkpoint at the start
        leaves them (emptied if no one writes; ``Store.log_bytes``), and the databases' pages
        (``Store.database_bytes``), measured again after each slice's space is handed back (the
        segments passed, the pages freed)."""
        store, swept, widen = self._store, Swept(), 1.0
        if await store.in_background(store.checkpoint):
            await store.in_background(store.cut_logs)
        logs = store.log_bytes()
        while True:
            used = logs + await store.query(store.database_bytes)
            oldest = await store.query(store.oldest_stored_at)
            share = widen * (used - max_bytes) / used
            if used <= max_bytes or oldest is None or share > 1:
                break
            cutoff = oldest + max(1, round((now - oldest) * share))
            deleted = await self._expire({topic.name: cutoff for topic in store.topics()}, cutoff)
            swept += deleted
            await store.in_background(store.expire_segments)
            await self._reclaim()
            widen = 1.0 if deleted else widen * 2  # nothing as old may go: look further
        if used > max_bytes:
            self._log.warning("over", "the store takes %d bytes, over --retention-bytes %d, and none of it may go",
                              used, max_bytes)  # fmt: skip
        return swept

    async def _expire(self, cutoffs: dict[str, int], transactions_cutoff: int | None) -> Swept:
        """Delete, queue by queue, the messages stored before their topic's cutoff (the half and
        op topics are left to their transactions), then the transactions resolved and the
        exactly-once batches committed before ``transactions_cutoff``: a step per write job, all
        queues' steps in the same group commit. Looks on a reader first, so that a sweep with
        nothing to delete writes nothing."""
        store = self._store
        bounds = {cutoff: await store.query(store.store_offset_at, cutoff) for cutoff in set(cutoffs.values())}
        swept = Swept()
        queues = [
            (name, queue_id, bounds[cutoff])
            for name, cutoff in cutoffs.items()
            if name not in (HALF_TOPIC, OP_TOPIC)
            for queue_id in range(store.topic(name).queues)
        ]
        queues = await store.query(store.expiring_queues, queues)
        while queues:
            counts = await asyncio.gather(*(store.expire_queue(t, q, bound, STEP) for t, q, bound in queues))
            swept.messages += sum(counts)
            queues = [queue for queue, count in zip(queues, counts, strict=True) if count == STEP]
        if transactions_cutoff is None:
            return swept
        transactions, ops, batches = await store.query(store.expiring_records, transactions_cutoff)
        while transactions and (count := await store.expire_transactions(transactions_cutoff, STEP)):
            swept.transactions += count
            transactions = count == STEP
        while ops:
            ops = await store.expire_ops(transactions_cutoff, STEP) == STEP
        if batches:
            await store.expire_batches(transactions_cutoff)
        return swept
