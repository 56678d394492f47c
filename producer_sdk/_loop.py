"""The asyncio loop the blocking SDK classes run the async implementation on: one per process, on
a daemon thread, shared by every blocking client.

One loop, never closed while the process runs: gRPC's asyncio support hands each call's
completion to the loop the call was made on, and a loop of its own per client, closed with the
client, could still be handed a late completion of one of its calls (``RuntimeError: Event loop
is closed``, printed by whichever loop was running gRPC's poller). Each client closes what it
opened (its channel, its tasks); at exit the loop cancels and awaits what is left, as
``asyncio.run`` does, so no task is destroyed pending.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="halfmq-sdk-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result in the calling thread."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def stop(self) -> None:
        """Cancel and await what is left on the loop, then end it."""
        self.run(_cancel_remaining())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


_lock = threading.Lock()
_shared: dict[int, LoopThread] = {}  # by process id: a forked child starts a loop of its own


def sdk_loop() -> LoopThread:
    """The process's SDK loop, started on first use."""
    with _lock:
        pid = os.getpid()
        if pid not in _shared:
            _shared.clear()
            _shared[pid] = LoopThread()
            atexit.register(_stop_at_exit, pid)
        return _shared[pid]


def _stop_at_exit(pid: int) -> None:
    with _lock:
        loop = _shared.pop(pid, None) if pid == os.getpid() else None
    if loop is not None:
        loop.stop()


async def _cancel_remaining() -> None:
    remaining = asyncio.all_tasks() - {asyncio.current_task()}
    for task in remaining:
        task.cancel()
    await asyncio.gather(*remaining, return_exceptions=True)
