"""Kafka-model transactions: messages to any topics and queues and consumer offsets, all visible
at commit or none.

A transactional id has one producer at a time, the one holding its newest epoch (every
InitTransactions bumps it and aborts the open transaction, fencing the older producer). A
transaction's messages are stored as they are sent, at their final offsets, as open ranges of
their queues (readers stop at a queue's first open range, as for exactly-once batches); its
consumer offsets wait in ``txn_offsets``. A commit deletes the ranges' records and writes the
offsets in one SQLite transaction; an abort deletes the messages and the waiting offsets.

Every call names the transaction by its number, so a call retried after a lost answer is
recognised: a send of message ids the transaction holds returns their positions, and an end of
a transaction that ended the same way does nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from broker.errors import (
    InvalidArgument,
    InvalidTxnState,
    MessageIdInUse,
    ProducerFenced,
    TransactionAborted,
    TransactionalIdNotFound,
)
from broker.model import AbortedBy, Message, MessageRows, OffsetInTxn, ProducerEpoch, TransactionalId, TxnEnd, TxnState
from broker.store.batches import roll_back_ranges
from broker.store.logs import LogStore, message_rows
from broker.store.sql import OPEN_HOLDING, MessagesInsert, QueueTails, rows_in, translated

_COLUMNS = "epoch, txn_number, state, ended_by"


class KafkaTxnStore(LogStore):
    """Transactional ids, their open transactions and the offsets sent to them."""

    async def init_producer(
        self, transactional_id: str, timeout_ms: int, now_ms: int, held_epoch: int | None = None
    ) -> ProducerEpoch:
        """Hand the id's next epoch to a new producer (epoch 0 for a new id), aborting the
        transaction the id has open: the producer that held it is fenced. With ``held_epoch``,
        the producer holding that epoch bumps its own; raises ProducerFenced if the id is at
        another epoch."""

        def work(conn: sqlite3.Connection) -> ProducerEpoch:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM transactional_ids WHERE transactional_id = ?", (transactional_id,)
            ).fetchone()
            if held_epoch is not None and row is not None and row[0] != held_epoch:
                raise ProducerFenced(f"transactional id {transactional_id!r} is held by a newer producer")
            if row is None:
                conn.execute(
                    "INSERT INTO transactional_ids (transactional_id, epoch, timeout_ms, txn_number, state)"
                    " VALUES (?, 0, ?, 0, ?)",
                    (transactional_id, timeout_ms, TxnState.READY.value),
                )
                return ProducerEpoch(0, 0, False, 0)
            epoch, txn_number, state, _ = row
            was_open = state == TxnState.OPEN.value
            aborted = _abort(conn, self._tails, transactional_id, AbortedBy.FENCED, now_ms) if was_open else 0
            conn.execute(
                "UPDATE transactional_ids SET epoch = ?, timeout_ms = ? WHERE transactional_id = ?",
                (epoch + 1, timeout_ms, transactional_id),
            )
            return ProducerEpoch(epoch + 1, txn_number, was_open, aborted)

        return await self._writer.run(work)

    async def send_in_txn(
        self,
        transactional_id: str,
        epoch: int,
        txn_number: int,
        placed: Sequence[tuple[Message, int]],
        now_ms: int,
    ) -> list[tuple[int, int]]:
        """Store the messages of ``placed`` (each with its queue) in the transaction, all or none,
        opening it if it is the id's next; return each message's queue and offset.

        Raises ProducerFenced, TransactionalIdNotFound, InvalidTxnState, TransactionAborted,
        or MessageIdInUse (naming the message) for an id stored before or held elsewhere."""

        insert = MessagesInsert(*message_rows(placed))
        rows, queue_ids = insert.rows, insert.queue_ids

        def work(conn: sqlite3.Connection) -> list[tuple[int, int]]:
            _join(conn, transactional_id, epoch, txn_number, now_ms)
            held = _held(conn, transactional_id, rows)
            if held is not None:  # the same send, retried: it was stored
                return held
            before = {(t, q): self._tails.next(t, q) for t, q in zip(rows.topics, queue_ids, strict=True)}
            appended = self._append_rows(conn, insert, now_ms)
            for row, refusal in sorted(appended.refused.items())[:1]:
                raise type(refusal)(f"message {row}: {refusal}")
            placed = list(zip(appended.queue_ids, appended.queue_offsets, strict=True))
            for row, (topic, (queue_id, offset)) in enumerate(zip(rows.topics, placed, strict=True)):
                if offset < before[(topic, queue_id)]:
                    raise MessageIdInUse(
                        f"message {row}: message id {rows.message_ids[row]!r} is stored in topic {topic!r} already;"
                        " a transaction's messages take new ids"
                    )
            conn.executemany(
                "INSERT INTO open_ranges (producer_group, batch_id, topic, queue_id, first_offset, end_offset,"
                " opened_at, transactional_id) VALUES ('', 0, ?, ?, ?, ?, ?, ?)",
                [(t, q, first, self._tails.next(t, q), now_ms, transactional_id) for (t, q), first in before.items()],
            )
            conn.execute(
                "UPDATE transactional_ids SET messages = messages + ? WHERE transactional_id = ?",
                (len(rows), transactional_id),
            )
            return placed

        return await self._writer.run(work)

    async def add_offsets(
        self,
        transactional_id: str,
        epoch: int,
        txn_number: int,
        group: str,
        offsets: Sequence[OffsetInTxn],
        now_ms: int,
    ) -> None:
        """Keep ``group``'s next offsets with the transaction, to be committed with it (a later
        offset of the same queue replaces an earlier one); opens the transaction as a send does."""

        def work(conn: sqlite3.Connection) -> None:
            _join(conn, transactional_id, epoch, txn_number, now_ms)
            conn.executemany(
                "INSERT INTO txn_offsets (transactional_id, consumer_group, topic, queue_id, queue_offset)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (transactional_id, consumer_group, topic, queue_id)"
                " DO UPDATE SET queue_offset = excluded.queue_offset",
                [(transactional_id, group, o.topic, o.queue_id, o.offset) for o in offsets],
            )

        await self._writer.run(work)

    async def end_txn(self, transactional_id: str, epoch: int, txn_number: int, commit: bool, now_ms: int) -> TxnEnd:
        """Commit the open transaction (its messages become visible and its offsets are written)
        or abort it (its messages and offsets are deleted), in one SQLite transaction. An end of
        a transaction that already ended the same way does nothing (a retried end); an abort of
        one the broker aborted too.

        Raises ProducerFenced, TransactionalIdNotFound, TransactionAborted (a commit of one the
        broker aborted) or InvalidTxnState."""

        def work(conn: sqlite3.Connection) -> TxnEnd:
            number, state, ended_by = _current(conn, transactional_id, epoch)
            if number == txn_number and state == TxnState.OPEN.value:
                if not commit:
                    offsets = _count_offsets(conn, transactional_id)
                    return TxnEnd(
                        False, _abort(conn, self._tails, transactional_id, AbortedBy.PRODUCER, now_ms), offsets
                    )
                return _commit(conn, self._tails, transactional_id, now_ms)
            ended = TxnState.COMMITTED if commit else TxnState.ABORTED
            if number == txn_number and state == ended.value:
                return TxnEnd(True, 0, 0)
            if number + 1 == txn_number and state != TxnState.OPEN.value:  # nothing of it was ever stored
                _join(conn, transactional_id, epoch, txn_number, now_ms)
                return (
                    _commit(conn, self._tails, transactional_id, now_ms)
                    if commit
                    else TxnEnd(False, _abort(conn, self._tails, transactional_id, AbortedBy.PRODUCER, now_ms), 0)
                )
            raise _not_open(transactional_id, txn_number, number, state, ended_by)

        return await self._writer.run(work)

    @translated
    def open_txn_count(self) -> int:
        """How many Kafka-model transactions are open."""
        (count,) = self._reader().execute("SELECT COUNT(*) FROM transactional_ids WHERE state = 'OPEN'").fetchone()
        return int(count)

    @translated
    def open_txns_before(self, began_before_ms: int) -> list[tuple[str, int]]:
        """The transactional ids and numbers of transactions open since before ``began_before_ms``
        plus their own timeout: those the broker is to abort."""
        return [
            (str(tid), int(number))
            for tid, number in self._reader().execute(
                "SELECT transactional_id, txn_number FROM transactional_ids WHERE state = 'OPEN'"
                " AND began_at + timeout_ms < ?",
                (began_before_ms,),
            )
        ]

    async def expire_txns(self, txns: Sequence[tuple[str, int]], now_ms: int) -> tuple[int, int]:
        """Abort each of ``txns`` (transactional id, number) still open; return how many were,
        and how many messages went."""

        def work(conn: sqlite3.Connection) -> tuple[int, int]:
            aborted = deleted = 0
            for transactional_id, txn_number in txns:
                still = conn.execute(
                    "SELECT 1 FROM transactional_ids WHERE transactional_id = ? AND txn_number = ? AND state = 'OPEN'",
                    (transactional_id, txn_number),
                ).fetchone()
                if still is not None:
                    aborted += 1
                    deleted += _abort(conn, self._tails, transactional_id, AbortedBy.TIMEOUT, now_ms)
            return aborted, deleted

        return await self._writer.run(work)

    @translated
    def open_txn_queues(self, transactional_id: str) -> list[tuple[str, int]]:
        """The (topic, queue) pairs the id's open transaction wrote to, in order; none if it has none open."""
        rows = self._reader().execute(
            "SELECT DISTINCT topic, queue_id FROM open_ranges WHERE transactional_id = ? ORDER BY topic, queue_id",
            (transactional_id,),
        )
        return [(str(topic), int(queue_id)) for topic, queue_id in rows]

    @translated
    def txn_offset_groups(self) -> set[str]:
        """The groups with offsets waiting in open transactions."""
        return {group for (group,) in self._reader().execute("SELECT DISTINCT consumer_group FROM txn_offsets")}

    @translated
    def pending_txn_offsets(self, group: str) -> set[tuple[str, int]]:
        """The (topic, queue) offsets of ``group`` waiting in open transactions."""
        rows = self._reader().execute(
            "SELECT DISTINCT topic, queue_id FROM txn_offsets WHERE consumer_group = ?", (group,)
        )
        return {(topic, queue_id) for topic, queue_id in rows}

    @translated
    def transactional_ids(self, transactional_id: str | None = None) -> list[TransactionalId]:
        """Every transactional id (or the one named), its epoch and its current or last transaction."""
        where, params = ("WHERE t.transactional_id = ?", (transactional_id,)) if transactional_id else ("", ())
        return [
            TransactionalId(
                transactional_id=row[0],
                epoch=row[1],
                timeout_ms=row[2],
                txn_number=row[3],
                state=TxnState(row[4]),
                aborted_by=None if row[5] is None else AbortedBy(row[5]),
                began_at=row[6],
                ended_at=row[7],
                messages=row[8],
                offsets=row[11],
                committed=row[9],
                aborted=row[10],
            )
            for row in self._reader().execute(
                "SELECT t.transactional_id, epoch, timeout_ms, txn_number, state, ended_by, began_at, ended_at,"
                " messages, committed, aborted,"
                " (SELECT COUNT(*) FROM txn_offsets o WHERE o.transactional_id = t.transactional_id)"
                f" FROM transactional_ids t {where} ORDER BY t.transactional_id",
                params,
            )
        ]


def _current(conn: sqlite3.Connection, transactional_id: str, epoch: int) -> tuple[int, str, str | None]:
    """The id's transaction number, state and aborter, if ``epoch`` is the id's; raise otherwise."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM transactional_ids WHERE transactional_id = ?", (transactional_id,)
    ).fetchone()
    if row is None:
        raise TransactionalIdNotFound(
            f"transactional id {transactional_id!r} was never initialised: a producer starts with InitTransactions"
        )
    current, txn_number, state, ended_by = row
    if epoch < current:
        raise ProducerFenced(
            f"producer epoch {epoch} of transactional id {transactional_id!r} is fenced: a producer with the same"
            f" transactional id started since (epoch {current})"
        )
    if epoch > current:
        raise InvalidArgument(
            f"producer epoch {epoch} of transactional id {transactional_id!r} was never handed out (newest: {current})"
        )
    return txn_number, state, ended_by


def _join(conn: sqlite3.Connection, transactional_id: str, epoch: int, txn_number: int, now_ms: int) -> None:
    """Check that transaction ``txn_number`` is open, opening it if it is the id's next."""
    number, state, ended_by = _current(conn, transactional_id, epoch)
    if number == txn_number and state == TxnState.OPEN.value:
        return
    if number + 1 == txn_number and state != TxnState.OPEN.value:
        conn.execute(
            "UPDATE transactional_ids SET txn_number = ?, state = 'OPEN', ended_by = NULL, began_at = ?,"
            " ended_at = NULL, messages = 0 WHERE transactional_id = ?",
            (txn_number, now_ms, transactional_id),
        )
        return
    raise _not_open(transactional_id, txn_number, number, state, ended_by)


def _not_open(
    transactional_id: str, txn_number: int, number: int, state: str, ended_by: str | None
) -> InvalidTxnState | TransactionAborted:
    if number == txn_number and ended_by == AbortedBy.TIMEOUT.value:
        return TransactionAborted(
            f"transaction {txn_number} of transactional id {transactional_id!r} was aborted by the broker: it was"
            " open longer than the producer's transaction timeout"
        )
    if number == txn_number:
        return InvalidTxnState(
            f"transaction {txn_number} of transactional id {transactional_id!r} is {state.lower()} already"
        )
    return InvalidTxnState(
        f"transaction {txn_number} of transactional id {transactional_id!r} is not open (the id's current"
        f" transaction is {number}, {state.lower()})"
    )


def _held(conn: sqlite3.Connection, transactional_id: str, rows: MessageRows) -> list[tuple[int, int]] | None:
    """The positions of ``rows`` if the transaction holds every one of them already (a retried
    send); None if it holds none. Raises MessageIdInUse if it holds some of them only."""
    held: set[tuple[str, str]] = set()
    for topic in set(rows.topics):
        ids = [i for t, i in zip(rows.topics, rows.message_ids, strict=True) if t == topic]
        held |= {(topic, m) for m, *_, owner in rows_in(conn, OPEN_HOLDING, ids, topic) if owner == transactional_id}
    if not held:
        return None
    if len(held) < len(rows):
        row = next(i for i, key in enumerate(zip(rows.topics, rows.message_ids, strict=True)) if key not in held)
        raise MessageIdInUse(
            f"message {row}: the transaction holds some of this send's message ids already, but not"
            f" {rows.message_ids[row]!r}: a send is stored whole, so a retry carries the same messages"
        )
    return [
        conn.execute(
            "SELECT queue_id, queue_offset FROM messages WHERE topic = ? AND message_id = ?", (topic, message_id)
        ).fetchone()
        for topic, message_id in zip(rows.topics, rows.message_ids, strict=True)
    ]


def _count_offsets(conn: sqlite3.Connection, transactional_id: str) -> int:
    (count,) = conn.execute(
        "SELECT COUNT(*) FROM txn_offsets WHERE transactional_id = ?", (transactional_id,)
    ).fetchone()
    return int(count)


def _mark_end(conn: sqlite3.Connection, tails: QueueTails, transactional_id: str) -> None:
    """Take the next offset of each queue the open transaction wrote to, as Kafka's commit or
    abort marker takes one there; ``control_offsets`` keeps it from being handed out again."""
    queues = conn.execute(
        "SELECT DISTINCT topic, queue_id FROM open_ranges WHERE transactional_id = ?", (transactional_id,)
    ).fetchall()
    conn.executemany(
        "INSERT INTO control_offsets (topic, queue_id, next_offset) VALUES (?, ?, ?) ON CONFLICT (topic, queue_id)"
        " DO UPDATE SET next_offset = MAX(next_offset, excluded.next_offset)",
        [(topic, queue_id, tails.take(topic, queue_id) + 1) for topic, queue_id in queues],
    )


def _commit(conn: sqlite3.Connection, tails: QueueTails, transactional_id: str, now_ms: int) -> TxnEnd:
    _mark_end(conn, tails, transactional_id)
    (messages,) = conn.execute(
        "SELECT COALESCE(SUM(end_offset - first_offset), 0) FROM open_ranges WHERE transactional_id = ?",
        (transactional_id,),
    ).fetchone()
    conn.execute("DELETE FROM open_ranges WHERE transactional_id = ?", (transactional_id,))
    offsets = _count_offsets(conn, transactional_id)
    conn.execute(
        "INSERT INTO consumer_offsets (consumer_group, topic, queue_id, queue_offset)"
        " SELECT consumer_group, topic, queue_id, queue_offset FROM txn_offsets WHERE transactional_id = ?"
        " ON CONFLICT (consumer_group, topic, queue_id) DO UPDATE SET queue_offset = excluded.queue_offset",
        (transactional_id,),
    )
    conn.execute("DELETE FROM txn_offsets WHERE transactional_id = ?", (transactional_id,))
    conn.execute(
        "UPDATE transactional_ids SET state = 'COMMITTED', ended_at = ?, committed = committed + 1"
        " WHERE transactional_id = ?",
        (now_ms, transactional_id),
    )
    return TxnEnd(False, int(messages), offsets)


def _abort(conn: sqlite3.Connection, tails: QueueTails, transactional_id: str, by: AbortedBy, now_ms: int) -> int:
    """Abort the id's open transaction: delete its messages and offsets; return how many messages."""
    _mark_end(conn, tails, transactional_id)
    deleted = roll_back_ranges(conn, "transactional_id = ?", (transactional_id,))
    conn.execute("DELETE FROM txn_offsets WHERE transactional_id = ?", (transactional_id,))
    conn.execute(
        "UPDATE transactional_ids SET state = 'ABORTED', ended_by = ?, ended_at = ?, aborted = aborted + 1"
        " WHERE transactional_id = ?",
        (by.value, now_ms, transactional_id),
    )
    return deleted
