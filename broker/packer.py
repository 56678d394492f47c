"""The packer: packs every real topic's committed messages into segments (``broker.store.segments``)
in the background, a few segments of a queue at a time, on the store's reader threads."""

from __future__ import annotations

import asyncio
import logging

from broker.errors import HalfmqError
from broker.metrics import Metrics
from broker.model import SYSTEM_TOPICS
from broker.ratelog import RateLimitedLog
from broker.store import Store
from broker.store.segments import Encode

log = logging.getLogger(__name__)

INTERVAL = 0.5  # seconds between rounds that found nothing to pack
SEGMENTS_PER_STEP = 4  # per queue per round: a queue's backlog never holds up the others long


class Packer:
    def __init__(self, store: Store, encode: Encode, *, metrics: Metrics) -> None:
        self._store = store
        self._encode = encode
        self._metrics = metrics
        self._log = RateLimitedLog(log)
        self._verified: set[tuple[str, int]] = set()  # queues whose segments are known to be of this store

    async def run(self) -> None:
        while True:
            try:
                packed = await self.pack()
            except HalfmqError as exc:  # the store failed this time: try again next round
                self._log.warning(exc.code, "packing segments failed: %s", exc)
                packed = 0
            if not packed:
                await asyncio.sleep(INTERVAL)

    async def pack(self) -> int:
        """One round over every queue of every real topic; returns how many messages it packed."""
        packed = 0
        for topic in self._store.topics():
            if topic.name in SYSTEM_TOPICS:
                continue
            for queue_id in range(topic.queues):
                queue = (topic.name, queue_id)
                packed += await self._store.query(
                    self._store.pack,
                    *queue,
                    self._encode,
                    SEGMENTS_PER_STEP,
                    verify=queue not in self._verified,
                )
                self._verified.add(queue)
        self._metrics.packed(packed)
        return packed
