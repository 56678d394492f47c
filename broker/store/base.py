"""What every part of the store shares: the SQLite file, its one writer, its reader threads.

Writes are coroutines that return once the GroupCommitWriter has committed them; reads use one
connection per thread and see every write that has returned. Nothing outside this package runs SQL.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ParamSpec, TypeVar

from broker.errors import BrokerClosed
from broker.model import SYSTEM_TOPICS
from broker.store.lock import lock_data_dir
from broker.store.migrate import bring_up_to_date
from broker.store.sql import Flush, QueueTails, connect, topic_of
from broker.store.writer import GroupCommitWriter

DB_FILE = "halfmq.db"
READER_THREADS = 4
# As much as SQLite allows (its build caps it: 2 GB in Python's); the rest is read as before.
READ_MMAP_BYTES = 1 << 40
P = ParamSpec("P")
T = TypeVar("T")


class StoreBase:
    """The broker's durable state in one SQLite file under ``data_dir``: connections and threads."""

    def __init__(
        self, data_dir: Path, *, flush: Flush = Flush.SYNC, on_commit: Callable[[int, float], None] | None = None
    ) -> None:
        """Open (creating if needed) the store; ``on_commit(jobs, seconds)`` hears of every group commit."""
        data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = lock_data_dir(data_dir)
        self.path = data_dir / DB_FILE
        self._flush = flush
        write_conn = connect(self.path, flush)
        bring_up_to_date(write_conn)
        write_conn.executemany(
            "INSERT OR IGNORE INTO topics (name, queues) VALUES (?, 1)", [(t,) for t in SYSTEM_TOPICS]
        )
        self._tails = QueueTails(write_conn)
        self._writer = GroupCommitWriter(write_conn, on_commit=on_commit, on_undo=self._tails.reload)
        self._write_conn = write_conn
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False
        self._read_pool = ThreadPoolExecutor(READER_THREADS, thread_name_prefix="halfmq-reader")
        # Topics are read on every send and change only through create_topic: keep them in memory.
        self._topics = {
            name: topic_of(name, queues, retention_ms)
            for name, queues, retention_ms in write_conn.execute("SELECT name, queues, retention_ms FROM topics")
        }

    def close(self) -> None:
        """Commit what was submitted, then close every connection."""
        self._writer.close()
        self._closed = True
        self._read_pool.shutdown(wait=True)
        self._write_conn.close()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        self._lock.close()

    @property
    def write_batches(self) -> int:
        """How many group commits the writer has made (for measuring batch sizes)."""
        return self._writer.batches

    async def barrier(self) -> None:
        """Return once every write submitted before this call is committed."""
        await self._writer.run(lambda conn: None)

    async def query(self, read: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run one of the store's reads on a reader thread, with its own connection (WAL lets
        readers run beside the writer), so the event loop only awaits it."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._read_pool, lambda: read(*args, **kwargs))

    def _reader(self) -> sqlite3.Connection:
        if self._closed:
            raise BrokerClosed("the store is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path, self._flush)
            # Reads map the file instead of copying each page with a system call: a pull steps
            # through rows of one queue, which lie between other queues' rows.
            conn.execute(f"PRAGMA mmap_size={READ_MMAP_BYTES}")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn
