"""An idempotent SQLite sink for per-key totals: the batch's identity is stored with the state it updates.

This is Storm's "transaction id stored with the count" and the Spark form of Flink's two-phase
commit: Spark replays a micro-batch with the same id after a crash, and a batch already recorded
changes nothing, so every committed message is counted exactly once. A batch is named by the
streaming query's id (kept in its checkpoint across restarts) and the batch id: a query started
on a fresh checkpoint counts batch ids from 0 again, and its batches are new ones.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

_DDL = """
CREATE TABLE IF NOT EXISTS totals (key TEXT PRIMARY KEY, amount REAL NOT NULL, events INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS applied_batches (
    query_id TEXT NOT NULL, batch_id INTEGER NOT NULL, events INTEGER NOT NULL, PRIMARY KEY (query_id, batch_id)
);
"""


class TotalsSink:
    """Per-key totals in one SQLite file. ``guard=False`` drops the batch-id check (it exists to
    show, in a test, the double counting that the guard prevents)."""

    def __init__(self, path: Path, *, guard: bool = True) -> None:
        self.path = path
        self.guard = guard
        with self._connect() as conn:
            conn.executescript(_DDL)
            columns = {name for _, name, *_ in conn.execute("PRAGMA table_info(applied_batches)")}
        if "query_id" not in columns:
            raise ValueError(f"{path} is from an older sink that keyed batches by batch id alone; start a new file")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, isolation_level=None, timeout=30)

    def apply(self, query_id: str, batch_id: int, totals: Iterable[tuple[str, float, int]]) -> bool:
        """Add a batch's per-key (amount, events) in one transaction; False if this query's batch
        was already applied."""
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            applied = conn.execute(
                "SELECT 1 FROM applied_batches WHERE query_id = ? AND batch_id = ?", (query_id, batch_id)
            ).fetchone()
            if self.guard and applied:
                conn.execute("ROLLBACK")
                return False
            events = 0
            for key, amount, count in totals:
                conn.execute(
                    "INSERT INTO totals (key, amount, events) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE"
                    " SET amount = amount + excluded.amount, events = events + excluded.events",
                    (key, amount, count),
                )
                events += count
            conn.execute(
                "INSERT OR REPLACE INTO applied_batches (query_id, batch_id, events) VALUES (?, ?, ?)",
                (query_id, batch_id, events),
            )
            conn.execute("COMMIT")
            return True
        finally:
            conn.close()

    def totals(self) -> dict[str, tuple[float, int]]:
        with self._connect() as conn:
            return {key: (amount, events) for key, amount, events in conn.execute("SELECT * FROM totals")}
