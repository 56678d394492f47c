"""The single writer: one thread owns the write connection and commits jobs in groups.

Callers hand over a job (a function of the connection) and get its result only after the
SQLite transaction holding the job has committed, so an acknowledged write is durable to the
chosen flush level. A job that raises is undone alone (each job runs in its own savepoint) and
its error goes to its own caller; the rest of the group still commits, and no job runs twice. A
job that may change a great many pages (a topic's deletion) runs ``alone``: in a transaction of
its own with no savepoint, for which SQLite keeps no copy of the pages it changes (a savepoint
keeps one in a temporary file, outside the data directory).
SQLite's errors reach callers as the core's StorageFull or StorageFailure. Results reach an
event loop with one wake-up per group, not one per job.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from broker.errors import BrokerClosed
from broker.ratelog import RateLimitedLog
from broker.store.sql import translate

T = TypeVar("T")
log = logging.getLogger(__name__)

Work = Callable[[sqlite3.Connection], Any]
Outcome = tuple[bool, Any]


@dataclass
class _Job:
    work: Work
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    alone: bool


class GroupCommitWriter:
    """Runs write jobs on one thread, many per SQLite transaction."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        *,
        on_commit: Callable[[int, float], None] | None = None,
        on_undo: Callable[[sqlite3.Connection], None] | None = None,
        max_batch: int = 1024,
    ) -> None:
        """``on_commit(jobs, seconds)`` is told of every group commit (for metrics); ``on_undo(conn)``
        of every rollback, a job's or a whole group's, to drop state kept beside the database."""
        self._connection = connection
        self._on_commit = on_commit
        self._on_undo = on_undo
        self._max_batch = max_batch
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()
        self.batches = 0
        self._log = RateLimitedLog(log)
        self._thread = threading.Thread(target=self._run, name="halfmq-writer", daemon=True)
        self._thread.start()

    async def run(self, work: Callable[[sqlite3.Connection], T], *, alone: bool = False) -> T:
        """Queue ``work`` and wait until it is committed (``alone``: in a transaction of its own,
        see above); return its result or raise its exception."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            if self._closed:
                raise BrokerClosed("the store is closed")
            self._jobs.put(_Job(work, future, loop, alone))
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
        """Commit the batch's jobs in order: each run of jobs that are not ``alone`` in one
        transaction (``_together``), each job that is in one of its own (``_alone``)."""
        outcomes: list[Outcome] = []
        for alone, jobs in itertools.groupby(batch, key=lambda job: job.alone):
            if alone:
                outcomes += [self._alone(job) for job in jobs]
            else:
                outcomes += self._together(list(jobs))
        return outcomes

    def _alone(self, job: _Job) -> Outcome:
        """Run ``job`` in a transaction of its own with no savepoint: undone whole if it raises."""
        try:
            with self._transaction() as conn:
                result = job.work(conn)
        except Exception as exc:  # the job's own failure or SQLite's
            return (False, self._failure(exc))
        return (True, result)

    def _together(self, batch: list[_Job]) -> list[Outcome]:
        """Commit the batch in one transaction, each job inside its own savepoint: a job that
        raises is undone alone, and no job ever runs twice. If the transaction itself fails
        (a full disk at COMMIT, say), every job gets the translated error."""
        outcomes: list[Outcome] = []
        try:
            with self._transaction() as conn:
                for job in batch:
                    conn.execute("SAVEPOINT job")
                    try:
                        outcomes.append((True, job.work(conn)))
                    except Exception as exc:  # the job's own failure: undo it alone
                        conn.execute("ROLLBACK TO job")
                        self._undone()
                        outcomes.append((False, self._failure(exc)))
                    conn.execute("RELEASE job")
        except sqlite3.Error as exc:
            return [(False, self._failure(exc))] * len(batch)
        return outcomes

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction, committed at the end of the block, rolled back if it raises."""
        conn = self._connection
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._undone()
            raise
        self.batches += 1

    def _undone(self) -> None:
        if self._on_undo is not None:
            self._on_undo(self._connection)

    def _failure(self, exc: Exception) -> Exception:
        """What a job's caller gets: core errors as raised, SQLite's translated and logged once."""
        if not isinstance(exc, sqlite3.Error):
            return exc
        error = translate(exc)
        self._log.warning(error.code, "write refused: %s", error)
        error.__cause__ = exc
        return error

    @staticmethod
    def _settle(batch: list[_Job], outcomes: list[Outcome]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Outcome]]] = {}
        for job, outcome in zip(batch, outcomes, strict=True):
            by_loop.setdefault(job.loop, []).append((job.future, outcome))
        for loop, settled in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(_settle_on_loop, settled)


def _settle_on_loop(settled: list[tuple[asyncio.Future[Any], Outcome]]) -> None:
    for future, (ok, value) in settled:
        if future.cancelled():
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
