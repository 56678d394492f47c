"""The packer: packs every real topic's committed messages into segments (``broker.store.segments``)
in the background, a few segments of a queue at a time, on the store's background thread. A whole
SendColumns call's messages, all written to one queue, are handed over as soon as they are
committed: the packer keeps each queue's messages not yet packed in memory while they continue
its segments, and packs every whole segment from there, without reading it back. Runs that only
add to what a queue keeps, still short of a segment, are kept with it and cost no store work."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from dataclasses import dataclass

from broker.errors import HalfmqError
from broker.metrics import Metrics
from broker.model import MAX_PULL, SYSTEM_TOPICS, QueueColumns
from broker.ratelog import RateLimitedLog
from broker.store import Store
from broker.store.segments import Encode

log = logging.getLogger(__name__)

INTERVAL = 0.5  # seconds between rounds that found nothing to pack
SEGMENTS_PER_STEP = 4  # per queue per round: a queue's backlog never holds up the others long
HELD_BYTES = 128 * 1024 * 1024  # bodies of runs held in memory, not packed yet; more are left to the rounds


class Packer:
    def __init__(self, store: Store, encode: Encode, *, metrics: Metrics) -> None:
        self._store = store
        self._encode = encode
        self._metrics = metrics
        self._log = RateLimitedLog(log)
        self._verified: set[tuple[str, int]] = set()  # queues whose segments are known to be of this store
        self._runs: deque[tuple[str, int, QueueColumns]] = deque()
        self._held = 0  # bytes of bodies in _runs and _unpacked
        # Per queue, its messages after its last segment, when all of them came in runs.
        self._unpacked: dict[tuple[str, int], _Kept] = {}
        # Per queue, when a run last continued its segments: while its runs do, rounds leave it to
        # them (a round reading rows whose run is on its way would pack them twice over, and the
        # run, no longer at the segments' end, would be dropped).
        self._continued: dict[tuple[str, int], float] = {}
        self._ran = asyncio.Event()  # a run was written
        # The store's write count when a round last visited every queue and packed nothing: while
        # it stays, no round has anything to do.
        self._idle_at: int | None = None

    def written(self, topic: str, queue_id: int, columns: QueueColumns) -> None:
        """Messages just committed to a queue, in offset order, from its ``queue_offsets[0]`` on."""
        if (topic, queue_id) in self._verified and len(columns) and self._held + columns.body_bytes <= HELD_BYTES:
            self._runs.append((topic, queue_id, columns))
            self._held += columns.body_bytes
            self._ran.set()

    async def run(self) -> None:
        while True:
            try:
                packed = await self.pack_runs() or await self.pack()
            except HalfmqError as exc:  # the store failed this time: try again next round
                self._log.warning(exc.code, "packing segments failed: %s", exc)
                packed = 0
            if not packed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._ran.wait(), INTERVAL)

    async def pack_runs(self) -> int:
        """Pack the whole segments of the runs written since the last call from memory."""
        packed = 0
        self._ran.clear()
        while self._runs:
            topic, queue_id, columns = self._runs.popleft()
            queue = (topic, queue_id)
            kept = self._unpacked.pop(queue, None)
            if kept is not None and kept.end == columns.queue_offsets[0]:
                kept.add(columns)
                if len(kept) < MAX_PULL:  # no segment to cut yet
                    self._unpacked[queue] = kept
                    self._continued[queue] = asyncio.get_running_loop().time()
                    continue
                columns = kept.joined()
            elif kept is not None:  # no longer continued by this run: left to the rounds
                self._held -= kept.size
            self._held -= columns.body_bytes
            done = await self._store.in_background(self._store.pack_run, topic, queue_id, columns, self._encode)
            if done >= 0:  # they continued the queue's segments: the rest waits for the next run
                self._continued[queue] = asyncio.get_running_loop().time()
                rest = columns.cut(done)
                if len(rest):
                    self._unpacked[queue] = _Kept([rest], rest.body_bytes, len(rest))
                    self._held += rest.body_bytes
            packed += max(done, 0)
        self._metrics.packed(packed)
        return packed

    async def pack(self) -> int:
        """One round over every queue of every real topic but those whose runs continued their
        segments within the last INTERVAL; returns how many messages it packed. Once a round has
        visited every queue and packed nothing, the next ones visit none until the store commits
        a write: an idle broker's packer costs it nothing."""
        writes = self._store.write_batches
        if writes == self._idle_at:
            return 0
        packed, passed_over = 0, False
        recent = asyncio.get_running_loop().time() - INTERVAL
        for topic in self._store.topics():
            if topic.name in SYSTEM_TOPICS:
                continue
            for queue_id in range(topic.queues):
                queue = (topic.name, queue_id)
                if self._continued.get(queue, recent) > recent:
                    passed_over = True
                    continue
                packed += await self._store.in_background(
                    self._store.pack,
                    *queue,
                    self._encode,
                    SEGMENTS_PER_STEP,
                    verify=queue not in self._verified,
                )
                self._verified.add(queue)
        self._idle_at = writes if not packed and not passed_over else None
        self._metrics.packed(packed)
        return packed


@dataclass
class _Kept:
    """A queue's messages after its last segment, in the runs they came in, one after another."""

    parts: list[QueueColumns]
    size: int  # bytes of bodies
    count: int

    def __len__(self) -> int:
        return self.count

    @property
    def end(self) -> int:
        """The offset after the last message."""
        return self.parts[-1].queue_offsets[-1] + 1

    def add(self, run: QueueColumns) -> None:
        self.parts.append(run)
        self.size += run.body_bytes
        self.count += len(run)

    def joined(self) -> QueueColumns:
        return QueueColumns.joined(self.parts)
