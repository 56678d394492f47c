"""The single writer: one thread owns the write connection and commits jobs in groups.

Callers hand over a job (a function of the connection) and get its result only after the
SQLite transaction holding the job has committed, so an acknowledged write is durable to the
chosen flush level. A job that raises is undone alone and its error goes to its own caller;
the rest of the group still commits. Results reach an event loop with one wake-up per group,
not one per job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from broker.errors import BrokerClosed

T = TypeVar("T")
log = logging.getLogger(__name__)

Work = Callable[[sqlite3.Connection], Any]
Outcome = tuple[bool, Any]


@dataclass
class _Job:
    work: Work
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop


class GroupCommitWriter:
    """Runs write jobs on one thread, many per SQLite transaction."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        *,
        on_commit: Callable[[int, float], None] | None = None,
        max_batch: int = 1024,
    ) -> None:
        """``on_commit(jobs, seconds)`` is told of every group commit (for metrics)."""
        self._connection = connection
        self._on_commit = on_commit
        self._max_batch = max_batch
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()
        self.batches = 0
        self._thread = threading.Thread(target=self._run, name="halfmq-writer", daemon=True)
        self._thread.start()

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Queue ``work`` and wait until it is committed; return its result or raise its exception."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            if self._closed:
                raise BrokerClosed("the store is closed")
            self._jobs.put(_Job(work, future, loop))
        return await future

    def close(self) -> None:
        """Commit every job already submitted, then stop the thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._jobs.put(None)
        self._thread.join()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._jobs.get()
            if first is None:
                break
            batch = [first]
            while len(batch) < self._max_batch:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    stopping = True
                    break
                batch.append(job)
            began = time.perf_counter()
            outcomes = self._commit(batch)
            if self._on_commit is not None:
                self._on_commit(len(batch), time.perf_counter() - began)
            self._settle(batch, outcomes)

    def _commit(self, batch: list[_Job]) -> list[Outcome]:
        """Commit the batch in one transaction. Jobs rarely fail, so the first attempt runs them
        without savepoints; if one raises, the batch is redone with one savepoint per job."""
        for isolate in (False, True):
            try:
                outcomes = self._attempt(batch, isolate)
            except _JobFailed:
                continue
            except sqlite3.Error as exc:
                log.exception("group commit of %d jobs failed", len(batch))
                return [(False, exc)] * len(batch)
            self.batches += 1
            return outcomes
        raise AssertionError("unreachable: an isolated attempt never raises _JobFailed")

    def _attempt(self, batch: list[_Job], isolate: bool) -> list[Outcome]:
        conn = self._connection
        outcomes: list[Outcome] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            for job in batch:
                if not isolate:
                    try:
                        outcomes.append((True, job.work(conn)))
                    except Exception as exc:
                        raise _JobFailed from exc
                    continue
                conn.execute("SAVEPOINT job")
                try:
                    outcomes.append((True, job.work(conn)))
                except Exception as exc:  # the job's own failure: undo it alone
                    conn.execute("ROLLBACK TO job")
                    outcomes.append((False, exc))
                conn.execute("RELEASE job")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return outcomes

    @staticmethod
    def _settle(batch: list[_Job], outcomes: list[Outcome]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Outcome]]] = {}
        for job, outcome in zip(batch, outcomes, strict=True):
            by_loop.setdefault(job.loop, []).append((job.future, outcome))
        for loop, settled in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(_settle_on_loop, settled)


class _JobFailed(Exception):
    """A job raised during an attempt without savepoints."""


def _settle_on_loop(settled: list[tuple[asyncio.Future[Any], Outcome]]) -> None:
    for future, (ok, value) in settled:
        if future.cancelled():
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
