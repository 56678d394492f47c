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
from broker.model import BatchEnd, EndResult, Source, TransactionState
from broker.store.transactions import TransactionStore

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
            committed: list[EndResult] = []
            if commit is not None and recorded is None:
                target = TransactionState.COMMITTED
                items = [(txid, target, Source.CLIENT.value, producer_group) for txid in commit]
                for result in self._resolve_many(conn, items, now_ms):
                    if isinstance(result, HalfmqError):
                        raise result
                    if not result.already_resolved:
                        committed.append(result)
                conn.execute(
                    "INSERT INTO committed_batches (producer_group, batch_id, committed_at, transactions)"
                    " VALUES (?, ?, ?, ?)",
                    (producer_group, batch_id, now_ms, len(commit)),
                )
            stale = [txid for (txid,) in conn.execute(_PENDING_UP_TO, (producer_group, batch_id))]
            target = TransactionState.ROLLED_BACK
            rolled = self._resolve_many(conn, [(txid, target, Source.CLIENT.value, None) for txid in stale], now_ms)
            rolled_back = [r for r in rolled if isinstance(r, EndResult)]  # pending a moment ago: none is refused
            return BatchEnd(commit is not None and recorded is not None, committed, rolled_back)

        return await self._writer.run(work)
