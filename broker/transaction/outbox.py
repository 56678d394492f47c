"""A producer session's outbox: a bounded queue of checks, written in order by one task, each
write with a deadline (docs/architecture.md, guarantee 8).

The check service never awaits a session: it offers a check and gets a future, or ``None`` when
the outbox is full. Queued checks are light (the transaction record); the message is loaded only
when its turn comes, so a slow session holds at most one message body in memory. A write that
misses its deadline means the producer stopped reading: the session is closed, and whatever
it still holds is undelivered.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from broker.model import StoredMessage, Transaction

log = logging.getLogger(__name__)

# Queued checks are small (no body), and a round offers at most ``round_limit`` of them in all;
# what is not written within the round's deadline is withdrawn.
OUTBOX_CAPACITY = 10_000


@dataclass(frozen=True)
class CheckRequest:
    """Ask a producer for the state of its local transaction; ``message`` is its check view."""

    transaction_id: str
    producer_group: str
    message: StoredMessage
    check_times: int


@dataclass(frozen=True)
class Check:
    """A check waiting in an outbox: the transaction, and how to load its request when due."""

    transaction: Transaction
    load: Callable[[], Awaitable[CheckRequest]]


class Undelivered(Exception):
    """The check did not reach the producer: the session closed or stopped reading."""


def closing_current_task(*, write_timeout: float) -> Callable[[Callable[[CheckRequest], Awaitable[None]]], Outbox]:
    """Outboxes for sessions served by the current task (a front end's streaming call): a write
    that misses ``write_timeout`` cancels that task, which ends the call and its sessions."""
    task = asyncio.current_task()
    assert task is not None, "a session's call is served by a task"
    return functools.partial(Outbox, write_timeout=write_timeout, on_stuck=task.cancel)


class Outbox:
    """Checks on their way to one producer session."""

    def __init__(
        self,
        write: Callable[[CheckRequest], Awaitable[None]],
        *,
        write_timeout: float,
        on_stuck: Callable[[], object],
        capacity: int = OUTBOX_CAPACITY,
    ) -> None:
        """``write`` sends one request on the session's connection; ``on_stuck`` closes the
        session when a write misses ``write_timeout`` seconds."""
        self._write = write
        self._write_timeout = write_timeout
        self._on_stuck = on_stuck
        self._capacity = capacity
        self._queue: collections.deque[tuple[Check, asyncio.Future[None]]] = collections.deque()
        self._ready = asyncio.Event()
        self._closed = False

    def offer(self, check: Check) -> asyncio.Future[None] | None:
        """Queue ``check``; return a future set once it is written (failed with Undelivered if it
        cannot be), or None at once when the outbox is full or closed. Cancel the future to
        withdraw a check that has not been written yet."""
        if self._closed or len(self._queue) >= self._capacity:
            return None
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((check, future))
        self._ready.set()
        return future

    async def run(self) -> None:
        """Write queued checks in order until cancelled or stuck; then fail what is left."""
        try:
            while True:
                if not self._queue:
                    self._ready.clear()
                    await self._ready.wait()
                    continue
                check, future = self._queue.popleft()
                if future.done():  # withdrawn: its round gave up on it
                    continue
                if not await self._deliver(check, future):
                    return
        finally:
            self._closed = True
            while self._queue:
                _, future = self._queue.popleft()
                if not future.done():
                    future.set_exception(Undelivered("the producer session closed"))

    async def _deliver(self, check: Check, future: asyncio.Future[None]) -> bool:
        """Write one check; False when the session must close because the write timed out."""
        try:
            request = await check.load()
            await asyncio.wait_for(self._write(request), self._write_timeout)
        except TimeoutError:
            log.warning("producer session stopped reading (a check waited %.1fs to be written); closing it",
                        self._write_timeout)  # fmt: skip
            if not future.done():
                future.set_exception(Undelivered("the producer stopped reading"))
            self._on_stuck()
            return False
        except Exception as exc:  # the connection failed under the write
            if not future.done():
                future.set_exception(Undelivered(str(exc)))
            return True
        if not future.done():
            future.set_result(None)
        return True
