"""The checkpointer: copies the store's write-ahead log into its database file on the store's
background thread, shortly after writes, so that the writer's thread, which every write waits
for, seldom has to. SQLite's own automatic checkpoint (on the writer, at a thousand pages of
log) stays as the bound on the log's growth, and finds little left to copy while this keeps up.
A checkpoint cut short by a reader on an older snapshot is tried again until one copies the
whole log: only then does the file take the size retention handed back."""

from __future__ import annotations

import asyncio
import logging

from broker.errors import HalfmqError
from broker.ratelog import RateLimitedLog
from broker.store import Store

log = logging.getLogger(__name__)

INTERVAL = 0.05  # seconds between looks at whether the writer committed since the last checkpoint


class Checkpointer:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._log = RateLimitedLog(log)

    async def run(self) -> None:
        copied = -1  # how many group commits the last whole checkpoint followed
        while True:
            await asyncio.sleep(INTERVAL)
            commits = self._store.write_batches
            if commits == copied:
                continue
            try:
                if await self._store.in_background(self._store.checkpoint):
                    copied = commits
            except HalfmqError as exc:  # the store failed this time: try again next time
                self._log.warning(exc.code, "checkpointing the store failed: %s", exc)
