"""An idempotent SQLite sink for per-key totals: the batch id is stored with the state it updates.

This is Storm's "transaction id stored with the count" and the Spark form of Flink's two-phase
commit: Spark replays a micro-batch with the same id after a crash, and a batch id already
recorded changes nothing, so every committed message is counted exactly once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

_DDL = """
CREATE TABLE IF NOT EXISTS totals (key TEXT PRIMARY KEY, amount REAL NOT NULL, events INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS applied_batches (batch_id INTEGER PRIMARY KEY, events INTEGER NOT NULL);
"""


class TotalsSink:
    """Per-key totals in one SQLite file. ``guard=False`` drops the batch-id check (it exists to
    show, in a test, the double counting that the guard prevents)."""

    def __init__(self, path: Path, *, guard: bool = True) -> None:
        self.path = path
        self.guard = guard
        with self._connect() as conn:
            conn.executescript(_DDL)

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, isolation_level=None, timeout=30)

    def apply(self, batch_id: int, totals: Iterable[tuple[str, float, int]]) -> bool:
        """Add a batch's per-key (amount, events) in one transaction; False if the batch was already applied."""
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            if self.guard and conn.execute("SELECT 1 FROM applied_batches WHERE batch_id = ?", (batch_id,)).fetchone():
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
            conn.execute("INSERT OR REPLACE INTO applied_batches (batch_id, events) VALUES (?, ?)", (batch_id, events))
            conn.execute("COMMIT")
            return True
        finally:
            conn.close()

    def totals(self) -> dict[str, tuple[float, int]]:
        with self._connect() as conn:
            return {key: (amount, events) for key, amount, events in conn.execute("SELECT * FROM totals")}
