"""The checkpointer: copies the store's write-ahead logs into its database files on the store's
background thread, shortly after writes, so that the writer's thread, which every write waits
for, seldom has to. SQLite's own automatic checkpoint (on the writer, at a thousand pages of
log) stays as the bound on a log's growth, and finds little left to copy while this keeps up.
A checkpoint cut short by a reader on an older snapshot is tried again until one copies the
whole log: only then does a file take the size retention handed back.

A copied log keeps its size on disk until it is cut: by the writer's first commit once the log
restarts, to ``broker.store.sql.LOG_LIMIT``, and by this, to nothing, once the broker has
written nothing for IDLE after a whole checkpoint. So the logs of a broker that stopped
writing take no space, and what retention deletes and hands back leaves the data directory."""

from __future__ import annotations

import asyncio
import logging

from broker.errors import HalfmqError
from broker.ratelog import RateLimitedLog
from broker.store import Store

log = logging.getLogger(__name__)

INTERVAL = 0.05  # seconds between looks at whether the writer committed since the last checkpoint
# Seconds without a group commit after which the logs are emptied. Longer than the gaps between a
# steady client's calls: a log emptied under a load is grown again, block by block (send_batch at
# 14 calls a second lost 8 % of its rate to logs emptied after 50 ms without a commit).
IDLE = 1.0


class Checkpointer:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._log = RateLimitedLog(log)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        copied = -1  # how many group commits the last whole checkpoint followed
        seen, since = -1, loop.time()  # the group commits last seen, and since when
        cut = False  # whether the logs were emptied since the last whole checkpoint
        while True:
            await asyncio.sleep(INTERVAL)
            commits = self._store.write_batches
            if commits != seen:
                seen, since = commits, loop.time()
            try:
                if commits != copied:
                    if await self._store.in_background(self._store.checkpoint):
                        copied, cut = commits, False
                elif not cut and loop.time() - since >= IDLE:
                    cut = await self._store.in_background(self._store.cut_logs)
            except HalfmqError as exc:  # the store failed this time: try again next time
                self._log.warning(exc.code, "checkpointing the store failed: %s", exc)
