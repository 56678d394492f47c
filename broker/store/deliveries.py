"""Receive / ack / change-invisible-duration for consumer groups, as SQL jobs for the writer.

A queue's progress for a group is its committed consumer offset: every message below it is
acknowledged. Above it, ``deliveries`` rows hold what is in flight (invisible until
``visible_at``) or acknowledged out of order. A receipt handle is
``<queue_id>.<queue_offset>.<handle_seq>``; each hand-out or change of invisibility bumps the
sequence, so an older handle is stale.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from broker.errors import StaleReceiptHandle
from broker.model import MESSAGE_GROUP, Admits, Delivery, StoredMessage, message_size
from broker.retry import RetryPolicy
from broker.store.reads import queue_range_of
from broker.store.sql import MESSAGE_COLUMNS, row_to_message, set_consumer_offset

SCAN_LIMIT = 1024  # deliverable messages looked at per receive


def parse_handle(handle: str) -> tuple[int, int, int]:
    try:
        queue_id, offset, seq = (int(part) for part in handle.split("."))
    except ValueError:
        raise StaleReceiptHandle(f"malformed receipt handle {handle!r}") from None
    return queue_id, offset, seq


def _watermark(conn: sqlite3.Connection, group: str, topic: str, queue_id: int) -> int:
    row = conn.execute(
        "SELECT queue_offset FROM consumer_offsets WHERE consumer_group = ? AND topic = ? AND queue_id = ?",
        (group, topic, queue_id),
    ).fetchone()
    return 0 if row is None else int(row[0])


def _advance(conn: sqlite3.Connection, group: str, topic: str, queue_id: int) -> None:
    """Move the committed offset to the first message not acknowledged (or the queue's end),
    over gaps rolled back and below the queue's low offset, and forget the deliveries passed."""
    start = _watermark(conn, group, topic, queue_id)
    low, high = queue_range_of(conn, topic, queue_id)
    first = conn.execute(
        "SELECT m.queue_offset FROM messages m LEFT JOIN deliveries d ON d.consumer_group = ? AND d.topic = m.topic"
        " AND d.queue_id = m.queue_id AND d.queue_offset = m.queue_offset AND d.acked = 1"
        " WHERE m.topic = ? AND m.queue_id = ? AND m.queue_offset >= ? AND m.queue_offset < ?"
        " AND d.queue_offset IS NULL ORDER BY m.queue_offset LIMIT 1",
        (group, topic, queue_id, max(start, low), high),
    ).fetchone()
    offset = max(start, high if first is None else first[0])
    if offset == start:
        return
    conn.execute(
        "DELETE FROM deliveries WHERE consumer_group = ? AND topic = ? AND queue_id = ? AND queue_offset < ?",
        (group, topic, queue_id, offset),
    )
    set_consumer_offset(conn, group, topic, queue_id, offset)


# Moves a message delivered ``attempts`` times to the group's dead-letter topic, in the job.
DeadLetter = Callable[[sqlite3.Connection, StoredMessage, int], None]


def receive(
    group: str,
    topic: str,
    queue_id: int,
    batch: int,
    invisible_ms: int,
    now_ms: int,
    admits: Admits | None,
    max_bytes: int,
    policy: RetryPolicy,
    dead_letter: DeadLetter,
) -> Callable[[sqlite3.Connection], list[Delivery]]:
    """A job handing out up to ``batch`` visible messages, within ``max_bytes`` (at least one);
    messages the consumer's filter does not admit (None admits all) count as consumed. One
    delivered ``policy.max_attempts`` times already and visible again goes to ``dead_letter``
    instead, and counts as consumed: the copy and its leaving the group's deliveries are one
    write. A FIFO group gets a message group's first unacknowledged message only, and none while
    it is in flight."""

    def work(conn: sqlite3.Connection) -> list[Delivery]:
        start = _watermark(conn, group, topic, queue_id)
        _, high = queue_range_of(conn, topic, queue_id)
        # What the group may be handed: never delivered, or unacknowledged and visible again (a
        # FIFO group also looks at those in flight: they hold their message group back). The
        # join skips the others in SQL, however many lie ahead.
        candidates = conn.execute(
            "SELECT m.queue_offset, m.tags, m.properties, d.attempts, d.handle_seq, d.visible_at,"
            f" json_extract(m.properties, '$.{MESSAGE_GROUP}') FROM messages m LEFT JOIN deliveries d"
            " ON d.consumer_group = ? AND d.topic = m.topic AND d.queue_id = m.queue_id"
            " AND d.queue_offset = m.queue_offset"
            " WHERE m.topic = ? AND m.queue_id = ? AND m.queue_offset >= ? AND m.queue_offset < ?"
            " AND (d.queue_offset IS NULL OR (d.acked = 0 AND (? OR d.visible_at <= ?)))"
            " ORDER BY m.queue_offset LIMIT ?",
            (group, topic, queue_id, start, high, policy.fifo, now_ms, SCAN_LIMIT),
        ).fetchall()
        out: list[Delivery] = []
        total = 0
        held: set[str] = set()  # message groups whose first unacknowledged message came up
        for offset, tags, properties, attempts, seq, visible_at, message_group in candidates:
            if policy.fifo and message_group is not None:
                if message_group in held:
                    continue
                held.add(message_group)
            if visible_at is not None and visible_at > now_ms:  # in flight (a FIFO group's)
                continue
            attempts, seq = attempts or 0, seq or 0
            if admits is not None and not admits(tags, json.loads(properties)):
                _upsert(conn, group, topic, queue_id, offset, now_ms, attempts, seq, acked=1)
                held.discard(message_group)
                continue
            message = _message_at(conn, topic, queue_id, offset)
            if attempts >= policy.max_attempts:
                dead_letter(conn, message, attempts)
                _upsert(conn, group, topic, queue_id, offset, now_ms, attempts, seq + 1, acked=1)
                held.discard(message_group)
                continue
            total += message_size(message)
            if out and total > max_bytes:
                break
            _upsert(conn, group, topic, queue_id, offset, now_ms + invisible_ms, attempts + 1, seq + 1)
            out.append(Delivery(message, f"{queue_id}.{offset}.{seq + 1}", attempts + 1, now_ms + invisible_ms))
            if len(out) >= batch:
                break
        _advance(conn, group, topic, queue_id)
        return out

    return work


def _message_at(conn: sqlite3.Connection, topic: str, queue_id: int, offset: int) -> StoredMessage:
    return row_to_message(
        conn.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE topic = ? AND queue_id = ? AND queue_offset = ?",
            (topic, queue_id, offset),
        ).fetchone()
    )


def forward(group: str, topic: str, handle: str, dead_letter: DeadLetter) -> Callable[[sqlite3.Connection], None]:
    """A job moving the message a current receipt handle names to ``dead_letter`` now, as the
    last of its attempts (what a client asks for a FIFO message it gave up on)."""

    def work(conn: sqlite3.Connection) -> None:
        queue_id, offset, _ = _current(conn, group, topic, handle)
        (attempts,) = conn.execute(
            "SELECT attempts FROM deliveries"
            " WHERE consumer_group = ? AND topic = ? AND queue_id = ? AND queue_offset = ?",
            (group, topic, queue_id, offset),
        ).fetchone()
        dead_letter(conn, _message_at(conn, topic, queue_id, offset), attempts)
        _acknowledge(conn, group, topic, queue_id, offset)

    return work


def _upsert(
    conn: sqlite3.Connection,
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    visible_at: int,
    attempts: int,
    seq: int,
    acked: int = 0,
) -> None:
    conn.execute(
        "INSERT INTO deliveries"
        " (consumer_group, topic, queue_id, queue_offset, visible_at, attempts, handle_seq, acked)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (consumer_group, topic, queue_id, queue_offset) DO UPDATE SET"
        " visible_at = excluded.visible_at, attempts = excluded.attempts, handle_seq = excluded.handle_seq,"
        " acked = excluded.acked",
        (group, topic, queue_id, offset, visible_at, attempts, seq, acked),
    )


def _current(conn: sqlite3.Connection, group: str, topic: str, handle: str) -> tuple[int, int, int]:
    """(queue_id, offset, seq) of a handle that still names an unacknowledged delivery; else raise."""
    queue_id, offset, seq = parse_handle(handle)
    row = conn.execute(
        "SELECT handle_seq, acked FROM deliveries WHERE consumer_group = ? AND topic = ? AND queue_id = ?"
        " AND queue_offset = ?",
        (group, topic, queue_id, offset),
    ).fetchone()
    if row is None or row[1] or row[0] != seq:
        raise StaleReceiptHandle(f"receipt handle {handle} is stale: acknowledged or redelivered since")
    return queue_id, offset, seq


def ack(group: str, topic: str, handle: str) -> Callable[[sqlite3.Connection], None]:
    def work(conn: sqlite3.Connection) -> None:
        queue_id, offset, _ = _current(conn, group, topic, handle)
        _acknowledge(conn, group, topic, queue_id, offset)

    return work


def _acknowledge(conn: sqlite3.Connection, group: str, topic: str, queue_id: int, offset: int) -> None:
    """The delivery is done with: its handle goes stale, and the group's offset moves past it if it can."""
    conn.execute(
        "UPDATE deliveries SET acked = 1 WHERE consumer_group = ? AND topic = ? AND queue_id = ? AND queue_offset = ?",
        (group, topic, queue_id, offset),
    )
    _advance(conn, group, topic, queue_id)


def change_invisible(group: str, topic: str, handle: str, visible_at: int) -> Callable[[sqlite3.Connection], str]:
    def work(conn: sqlite3.Connection) -> str:
        queue_id, offset, seq = _current(conn, group, topic, handle)
        conn.execute(
            "UPDATE deliveries SET visible_at = ?, handle_seq = ? WHERE consumer_group = ? AND topic = ?"
            " AND queue_id = ? AND queue_offset = ?",
            (visible_at, seq + 1, group, topic, queue_id, offset),
        )
        return f"{queue_id}.{offset}.{seq + 1}"

    return work
