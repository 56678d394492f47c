"""What every part of the store shares: the SQLite file, its one writer, its reader threads.

Writes are coroutines that return once the GroupCommitWriter has committed them; reads use one
connection per thread and see every write that has returned. Nothing outside this package runs SQL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from broker.model import SYSTEM_TOPICS
from broker.store.lock import lock_data_dir
from broker.store.migrate import bring_up_to_date
from broker.store.reads import QueueReader
from broker.store.segments import SEGMENTS_FILE, attach, create
from broker.store.sql import TOPIC_COLUMNS, Flush, QueueTails, connect, topic_of
from broker.store.writer import GroupCommitWriter

DB_FILE = "halfmq.db"
# Each database's write-ahead log and the log's shared-memory index, beside it.
LOG_SUFFIXES = ("-wal", "-shm")


def store_files(data_dir: Path) -> list[Path]:
    """Every file a store in ``data_dir`` may have: its two databases, each with its log and the
    log's index (missing ones included)."""
    return [data_dir / f"{db}{suffix}" for db in (DB_FILE, SEGMENTS_FILE) for suffix in ("", *LOG_SUFFIXES)]


def bytes_on_disk(data_dir: Path) -> int:
    """What every file of the store in ``data_dir`` takes on disk now (what --retention-bytes
    bounds, and what the admin API, the metrics and ``halfmq store inspect`` report)."""
    return sum(map(file_size, store_files(data_dir)))


def file_size(path: Path) -> int:
    """The file's size, 0 if there is none (a log is removed when its database closes)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


class StoreBase(QueueReader):
    """The broker's durable state in one SQLite file under ``data_dir``: its writer and its readers."""

    def __init__(
        self, data_dir: Path, *, flush: Flush = Flush.SYNC, on_commit: Callable[[int, float], None] | None = None
    ) -> None:
        """Open (creating if needed) the store; ``on_commit(jobs, seconds)`` hears of every group commit."""
        data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = lock_data_dir(data_dir)
        super().__init__(data_dir / DB_FILE)
        self._flush = flush
        write_conn = connect(self.path, flush)
        bring_up_to_date(write_conn)
        write_conn.executemany(
            "INSERT OR IGNORE INTO topics (name, queues) VALUES (?, 1)", [(t,) for t in SYSTEM_TOPICS]
        )
        self._tails = QueueTails(write_conn)
        self._writer = GroupCommitWriter(write_conn, on_commit=on_commit, on_undo=self._tails.reload)
        self._write_conn = write_conn
        self._segments_conn = create(data_dir / SEGMENTS_FILE)
        # Topics are read on every send and change only through create_topic: keep them in memory.
        self._topics = {row[0]: topic_of(*row) for row in write_conn.execute(f"SELECT {TOPIC_COLUMNS} FROM topics")}

    def close(self) -> None:
        """Commit what was submitted, then close every connection."""
        self._writer.close()
        self.close_readers()
        self._write_conn.close()
        self._segments_conn.close()
        self._lock.close()

    @property
    def write_batches(self) -> int:
        """How many group commits the writer has made (for measuring batch sizes)."""
        return self._writer.batches

    async def barrier(self) -> None:
        """Return once every write submitted before this call is committed."""
        await self._writer.run(lambda conn: None)

    def _open_reader(self) -> sqlite3.Connection:
        conn = connect(self.path, self._flush)
        attach(conn, self.path, read_only=False)
        return conn
