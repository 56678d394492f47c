"""The single writer: one thread owns the write connection and commits jobs in groups.

Callers submit a job (a function of the connection) and get a Future that resolves only after
the SQLite transaction holding the job has committed, so an acknowledged write is durable to
the chosen flush level. Each job runs in its own SAVEPOINT: a job that raises is undone alone
and its error goes to its own Future; the rest of the group still commits.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from broker.errors import BrokerClosed

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass
class _Job:
    work: Callable[[sqlite3.Connection], Any]
    future: Future[Any]


class GroupCommitWriter:
    """Runs write jobs on one thread, many per SQLite transaction."""

    def __init__(self, connection: sqlite3.Connection, *, max_batch: int = 1024) -> None:
        self._connection = connection
        self._max_batch = max_batch
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()
        self.batches = 0
        self._thread = threading.Thread(target=self._run, name="halfmq-writer", daemon=True)
        self._thread.start()

    def submit(self, work: Callable[[sqlite3.Connection], T]) -> Future[T]:
        """Queue ``work``; the Future holds its result once committed, or its exception."""
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise BrokerClosed("the store is closed")
            self._jobs.put(_Job(work, future))
        return future

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
            self._commit(batch)

    def _commit(self, batch: list[_Job]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        conn = self._connection
        try:
            conn.execute("BEGIN IMMEDIATE")
            for job in batch:
                conn.execute("SAVEPOINT job")
                try:
                    outcomes.append((True, job.work(conn)))
                except Exception as exc:  # the job's own failure: undo it alone
                    conn.execute("ROLLBACK TO job")
                    outcomes.append((False, exc))
                conn.execute("RELEASE job")
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            log.exception("group commit of %d jobs failed", len(batch))
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            outcomes = [(False, exc)] * len(batch)
        self.batches += 1
        for job, (ok, value) in zip(batch, outcomes, strict=True):
            if ok:
                job.future.set_result(value)
            else:
                job.future.set_exception(value)
