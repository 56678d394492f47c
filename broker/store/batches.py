"""Two-phase batches (the Spark sink): a producer group's half messages tagged with a batch id,
ended together, each batch committed at most once.

A batch's marker (``committed_batches``) is written in the same SQLite transaction as its
commits, so a batch is committed with its marker or not at all, and a replay of it, after a
crash between the broker's commit and the client's own record of it, finds the marker.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from broker.errors import HalfmqError
from broker.model import OP_TOPIC, BatchEnd, EndResult, Source, TransactionState
from broker.store.sql import COPY_PLAN, copy_planned
from broker.store.transactions import TransactionStore

# The transactions to commit (``temp.ending``), as ``h``; those still pending.
_ENDING = "FROM transactions h JOIN temp.ending e USING (transaction_id)"
_ENDING_PENDING = f"{_ENDING} WHERE h.state = 'PENDING'"
# The first transaction to commit that cannot be: unknown, another group's, or resolved otherwise.
_FIRST_REFUSED = (
    "SELECT e.transaction_id FROM temp.ending e LEFT JOIN transactions t USING (transaction_id)"
    " WHERE t.transaction_id IS NULL OR t.producer_group != ? OR t.state NOT IN ('PENDING', 'COMMITTED')"
    " ORDER BY e.rowid LIMIT 1"
)
# Through the pending-by-group partial index: what a group still has pending, a batch or below.
_PENDING_UP_TO = (
    "SELECT transaction_id FROM transactions INDEXED BY transactions_pending_group"
    " WHERE producer_group = ? AND state = 'PENDING' AND batch_id <= ?"
)


class BatchStore(TransactionStore):
    """Ends two-phase batches."""

    async def end_batch(
        self, producer_group: str, batch_id: int, commit: Sequence[str] | None, now_ms: int
    ) -> BatchEnd:
        """Commit the transactions in ``commit`` and record the batch as committed, unless it
        was already; with ``commit=None``, commit nothing (an abort). Either way, roll back what
        the group still has pending at ``batch_id`` or below. One SQLite transaction.

        Raises TransactionNotFound, ProducerGroupMismatch or ResolutionConflict for a transaction
        to commit that is unknown, another group's, or already rolled back; nothing is written then.
        """

        def work(conn: sqlite3.Connection) -> BatchEnd:
            recorded = conn.execute(
                "SELECT 1 FROM committed_batches WHERE producer_group = ? AND batch_id = ?", (producer_group, batch_id)
            ).fetchone()
            committed: list[int] = []
            if commit is not None and recorded is None:
                committed = self._commit_all(conn, producer_group, commit, now_ms)
                conn.execute(
                    "INSERT INTO committed_batches (producer_group, batch_id, committed_at, transactions)"
                    " VALUES (?, ?, ?, ?)",
                    (producer_group, batch_id, now_ms, len(commit)),
                )
            stale = [txid for (txid,) in conn.execute(_PENDING_UP_TO, (producer_group, batch_id))]
            target = TransactionState.ROLLED_BACK
            rolled = self._resolve_many(conn, [(txid, target, Source.CLIENT.value, None) for txid in stale], now_ms)
            rolled_back = [r.half_stored_at for r in rolled if isinstance(r, EndResult)]  # none is refused
            return BatchEnd(commit is not None and recorded is not None, committed, rolled_back)

        return await self._writer.run(work)

    def _commit_all(
        self, conn: sqlite3.Connection, producer_group: str, commit: Sequence[str], now_ms: int
    ) -> list[int]:
        """Commit the group's transactions ``commit`` (those already committed stay as they are),
        each statement for them all, in SQL: their final messages (copied from their half
        messages), op records and states. Returns when each newly committed one's half was stored.
        Raises for the first that cannot be committed, as ``resolve`` would; nothing is written then."""
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS ending (transaction_id TEXT PRIMARY KEY)")
        conn.execute("DELETE FROM temp.ending")
        conn.executemany("INSERT OR IGNORE INTO temp.ending VALUES (?)", ((txid,) for txid in commit))
        refused = conn.execute(_FIRST_REFUSED, (producer_group,)).fetchone()
        if refused is not None:  # its refusal, as a single end would give it
            item = (refused[0], TransactionState.COMMITTED, Source.CLIENT.value, producer_group)
            for outcome in self._resolve_many(conn, [item], now_ms):
                if isinstance(outcome, HalfmqError):
                    raise outcome
        counts = conn.execute(f"SELECT topic, queue_id, COUNT(*) {_ENDING_PENDING} GROUP BY topic, queue_id")
        firsts = [(topic, queue_id, self._tails.take_run(topic, queue_id, n)) for topic, queue_id, n in counts]
        if not firsts:
            return []
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS bases (topic TEXT, queue_id INTEGER, first INTEGER)")
        conn.execute("DELETE FROM temp.bases")
        conn.executemany("INSERT INTO temp.bases VALUES (?, ?, ?)", firsts)
        # The copies planned from the small columns (a window over the bodies would sort them).
        conn.execute(COPY_PLAN)
        planned = conn.execute(
            "INSERT INTO temp.copy_plan (topic, queue_id, queue_offset, extra, half_offset) SELECT h.topic, h.queue_id,"
            " b.first + row_number() OVER (PARTITION BY h.topic, h.queue_id ORDER BY h.half_offset) - 1, '{}',"
            f" h.half_offset {_ENDING} JOIN temp.bases b ON b.topic = h.topic AND b.queue_id = h.queue_id"
            " WHERE h.state = 'PENDING' ORDER BY h.half_offset"
        ).rowcount
        copy_planned(conn, planned, now_ms)
        stored_at = [at for (at,) in conn.execute(f"SELECT h.half_stored_at {_ENDING_PENDING} ORDER BY h.half_offset")]
        first_op = self._tails.take_run(OP_TOPIC, 0, len(stored_at))
        conn.execute(
            "INSERT INTO op_log (op_offset, half_offset, stored_at)"
            f" SELECT ? + row_number() OVER (ORDER BY h.half_offset) - 1, h.half_offset, ? {_ENDING_PENDING}",
            (first_op, now_ms),
        )
        conn.execute(
            "UPDATE transactions SET state = ?, resolved_at = ?, resolution_source = ?"
            " WHERE state = 'PENDING' AND transaction_id IN (SELECT transaction_id FROM temp.ending)",
            (TransactionState.COMMITTED.value, now_ms, Source.CLIENT.value),
        )
        return stored_at
