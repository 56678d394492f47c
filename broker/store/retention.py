"""Retention: the oldest messages of a queue and old resolved transactions leave the store, and
the file hands their space back.

Age is found through store offsets: they grow with time (one writer assigns them in commit order),
so "stored before the cutoff" is "store offset below a bound", found by one binary search on a
reader. A queue's older messages are a prefix of it, found in its index alone (an entry carries
its row's store offset). No index on time is kept, so retention costs the hot write path nothing.

A job here runs a few statements whatever it deletes, and no row comes back to Python: the
writer's thread gives up the GIL for each step of a statement and waits to take it back while the
event loop runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from broker.model import HALF_TOPIC, OP_TOPIC, TransactionState
from broker.store.base import DB_FILE, LOG_SUFFIXES, StoreBase, bytes_on_disk, file_size, store_files
from broker.store.segments import SEGMENTS_FILE
from broker.store.sql import BUSY_TIMEOUT_MS, LOG_LIMIT, RAISE_FLOOR, STABLE_END, hand_back, translated

# The oldest offset of a queue, the first whose store offset is at least a bound (NULL if none),
# one past the newest, and its last stable offset (NULL if no range is open); from indexes alone.
_QUEUE_SPLIT = f"""
SELECT (SELECT MIN(queue_offset) FROM messages WHERE topic = ?1 AND queue_id = ?2),
       (SELECT queue_offset FROM messages INDEXED BY messages_position
         WHERE topic = ?1 AND queue_id = ?2 AND store_offset >= ?3 ORDER BY queue_offset LIMIT 1),
       (SELECT MAX(queue_offset) + 1 FROM messages WHERE topic = ?1 AND queue_id = ?2),
       {STABLE_END}
"""
# The transactions one job deletes, gathered in a temporary table so that each kind of row goes
# in one statement, and no row passes through Python.
_EXPIRING_TABLE = "CREATE TEMP TABLE IF NOT EXISTS expiring (transaction_id TEXT PRIMARY KEY, checked INTEGER NOT NULL)"
_EXPIRING_WHERE = "half_offset < ? AND state != ? AND resolved_at < ?"
_EXPIRING = (
    "INSERT INTO temp.expiring SELECT transaction_id, last_check_at IS NOT NULL OR resumes > 0 FROM transactions"
    f" WHERE {_EXPIRING_WHERE} ORDER BY half_offset LIMIT ?"
)
_DELETE_EXPIRING = (
    "DELETE FROM checks WHERE transaction_id IN (SELECT transaction_id FROM temp.expiring WHERE checked)",
    "DELETE FROM transactions WHERE transaction_id IN (SELECT transaction_id FROM temp.expiring)",
)


def first_at(conn: sqlite3.Connection, log: str, key: str, stamp: str, cutoff_ms: int) -> int:
    """The lowest ``key`` of the ``log`` table whose row was stored (``stamp``) at or after
    ``cutoff_ms``, one past the newest when all are older: a binary search over a key that
    grows with time."""
    # Two subqueries: SQLite answers a lone MIN or MAX from the key, but scans for both together.
    low, high = conn.execute(f"SELECT (SELECT MIN({key}) FROM {log}), (SELECT MAX({key}) + 1 FROM {log})").fetchone()
    if high is None:
        return 0
    while low < high:
        middle = (low + high) // 2
        found, stored_at = conn.execute(
            f"SELECT {key}, {stamp} FROM {log} WHERE {key} >= ? ORDER BY {key} LIMIT 1", (middle,)
        ).fetchone()
        if stored_at < cutoff_ms:
            low = found + 1
        else:
            high = middle
    return int(low)


def _expiring_span(conn: sqlite3.Connection, topic: str, queue_id: int, bound: int, limit: int) -> tuple[int, int]:
    """The offsets ``[low, end)`` of the queue's messages ``expire_queue`` deletes (empty when none)."""
    low, first_kept, high, stable = conn.execute(_QUEUE_SPLIT, (topic, queue_id, bound)).fetchone()
    if low is None:
        return 0, 0
    return low, min(high if first_kept is None else first_kept, low + limit, high if stable is None else stable)


_PAGE_PRAGMAS = ("page_count", "freelist_count", "page_size")


def _free_pages_over_a_quarter(conn: sqlite3.Connection) -> int:
    pages, free = conn.execute("SELECT * FROM pragma_page_count(), pragma_freelist_count()").fetchone()
    return max(0, int(free - pages // 4))


class RetentionStore(StoreBase):
    """Deletion by age, and the space it frees."""

    @translated
    def store_offset_at(self, cutoff_ms: int) -> int:
        """The lowest store offset whose message was stored at or after ``cutoff_ms``: every
        message below it is older (one past the newest when all are)."""
        return first_at(self._reader(), "messages", "store_offset", "store_timestamp", cutoff_ms)

    @translated
    def queue_offset_at(self, topic: str, queue_id: int, cutoff_ms: int) -> int | None:
        """The offset of the queue's first message stored at or after ``cutoff_ms``; None if none
        was (store offsets grow with time: one binary search, then the queue's index)."""
        conn = self._reader()
        bound = first_at(conn, "messages", "store_offset", "store_timestamp", cutoff_ms)
        row = conn.execute(
            "SELECT queue_offset FROM messages INDEXED BY messages_position"
            " WHERE topic = ? AND queue_id = ? AND store_offset >= ? ORDER BY queue_offset LIMIT 1",
            (topic, queue_id, bound),
        ).fetchone()
        return None if row is None else int(row[0])

    @translated
    def oldest_stored_at(self) -> int | None:
        """When the oldest message still in the store, half messages included, was stored (broker
        milliseconds)."""
        conn = self._reader()
        oldest = [
            row[0]
            for row in (
                conn.execute("SELECT store_timestamp FROM messages ORDER BY store_offset LIMIT 1").fetchone(),
                conn.execute("SELECT half_stored_at FROM transactions ORDER BY half_offset LIMIT 1").fetchone(),
            )
            if row is not None
        ]
        return min(oldest, default=None)

    @translated
    def expiring_queues(self, queues: Sequence[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
        """Those of ``queues`` (topic, queue id, store offset bound) that hold a message
        ``expire_queue`` would delete."""
        conn = self._reader()
        spans = [_expiring_span(conn, *queue, 1) for queue in queues]
        return [queue for queue, (low, end) in zip(queues, spans, strict=True) if low < end]

    @translated
    def expiring_records(self, cutoff_ms: int) -> tuple[bool, bool, bool]:
        """Whether ``expire_transactions``, ``expire_ops`` and ``expire_batches`` would delete
        anything at ``cutoff_ms``."""
        conn = self._reader()
        half_bound = first_at(conn, "transactions", "half_offset", "half_stored_at", cutoff_ms)
        op_bound = first_at(conn, "op_log", "op_offset", "stored_at", cutoff_ms)
        found = (
            (f"SELECT 1 FROM transactions WHERE {_EXPIRING_WHERE} LIMIT 1",
             (half_bound, TransactionState.PENDING.value, cutoff_ms)),
            ("SELECT 1 FROM op_log WHERE op_offset < ? LIMIT 1", (op_bound,)),
            ("SELECT 1 FROM committed_batches WHERE committed_at < ? LIMIT 1", (cutoff_ms,)),
        )  # fmt: skip
        transactions, ops, batches = (conn.execute(sql, params).fetchone() is not None for sql, params in found)
        return transactions, ops, batches

    async def expire_queue(self, topic: str, queue_id: int, bound: int, limit: int) -> int:
        """Delete the oldest messages of a queue whose store offset is below ``bound``, at most
        ``limit`` of them, with their deliveries; return how many. The queue's low offset moves
        up; the newest offset handed out is remembered, so none is ever reused. Nothing at or
        after the queue's last stable offset is touched: an open range commits whole."""

        def work(conn: sqlite3.Connection) -> int:
            low, end = _expiring_span(conn, topic, queue_id, bound, limit)
            if end <= low:
                return 0
            deleted = conn.execute(
                "DELETE FROM messages WHERE topic = ? AND queue_id = ? AND queue_offset < ?", (topic, queue_id, end)
            ).rowcount
            conn.execute(
                "DELETE FROM deliveries WHERE topic = ? AND queue_id = ? AND queue_offset < ?", (topic, queue_id, end)
            )
            conn.execute(RAISE_FLOOR, (topic, queue_id, end))
            return int(deleted)

        return await self._writer.run(work)

    async def expire_transactions(self, cutoff_ms: int, limit: int) -> int:
        """Delete up to ``limit`` transactions resolved before ``cutoff_ms`` whose half message
        was stored before it (found by a binary search over the half log; a transaction resumed
        since counts from its resume): the row, half message included, and its check history.
        PENDING transactions are never touched. Return how many."""

        def work(conn: sqlite3.Connection) -> int:
            bound = first_at(conn, "transactions", "half_offset", "half_stored_at", cutoff_ms)
            conn.execute(_EXPIRING_TABLE)
            conn.execute("DELETE FROM temp.expiring")
            expired = conn.execute(_EXPIRING, (bound, TransactionState.PENDING.value, cutoff_ms, limit)).rowcount
            if expired:
                for statement in _DELETE_EXPIRING:
                    conn.execute(statement)
                conn.execute(RAISE_FLOOR, (HALF_TOPIC, 0, self._tails.next(HALF_TOPIC, 0)))
            return int(expired)

        return await self._writer.run(work)

    async def expire_ops(self, cutoff_ms: int, limit: int) -> int:
        """Delete the op log's oldest records stored before ``cutoff_ms``, at most ``limit`` of
        them; return how many. The op log is a record for operators (the transactions' state is
        kept in their rows), so it is kept by age, as RocketMQ keeps its logs."""

        def work(conn: sqlite3.Connection) -> int:
            bound = first_at(conn, "op_log", "op_offset", "stored_at", cutoff_ms)
            deleted = conn.execute(
                "DELETE FROM op_log WHERE op_offset IN (SELECT op_offset FROM op_log WHERE op_offset < ?"
                " ORDER BY op_offset LIMIT ?)",
                (bound, limit),
            ).rowcount
            if deleted:
                conn.execute(RAISE_FLOOR, (OP_TOPIC, 0, self._tails.next(OP_TOPIC, 0)))
            return int(deleted)

        return await self._writer.run(work)

    async def expire_batches(self, cutoff_ms: int) -> None:
        """Delete the markers of exactly-once batches committed before ``cutoff_ms``."""
        await self._writer.run(
            lambda conn: conn.execute("DELETE FROM committed_batches WHERE committed_at < ?", (cutoff_ms,))
        )

    async def reclaim(self, pages: int) -> int:
        """Hand up to ``pages`` free pages back to the file system (the file shrinks), keeping a
        quarter of the file free: new writes reuse free pages, and handing back pages that are
        about to be reused costs moving the newest ones into the holes. Return how many free
        pages are still over that quarter."""

        def work(conn: sqlite3.Connection) -> int:
            excess = _free_pages_over_a_quarter(conn)
            if excess > 0:
                hand_back(conn, "main", min(pages, excess))
            return _free_pages_over_a_quarter(conn)

        return await self._writer.run(work)

    @translated
    def checkpoint(self) -> bool:
        """Copy the write-ahead logs into the database files, without waiting for anyone; True if
        all of the store's was copied (a reader on an older snapshot stops a checkpoint short). In
        WAL mode a file takes the size ``reclaim`` gave it only then."""
        busy, frames, copied = self._reader().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return not busy and frames == copied

    @translated
    def cut_logs(self) -> bool:
        """Empty every write-ahead log that holds anything, if no one is writing or reading an
        older snapshot at this moment (it waits for nobody); True if each log is empty now. The
        logs keep their size otherwise (``LOG_LIMIT`` bounds it once they restart)."""
        conn = self._reader()
        conn.execute("PRAGMA busy_timeout=0")
        try:
            for db, name in (("main", DB_FILE), ("segments", SEGMENTS_FILE)):
                if file_size(self.path.with_name(f"{name}-wal")):
                    (busy, _, _) = conn.execute(f"PRAGMA {db}.wal_checkpoint(TRUNCATE)").fetchone()
                    if busy:
                        return False
            return True
        finally:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")

    @translated
    def usage(self) -> tuple[int, int]:
        """(bytes every file of the store takes on disk now, ``bytes_on_disk``; bytes of both
        databases' pages in use, free pages left out)."""
        return bytes_on_disk(self.path.parent), self._pages(in_use=True)

    @translated
    def database_bytes(self) -> int:
        """What the two database files will take once the logs are copied into them: their pages,
        free ones kept for reuse included."""
        return self._pages(in_use=False)

    def log_bytes(self) -> int:
        """What the write-ahead logs and their indexes take now, each counted at most at
        ``LOG_LIMIT``, which the next restart of the log cuts it back to."""
        logs = (path for path in store_files(self.path.parent) if path.name.endswith(LOG_SUFFIXES))
        return sum(min(file_size(log), LOG_LIMIT) for log in logs)

    def _pages(self, *, in_use: bool) -> int:
        """Bytes of both databases' pages, free ones included unless ``in_use``."""
        conn, total = self._reader(), 0
        for db in ("main", "segments"):
            pages, free, size = (conn.execute(f"PRAGMA {db}.{name}").fetchone()[0] for name in _PAGE_PRAGMAS)
            total += (pages - free if in_use else pages) * size
        return total
