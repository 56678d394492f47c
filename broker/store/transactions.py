"""Transactions over the half and op logs: prepare, resolve, checks and the pending scan."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from broker.errors import (
    HalfmqError,
    MessageIdInUse,
    ProducerGroupMismatch,
    ResolutionConflict,
    TransactionNotFound,
)
from broker.model import (
    DISCARD_TOPIC,
    HALF_TOPIC,
    OP_TOPIC,
    CheckRecord,
    EndResult,
    Message,
    Source,
    StoredMessage,
    Transaction,
    TransactionState,
    single,
)
from broker.store.base import StoreBase
from broker.store.sql import (
    HALF_COLUMNS_LIST,
    TRANSACTION_COLUMNS,
    copy_halves,
    half_values,
    row_to_message,
    row_to_transaction,
    rows_in,
    translated,
)

# What an item of a resolving batch may be refused with; it writes nothing, the rest carry on.
_REFUSALS = (TransactionNotFound, ProducerGroupMismatch, ResolutionConflict)

# A half message and its PENDING transaction: one row.
_INSERT_TRANSACTION = (
    "INSERT INTO transactions (transaction_id, half_offset, message_id, producer_group, topic, queue_id, state,"
    f" half_stored_at, {HALF_COLUMNS_LIST}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_OP = "INSERT INTO op_log (op_offset, half_offset, stored_at) VALUES (?, ?, ?)"
_RESOLVE = "UPDATE transactions SET state = ?, resolved_at = ?, resolution_source = ? WHERE transaction_id = ?"


@dataclass
class _Resolutions:
    """What resolving a batch writes, gathered so that each kind is one statement."""

    copies: list[tuple[Transaction, str, int, dict[str, str]]] = field(default_factory=list)
    ops: list[tuple[object, ...]] = field(default_factory=list)
    updates: list[tuple[str, int, str, str]] = field(default_factory=list)


def _transactions_by(conn: sqlite3.Connection, column: str, values: Sequence[str]) -> dict[str, Transaction]:
    """The transactions whose ``column`` (transaction_id or message_id, both unique) is one of
    ``values``, keyed by it: one lookup for a batch."""
    rows = rows_in(conn, f"SELECT {TRANSACTION_COLUMNS} FROM transactions WHERE {column} IN ({{}})", values)
    return {getattr(txn, column): txn for txn in map(row_to_transaction, rows)}


class TransactionStore(StoreBase):
    """Half messages, their transaction records (the half log minus the op log) and checks."""

    async def prepare_many(
        self, items: Sequence[tuple[Message, str, int, str]], now_ms: int
    ) -> list[Transaction | HalfmqError]:
        """Append half messages and their PENDING transaction records, for (message, producer
        group, queue id, transaction id) items, in one job: each item gets its transaction or its
        refusal; a storage failure fails them all. A message id that already has a half message
        of the same topic and group (stored before or earlier in the batch) returns that
        transaction unchanged (a retried send); an id taken otherwise is refused with MessageIdInUse."""
        return await self._writer.run(lambda conn: self._prepare_many(conn, items, now_ms))

    def _prepare_many(
        self,
        conn: sqlite3.Connection,
        items: Sequence[tuple[Message, str, int, str]],
        now_ms: int,
    ) -> list[Transaction | HalfmqError]:
        ids = [message.message_id for message, *_ in items]
        known = _transactions_by(conn, "message_id", ids)
        taken = {
            (topic, message_id)
            for topic in {message.topic for message, *_ in items}
            for (message_id,) in rows_in(
                conn, "SELECT message_id FROM messages WHERE topic = ? AND message_id IN ({})", ids, topic
            )
        }
        results: list[Transaction | HalfmqError] = []
        records: list[tuple[object, ...]] = []
        for message, producer_group, queue_id, transaction_id in items:
            txn = known.get(message.message_id)
            if txn is not None:
                same = (txn.topic, txn.producer_group) == (message.topic, producer_group)
                results.append(txn if same else MessageIdInUse(
                    f"message id {message.message_id!r} belongs to a transaction of topic {txn.topic!r}"
                    f" and producer group {txn.producer_group!r}"
                ))  # fmt: skip
                continue
            if (message.topic, message.message_id) in taken:
                results.append(
                    MessageIdInUse(f"message id {message.message_id!r} is already used in topic {message.topic!r}")
                )
                continue
            half_offset = self._tails.take(HALF_TOPIC, 0)
            pending = TransactionState.PENDING
            records.append((transaction_id, half_offset, message.message_id, producer_group, message.topic,
                            queue_id, pending.value, now_ms, *half_values(message)))  # fmt: skip
            txn = Transaction(transaction_id, producer_group, half_offset, message.topic, queue_id,
                              message.message_id, pending, 0, now_ms, None)  # fmt: skip
            known[message.message_id] = txn
            results.append(txn)
        conn.executemany(_INSERT_TRANSACTION, records)
        return results

    async def resolve(
        self,
        transaction_id: str,
        target: TransactionState,
        now_ms: int,
        *,
        source: str,
        producer_group: str | None = None,
    ) -> EndResult:
        """Move a PENDING transaction to ``target`` in one SQLite transaction.

        COMMITTED appends the final message to its real topic queue, DISCARDED copies it to
        the discard topic; every resolution appends an op record (tag ``d``, body = the half
        offset). Repeating the recorded state changes nothing. Raises
        TransactionNotFound, ProducerGroupMismatch (when ``producer_group`` is given and differs)
        or ResolutionConflict.
        """
        return single(await self.resolve_many([(transaction_id, target, source, producer_group)], now_ms))

    async def resolve_many(
        self, items: Sequence[tuple[str, TransactionState, str, str | None]], now_ms: int
    ) -> list[EndResult | HalfmqError]:
        """``resolve`` for (transaction id, target, source, producer group) items, in one job, in
        order: each item gets its result or its refusal; a storage failure fails them all."""
        return await self._writer.run(lambda conn: self._resolve_many(conn, items, now_ms))

    def _resolve_many(
        self, conn: sqlite3.Connection, items: Sequence[tuple[str, TransactionState, str, str | None]], now_ms: int
    ) -> list[EndResult | HalfmqError]:
        known = _transactions_by(conn, "transaction_id", [transaction_id for transaction_id, *_ in items])
        writes = _Resolutions()
        results: list[EndResult | HalfmqError] = []
        for transaction_id, target, source, producer_group in items:
            try:
                results.append(self._resolution(known, transaction_id, target, source, producer_group, now_ms, writes))
            except _REFUSALS as exc:
                results.append(exc)
        copy_halves(conn, self._tails, writes.copies, now_ms)
        conn.executemany(_INSERT_OP, writes.ops)
        conn.executemany(_RESOLVE, writes.updates)
        return results

    def _resolution(
        self,
        known: dict[str, Transaction],
        transaction_id: str,
        target: TransactionState,
        source: str,
        producer_group: str | None,
        now_ms: int,
        writes: _Resolutions,
    ) -> EndResult:
        """One item of a batch: its outcome, and what it writes added to ``writes``; ``known``
        is updated, so a later item of the same transaction sees this one's state."""
        txn = known.get(transaction_id)
        if txn is None:
            raise TransactionNotFound(f"no half message has transaction id {transaction_id}")
        if producer_group is not None:
            txn.check_owner(producer_group)
        if not txn.state.transition(target):
            return EndResult(state=txn.state, already_resolved=True, half_stored_at=txn.half_stored_at)
        if target is TransactionState.COMMITTED:  # a checked one says how often, as in RocketMQ
            # An answer can come before its round records the check it answers (a producer that
            # answers within a millisecond): that check counts, as RocketMQ counts it before sending.
            times = max(txn.check_times, 1) if source == Source.CHECK.value else txn.check_times
            checked = {"TRANSACTION_CHECK_TIMES": str(times)} if times else {}
            writes.copies.append((txn, txn.topic, txn.queue_id, checked))
        elif target is TransactionState.DISCARDED and not txn.resumes:  # discarded once: one copy kept
            extra = {"REAL_TOPIC": txn.topic, "TRANSACTION_CHECK_TIMES": str(txn.check_times)}
            writes.copies.append((txn, DISCARD_TOPIC, 0, extra))
        writes.ops.append((self._tails.take(OP_TOPIC, 0), txn.half_offset, now_ms))
        writes.updates.append((target.value, now_ms, source, transaction_id))
        known[transaction_id] = replace(txn, state=target)
        return EndResult(state=target, already_resolved=False, half_stored_at=txn.half_stored_at)

    async def record_checks(self, delivered: Sequence[tuple[str, str]], now_ms: int) -> None:
        """Count checks delivered at ``now_ms``, given as (transaction id, producer session id),
        with their history. A check answered so fast that its transaction is already resolved
        counts too: it was delivered while the transaction was pending."""

        def work(conn: sqlite3.Connection) -> None:
            for transaction_id, client_id in delivered:
                updated = conn.execute(
                    "UPDATE transactions SET check_times = check_times + 1, last_check_at = ?"
                    " WHERE transaction_id = ? RETURNING check_times",
                    (now_ms, transaction_id),
                ).fetchone()
                if updated is not None:
                    conn.execute(
                        "INSERT INTO checks (transaction_id, check_no, checked_at, client_id) VALUES (?, ?, ?, ?)",
                        (transaction_id, updated[0], now_ms, client_id),
                    )

        await self._writer.run(work)

    async def refund_checks(self, transaction_ids: Sequence[str]) -> None:
        """Give back one counted check to each pending transaction (an unanswered check that
        must not use up its budget); its delivery stays in the check history."""

        def work(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "UPDATE transactions SET check_times = check_times - 1"
                " WHERE transaction_id = ? AND state = ? AND check_times > 0",
                [(txid, TransactionState.PENDING.value) for txid in transaction_ids],
            )

        await self._writer.run(work)

    async def resume(self, transaction_id: str, now_ms: int) -> Transaction:
        """Make a DISCARDED transaction PENDING again with a fresh check budget and clock.

        Raises TransactionNotFound, or ResolutionConflict when it is not DISCARDED.
        """

        def work(conn: sqlite3.Connection) -> Transaction:
            txn = self._transaction(conn, transaction_id)
            if txn.state is not TransactionState.DISCARDED:
                raise ResolutionConflict(f"transaction is {txn.state.value}; only a DISCARDED one can be resumed")
            txn.state.transition(TransactionState.PENDING)
            conn.execute(
                "UPDATE transactions SET state = ?, check_times = 0, last_check_at = NULL, half_stored_at = ?,"
                " resolved_at = NULL, resolution_source = NULL, resumes = resumes + 1 WHERE transaction_id = ?",
                (TransactionState.PENDING.value, now_ms, transaction_id),
            )
            return self._transaction(conn, transaction_id)

        return await self._writer.run(work)

    @translated
    def list_transactions(
        self, state: TransactionState | None, limit: int, offset: int
    ) -> tuple[list[Transaction], int]:
        """A page of transactions (oldest half first) and the total count, optionally of one state."""
        where, params = ("WHERE state = ?", (state.value,)) if state else ("", ())
        conn = self._reader()
        (total,) = conn.execute(f"SELECT COUNT(*) FROM transactions {where}", params).fetchone()
        rows = conn.execute(
            f"SELECT {TRANSACTION_COLUMNS} FROM transactions {where} ORDER BY half_stored_at, half_offset"
            " LIMIT ? OFFSET ?",
            (*params, limit, offset),
        ).fetchall()
        return [row_to_transaction(r) for r in rows], int(total)

    @translated
    def checks_of(self, transaction_id: str) -> list[CheckRecord]:
        rows = (
            self._reader()
            .execute(
                "SELECT check_no, checked_at, client_id FROM checks WHERE transaction_id = ? ORDER BY rowid",
                (transaction_id,),
            )
            .fetchall()
        )
        return [CheckRecord(check_no=n, checked_at=at, client_id=client) for n, at, client in rows]

    @translated
    def transaction(self, transaction_id: str) -> Transaction:
        """Return the transaction record; raise TransactionNotFound if there is none."""
        return self._transaction(self._reader(), transaction_id)

    @translated
    def transaction_of_message(self, message_id: str) -> Transaction:
        """The transaction whose half message has ``message_id``; raise TransactionNotFound if none."""
        row = (
            self._reader()
            .execute(f"SELECT {TRANSACTION_COLUMNS} FROM transactions WHERE message_id = ?", (message_id,))
            .fetchone()
        )
        if row is None:
            raise TransactionNotFound(f"no half message has message id {message_id}")
        return row_to_transaction(row)

    @translated
    def half_message(self, txn: Transaction) -> StoredMessage:
        """Return the half message of ``txn`` as RocketMQ stores it: in the half topic, with the
        broker's properties (REAL_TOPIC, REAL_QID, PGROUP, __transactionId__, UNIQ_KEY) beside
        the producer's."""
        keys, tags, properties, body, born = (
            self._reader()
            .execute(f"SELECT {HALF_COLUMNS_LIST} FROM transactions WHERE half_offset = ?", (txn.half_offset,))
            .fetchone()
        )
        half = row_to_message((HALF_TOPIC, 0, txn.half_offset, txn.message_id, txn.transaction_id, keys, tags,
                               properties, body, born, txn.half_stored_at))  # fmt: skip
        system = {"REAL_TOPIC": txn.topic, "REAL_QID": str(txn.queue_id), "PGROUP": txn.producer_group,
                  "__transactionId__": txn.transaction_id, "UNIQ_KEY": txn.message_id}  # fmt: skip
        return replace(half, properties={**half.properties, **system})

    @translated
    def pending(
        self,
        stored_before_ms: int,
        limit: int,
        producer_group: str | None = None,
        *,
        checked_before_ms: int | None = None,
    ) -> list[Transaction]:
        """Return up to ``limit`` PENDING transactions whose half was stored before the given
        time, oldest first, of one producer group or of all; with ``checked_before_ms``, only
        those never checked or last checked before it. Uses partial indexes: the cost does not
        grow with history."""
        where, params = "", list[object]()
        if producer_group is not None:
            where, params = "AND producer_group = ?", [producer_group]
        if checked_before_ms is not None:
            where, params = f"{where} AND (last_check_at IS NULL OR last_check_at <= ?)", [*params, checked_before_ms]
        rows = (
            self._reader()
            .execute(
                f"SELECT {TRANSACTION_COLUMNS} FROM transactions WHERE state = ? AND half_stored_at < ? {where}"
                " ORDER BY half_stored_at LIMIT ?",
                (TransactionState.PENDING.value, stored_before_ms, *params, limit),
            )
            .fetchall()
        )
        return [row_to_transaction(r) for r in rows]

    @translated
    def pending_counts(self, stored_before_ms: int, checked_after_ms: int) -> dict[str, tuple[int, int]]:
        """Per producer group, PENDING transactions stored before the given time: (how many,
        how many of them were last checked after ``checked_after_ms``)."""
        rows = self._reader().execute(
            "SELECT producer_group, COUNT(*), COALESCE(SUM(last_check_at > ?), 0) FROM transactions"
            " WHERE state = ? AND half_stored_at < ? GROUP BY producer_group",
            (checked_after_ms, TransactionState.PENDING.value, stored_before_ms),
        )
        return {group: (total, waiting) for group, total, waiting in rows}

    @translated
    def pending_count(self) -> int:
        (count,) = (
            self._reader()
            .execute("SELECT COUNT(*) FROM transactions WHERE state = ?", (TransactionState.PENDING.value,))
            .fetchone()
        )
        return int(count)

    @staticmethod
    def _transaction(conn: sqlite3.Connection, transaction_id: str) -> Transaction:
        row = conn.execute(
            f"SELECT {TRANSACTION_COLUMNS} FROM transactions WHERE transaction_id = ?", (transaction_id,)
        ).fetchone()
        if row is None:
            raise TransactionNotFound(f"no half message has transaction id {transaction_id}")
        return row_to_transaction(row)
