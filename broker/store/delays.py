"""Delayed (timed) messages: held in the ``delayed`` table, durable at once, and appended to their
queue when due, at a fresh offset, in the same write that drops them from the table: a message is
delivered once whatever crashes. Due ones are found through an index on the due time, so the
messages still waiting are never read, however many there are."""

from __future__ import annotations

import logging
import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from broker.errors import DelayedMessageNotFound
from broker.model import Message, MessageRows
from broker.store.logs import LogStore
from broker.store.sql import FROM_JSON, MessagesInsert, json_list, json_object, json_text, rows_in, translated

log = logging.getLogger(__name__)

_HOLD = (
    "INSERT INTO delayed (due_at, topic, queue_id, message_id, keys, tags, properties, body, born_timestamp,"
    " stored_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (topic, message_id) DO NOTHING"
)
_HELD = "SELECT queue_id, message_id, delay_id, due_at FROM delayed WHERE topic = ? AND message_id IN ({})"
_DUE = (
    "SELECT delay_id, topic, queue_id, message_id, keys, tags, properties, body, born_timestamp FROM delayed"
    " WHERE due_at <= ? ORDER BY due_at, delay_id LIMIT ?"
)


@dataclass(frozen=True)
class Held:
    """A delayed message as stored: its delay id (what a recall names) and when it is due."""

    topic: str
    queue_id: int
    message_id: str
    delay_id: int
    due_at: int


class DelayStore(LogStore):
    """Delayed messages, waiting for their time in the ``delayed`` table."""

    async def hold(self, placed: Sequence[tuple[Message, int]], now_ms: int) -> list[Held]:
        """Store delayed messages (each with ``deliver_at`` set) for their queue, all or none; a
        message id already held in its topic is not held again (a retried send): its first
        holding is returned."""
        rows = [
            (m.deliver_at, m.topic, queue_id, m.message_id, json_list(m.keys), m.tags, json_object(m.properties),
             m.body, m.born_timestamp, now_ms)
            for m, queue_id in placed
        ]  # fmt: skip
        by_topic: dict[str, list[tuple[Any, ...]]] = {}
        for row in rows:
            by_topic.setdefault(row[1], []).append(row)

        def work(conn: sqlite3.Connection) -> list[Held]:
            for topic, mine in by_topic.items():
                before = conn.total_changes
                conn.executemany(_HOLD, mine)
                _count(conn, topic, conn.total_changes - before)  # a retried one is not held twice
            held = {
                (topic, message_id): Held(topic, queue_id, message_id, delay_id, due_at)
                for topic, mine in by_topic.items()
                for queue_id, message_id, delay_id, due_at in rows_in(conn, _HELD, [row[3] for row in mine], topic)
            }
            return [held[(row[1], row[3])] for row in rows]

        return await self._writer.run(work)

    async def deliver_due(self, now_ms: int, limit: int) -> int:
        """Append up to ``limit`` delayed messages due by ``now_ms`` to their queues, oldest due
        first, and drop them from the held ones, in one write. A message id the topic already
        holds (a send retried after delivery) is not stored twice. Returns how many were due."""

        def work(conn: sqlite3.Connection) -> int:
            due = conn.execute(_DUE, (now_ms, limit)).fetchall()
            if not due:
                return 0
            rows = MessageRows(*(list(column) for column in zip(*(row[1:2] + row[3:] for row in due), strict=True)))
            appended = self._append_rows(conn, MessagesInsert(rows, [row[2] for row in due]), now_ms)
            for refused in appended.refused.values():  # its id went to a transaction meanwhile
                log.warning("a delayed message was dropped when due: %s", refused)
            conn.execute(f"DELETE FROM delayed WHERE delay_id IN ({FROM_JSON})", (json_text([r[0] for r in due]),))
            for topic, count in Counter(row[1] for row in due).items():
                _count(conn, topic, -count)
            return len(due)

        return await self._writer.run(work)

    async def recall(self, topic: str, delay_id: int) -> str:
        """Drop a delayed message before it is due; return its message id. Raises
        DelayedMessageNotFound if none of ``topic`` waits under ``delay_id``."""

        def work(conn: sqlite3.Connection) -> str:
            row = conn.execute(
                "DELETE FROM delayed WHERE delay_id = ? AND topic = ? RETURNING message_id", (delay_id, topic)
            ).fetchone()
            if row is None:
                raise DelayedMessageNotFound(
                    f"no delayed message of topic {topic!r} waits under this recall handle:"
                    " delivered or recalled already, or never sent"
                )
            _count(conn, topic, -1)
            return str(row[0])

        return await self._writer.run(work)

    @translated
    def next_due(self) -> int | None:
        """When the first waiting delayed message is due (broker ms), None if none waits."""
        (due,) = self._reader().execute("SELECT MIN(due_at) FROM delayed").fetchone()
        return None if due is None else int(due)

    @translated
    def delayed_by_topic(self) -> dict[str, tuple[int, int]]:
        """Per topic with delayed messages waiting: how many, and when the first is due."""
        rows = self._reader().execute(
            "SELECT topic, waiting, (SELECT MIN(due_at) FROM delayed d WHERE d.topic = c.topic)"
            " FROM delayed_counts c WHERE waiting > 0"
        )
        return {topic: (count, due) for topic, count, due in rows}


def _count(conn: sqlite3.Connection, topic: str, change: int) -> None:
    """Add ``change`` to the delayed messages waiting in ``topic``."""
    conn.execute(
        "INSERT INTO delayed_counts (topic, waiting) VALUES (?, ?)"
        " ON CONFLICT (topic) DO UPDATE SET waiting = waiting + excluded.waiting",
        (topic, change),
    )
