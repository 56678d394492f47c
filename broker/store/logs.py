"""Topics and their queue logs: create topics, append normal messages, read a queue by offset."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, cast

from broker.errors import HalfmqError, MessageIdInUse, TopicExists, TopicNotFound
from broker.model import Message, QueueColumns, StoredMessage, Topic
from broker.store.base import StoreBase
from broker.store.sql import (
    INSERT_MESSAGE,
    MESSAGE_COLUMNS,
    message_row,
    queue_floor,
    row_to_message,
    rows_in,
    topic_of,
    translated,
)

_FROM_QUEUE = "FROM messages WHERE topic = ? AND queue_id = ? AND queue_offset >= ? ORDER BY queue_offset"
# The columns of QueueColumns: text as UTF-8 bytes.
_BYTE_COLUMNS = (
    "queue_offset, CAST(message_id AS BLOB), CAST(transaction_id AS BLOB), CAST(keys AS BLOB), CAST(tags AS BLOB),"
    " CAST(properties AS BLOB), body, born_timestamp, store_timestamp"
)
# What a message takes in a pull: its stored bytes (text counted as UTF-8).
_SIZE = (
    "length(body) + length(CAST(message_id AS BLOB)) + length(CAST(transaction_id AS BLOB))"
    " + length(CAST(keys AS BLOB)) + length(CAST(tags AS BLOB)) + length(CAST(properties AS BLOB))"
)


def _within_budget(
    conn: sqlite3.Connection, columns: str, topic: str, queue_id: int, offset: int, limit: int, max_bytes: int
) -> list[Any]:
    """Rows of ``columns`` (after the row's size, its first value) of the queue from ``offset`` on:
    at most ``limit``, stopping before the one that would take the total past ``max_bytes``, but
    at least one if there is one. Rows are stepped one at a time, so no more than one row past
    the budget is ever loaded."""
    cursor = conn.execute(f"SELECT {_SIZE}, {columns} {_FROM_QUEUE} LIMIT ?", (topic, queue_id, offset, limit))
    rows: list[Any] = []
    total = 0
    for row in cursor:
        total += row[0]
        if rows and total > max_bytes:
            break
        rows.append(row)
    cursor.close()
    return rows


def read_columns_of(
    conn: sqlite3.Connection, topic: str, queue_id: int, offset: int, limit: int, max_bytes: int
) -> QueueColumns:
    """``LogStore.read_columns`` on any read connection to the store's file (bench/pull_split.py
    reads it from a process of its own)."""
    rows = _within_budget(conn, _BYTE_COLUMNS, topic, queue_id, offset, limit, max_bytes)
    return QueueColumns(*(list(zip(*rows, strict=True))[1:] if rows else ((),) * 9))


class LogStore(StoreBase):
    """Topics and the queue logs of their messages."""

    async def create_topic(self, name: str, queues: int, retention: float | None = None) -> bool:
        """Create a topic; True if created, False if it already had ``queues``. A ``retention``
        (seconds; 0 keeps everything) is set on the new or existing topic; None leaves it as it is.

        Raises TopicExists if it exists with another queue count.
        """

        def work(conn: sqlite3.Connection) -> tuple[bool, int | None]:
            row = conn.execute("SELECT queues FROM topics WHERE name = ?", (name,)).fetchone()
            if row is not None and row[0] != queues:
                raise TopicExists(f"topic {name!r} exists with {row[0]} queues, not {queues}")
            if row is None:
                conn.execute("INSERT INTO topics (name, queues) VALUES (?, ?)", (name, queues))
            if retention is not None:
                conn.execute("UPDATE topics SET retention_ms = ? WHERE name = ?", (round(retention * 1000), name))
            (retention_ms,) = conn.execute("SELECT retention_ms FROM topics WHERE name = ?", (name,)).fetchone()
            return row is None, retention_ms

        created, retention_ms = await self._writer.run(work)
        self._topics[name] = topic_of(name, queues, retention_ms)  # only once committed
        return created

    def topic(self, name: str) -> Topic:
        """Return the topic; raise TopicNotFound if it does not exist."""
        try:
            return self._topics[name]
        except KeyError:
            raise TopicNotFound(f"topic {name!r} does not exist") from None

    def topics(self) -> list[Topic]:
        return sorted(self._topics.values(), key=lambda t: t.name)

    # --- normal messages ----------------------------------------------------------------

    async def append(self, placed: Sequence[tuple[Message, int]], now_ms: int) -> list[StoredMessage]:
        """Append messages to the given queues, all or none: the first refusal undoes them all.
        A message id already in its topic is not stored again and its original position is
        returned instead."""

        def work(conn: sqlite3.Connection) -> list[StoredMessage]:
            results = self._append_each(conn, placed, now_ms)
            for result in results:
                if isinstance(result, HalfmqError):
                    raise result
            return cast(list[StoredMessage], results)

        return await self._writer.run(work)

    async def append_each(
        self, placed: Sequence[tuple[Message, int]], now_ms: int
    ) -> list[StoredMessage | HalfmqError]:
        """``append``, each message on its own: its position or its refusal (MessageIdInUse);
        a storage failure fails them all."""
        return await self._writer.run(lambda conn: self._append_each(conn, placed, now_ms))

    def _append_each(
        self, conn: sqlite3.Connection, placed: Sequence[tuple[Message, int]], now_ms: int
    ) -> list[StoredMessage | HalfmqError]:
        ids = [message.message_id for message, _ in placed]
        in_transactions = {
            message_id
            for (message_id,) in rows_in(conn, "SELECT message_id FROM transactions WHERE message_id IN ({})", ids)
        }
        stored = {
            (message.topic, message.message_id): message
            for topic in {message.topic for message, _ in placed}
            for message in map(
                row_to_message,
                rows_in(
                    conn, f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE topic = ? AND message_id IN ({{}})", ids, topic
                ),
            )
        }
        results: list[StoredMessage | HalfmqError] = []
        rows: list[tuple[object, ...]] = []
        for message, queue_id in placed:
            if message.message_id in in_transactions:
                results.append(MessageIdInUse(f"message id {message.message_id!r} belongs to a transaction"))
                continue
            known = stored.get((message.topic, message.message_id))
            if known is None:
                offset = self._tails.take(message.topic, queue_id)
                rows.append(message_row(message.topic, queue_id, offset, message, "", message.properties, now_ms))
                known = StoredMessage(message.topic, queue_id, offset, message.message_id, "", message.keys,
                                      message.tags, message.properties, message.body, message.born_timestamp,
                                      now_ms)  # fmt: skip
                stored[(message.topic, message.message_id)] = known
            results.append(known)
        conn.executemany(INSERT_MESSAGE, rows)
        return results

    @translated
    def read(self, topic: str, queue_id: int, offset: int, limit: int, max_bytes: int) -> list[StoredMessage]:
        """Messages of the queue from ``offset`` on, in offset order, as many as ``_within_budget`` allows."""
        rows = _within_budget(self._reader(), MESSAGE_COLUMNS, topic, queue_id, offset, limit, max_bytes)
        return [row_to_message(row[1:]) for row in rows]

    @translated
    def read_columns(self, topic: str, queue_id: int, offset: int, limit: int, max_bytes: int) -> QueueColumns:
        """``read`` as columns: the same messages, with no object per message."""
        return read_columns_of(self._reader(), topic, queue_id, offset, limit, max_bytes)

    @translated
    def queue_range(self, topic: str, queue_id: int) -> tuple[int, int]:
        """``(min_offset, max_offset)`` of a queue; max is one past the newest message. An empty
        queue gives (n, n): n is 0, or where retention left it."""
        # Two subqueries: SQLite answers a lone MIN or MAX from the index, but scans for both together.
        conn = self._reader()
        low, high = conn.execute(
            "SELECT (SELECT MIN(queue_offset) FROM messages WHERE topic = ?1 AND queue_id = ?2),"
            " (SELECT MAX(queue_offset) FROM messages WHERE topic = ?1 AND queue_id = ?2)",
            (topic, queue_id),
        ).fetchone()
        if high is None:
            empty = queue_floor(conn, topic, queue_id)
            return empty, empty
        return low, high + 1

    def low_offsets(self) -> dict[tuple[str, int], int]:
        """The low offset of every queue of every topic, system topics included."""
        return {(t.name, q): self.queue_range(t.name, q)[0] for t in self.topics() for q in range(t.queues)}
