"""Exactly-once batches (the Spark sink): a producer group's messages stored where they will stay,
in open ranges, made visible together when their batch commits, deleted when it rolls back; each
batch committed at most once.

Kafka's log with transaction markers: a prepared run of messages takes its final offsets in one
queue at once, and readers of the queue stop at its first open range (the last stable offset).
A commit deletes range rows and writes the batch's marker (``committed_batches``), in one SQLite
transaction: no message is copied or rewritten. The marker lets a replay of the batch, after a
crash between the broker's commit and the client's own record of it, find it committed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from broker.errors import MessageIdInUse, RangeNotOpen
from broker.model import BatchEnd, MessageRows, OpenRange
from broker.store.logs import LogStore
from broker.store.sql import FROM_JSON, OPEN_HOLDING, MessagesInsert, json_text, rows_in, translated


def roll_back_ranges(conn: sqlite3.Connection, where: str, params: Sequence[object]) -> int:
    """Delete the open ranges ``WHERE`` picks and their messages; return how many messages.
    Their offsets are not handed out again while the broker runs; a rolled-back range at a
    queue's tail may be after a restart, as no reader ever passed it."""
    ranges = conn.execute(
        f"SELECT range_id, topic, queue_id, first_offset, end_offset FROM open_ranges WHERE {where}", params
    ).fetchall()
    deleted = 0
    for _, topic, queue_id, first, end in ranges:
        deleted += conn.execute(
            "DELETE FROM messages WHERE topic = ? AND queue_id = ? AND queue_offset >= ? AND queue_offset < ?",
            (topic, queue_id, first, end),
        ).rowcount
    conn.executemany("DELETE FROM open_ranges WHERE range_id = ?", [(range_id,) for range_id, *_ in ranges])
    return deleted


class BatchStore(LogStore):
    """Prepares and ends exactly-once batches."""

    async def prepare_range(
        self, producer_group: str, batch_id: int, rows: MessageRows, queue_id: int, now_ms: int
    ) -> OpenRange:
        """Store ``rows`` (one topic) in queue ``queue_id`` as an open range of the group's batch,
        all or none. A message id committed before in the topic is not stored again (a replay
        of a committed batch stores nothing). A message id in an open range of the group at this
        batch or below rolls that range back first (an earlier attempt at the batch, which can
        no longer commit). Raises MessageIdInUse, naming the row, for a message id of a half
        message or of another group's or a later batch's open range; nothing is written then."""
        insert = MessagesInsert(rows, [queue_id] * len(rows))

        def work(conn: sqlite3.Connection) -> OpenRange:
            topic = rows.topics[0]
            earlier = []
            # The ids' JSON the insert binds too, made before the job, off the writer's thread.
            holding = conn.execute(OPEN_HOLDING.format(FROM_JSON), (topic, insert.ids)).fetchall()
            for message_id, range_id, group, batch, transactional_id in holding:
                if group != producer_group or batch > batch_id:
                    owner = (
                        f"batch {batch} of producer group {group!r}"
                        if transactional_id is None
                        else f"the open transaction of transactional id {transactional_id!r}"
                    )
                    row = rows.message_ids.index(message_id)
                    raise MessageIdInUse(f"row {row}: message id {message_id!r} is in open range {range_id} of {owner}")
                earlier.append(range_id)
            if earlier:
                roll_back_ranges(conn, f"range_id IN ({', '.join('?' * len(earlier))})", earlier)
            first = self._tails.next(topic, queue_id)  # new messages take the offsets from here in a row
            appended = self._append_rows(conn, insert, now_ms)
            for row, refusal in sorted(appended.refused.items())[:1]:
                raise type(refusal)(f"row {row}: {refusal}")
            if not appended.new:
                return OpenRange(0, queue_id, first, first, len(rows))
            end = first + appended.new
            cursor = conn.execute(
                "INSERT INTO open_ranges (producer_group, batch_id, topic, queue_id, first_offset, end_offset,"
                " opened_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (producer_group, batch_id, topic, queue_id, first, end, now_ms),
            )
            return OpenRange(int(cursor.lastrowid or 0), queue_id, first, end, len(rows) - appended.new)

        return await self._writer.run(work)

    async def end_batch(
        self, producer_group: str, batch_id: int, commit: Sequence[int] | None, now_ms: int
    ) -> BatchEnd:
        """Commit the open ranges ``commit`` and record the batch as committed, unless it was
        already; with ``commit=None``, commit nothing (an abort). Either way, roll back what the
        group still has open at ``batch_id`` or below. One SQLite transaction.

        Raises RangeNotOpen for a range to commit that is not open in this batch of this group
        (when the batch was not committed before); nothing is written then."""

        def work(conn: sqlite3.Connection) -> BatchEnd:
            recorded = conn.execute(
                "SELECT 1 FROM committed_batches WHERE producer_group = ? AND batch_id = ?", (producer_group, batch_id)
            ).fetchone()
            committed = 0
            if commit is not None and recorded is None:
                committed = _commit_ranges(conn, producer_group, batch_id, commit)
                conn.execute(
                    "INSERT INTO committed_batches (producer_group, batch_id, committed_at, messages)"
                    " VALUES (?, ?, ?, ?)",
                    (producer_group, batch_id, now_ms, committed),
                )
            rolled_back = roll_back_ranges(conn, "producer_group = ? AND batch_id <= ?", (producer_group, batch_id))
            return BatchEnd(commit is not None and recorded is not None, committed, rolled_back)

        return await self._writer.run(work)

    @translated
    def oldest_open_range(self) -> int | None:
        """When the oldest open range of a batch was opened (ms), or None when none is."""
        (opened_at,) = (
            self._reader().execute("SELECT MIN(opened_at) FROM open_ranges WHERE transactional_id IS NULL").fetchone()
        )
        return None if opened_at is None else int(opened_at)

    async def expire_ranges(self, opened_before_ms: int) -> int:
        """Roll back every range opened before ``opened_before_ms`` (its batch was never ended:
        it would hold back its queue's readers for good); return how many messages went."""
        return await self._writer.run(
            lambda conn: roll_back_ranges(conn, "transactional_id IS NULL AND opened_at < ?", (opened_before_ms,))
        )


def _commit_ranges(conn: sqlite3.Connection, producer_group: str, batch_id: int, range_ids: Sequence[int]) -> int:
    """Close the ranges ``range_ids`` of the group's batch: their messages become visible. Returns
    how many messages; raises RangeNotOpen for the first that is not open there."""
    wanted = sorted(set(range_ids))
    found = {
        range_id: end - first
        for range_id, first, end in rows_in(
            conn, "SELECT range_id, first_offset, end_offset FROM open_ranges WHERE producer_group = ? AND batch_id = ?"
            " AND range_id IN ({})", wanted, producer_group, batch_id,
        )
    }  # fmt: skip
    for range_id in range_ids:
        if range_id not in found:
            raise RangeNotOpen(
                f"range {range_id} is not open in batch {batch_id} of producer group {producer_group!r}: never"
                " prepared there, or rolled back since (the batch timeout, or an end of a later batch)"
            )
    conn.execute(f"DELETE FROM open_ranges WHERE range_id IN ({FROM_JSON})", (json_text(wanted),))
    return sum(found.values())
