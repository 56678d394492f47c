"""One batch call for many single calls: items submitted while a batch is being written wait
for the next batch, which takes them all. Nothing waits at low load (the first item starts a
batch of one at once); under load a batch holds whatever arrived during the last one, so the
writer runs one job of a few statements instead of a job per item (a RocketMQ producer sends its
half messages and ends one at a time, from many threads)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from broker.errors import BrokerClosed, HalfmqError

I = TypeVar("I")  # noqa: E741 - an item, as R is a result
R = TypeVar("R")

Batch = Callable[[list[I]], Awaitable[Sequence[R | HalfmqError]]]


class Coalescer(Generic[I, R]):
    """Runs ``batch`` over the items submitted, one batch at a time, at most ``limit`` items each;
    each item gets its own result or refusal, and a failure of a whole batch reaches its items."""

    def __init__(self, batch: Batch[I, R], limit: int) -> None:
        self._batch = batch
        self._limit = limit
        self._waiting: list[tuple[I, asyncio.Future[R]]] = []
        self._running: asyncio.Task[None] | None = None

    async def submit(self, item: I) -> R:
        """The outcome of ``item``: its result, or its refusal raised."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._running is None:
            self._running = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        taken: list[tuple[I, asyncio.Future[R]]] = []
        try:
            while self._waiting:
                taken, self._waiting = self._waiting[: self._limit], self._waiting[self._limit :]
                outcomes: Sequence[R | BaseException]
                try:
                    outcomes = await self._batch([item for item, _ in taken])
                except Exception as exc:  # the whole batch failed: every item hears why
                    outcomes = [exc] * len(taken)
                for (_, future), outcome in zip(taken, outcomes, strict=True):
                    if future.done():  # its caller has gone; the item was written all the same
                        continue
                    if isinstance(outcome, BaseException):
                        future.set_exception(outcome)
                    else:
                        future.set_result(outcome)
        except BaseException as exc:  # cancelled (the broker stops), or a batch of the wrong length
            for _, future in (*taken, *self._waiting):
                if not future.done():
                    future.set_exception(BrokerClosed(f"the batch was not written: {exc!r}"))
            self._waiting = []
            raise
        finally:
            self._running = None
