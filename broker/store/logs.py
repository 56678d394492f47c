"""Topics and their queue logs: create topics, append normal messages, read a queue by offset."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import cast

from broker.errors import HalfmqError, MessageIdInUse, TopicExists, TopicNotFound
from broker.model import Message, StoredMessage, Topic, message_size
from broker.store.base import StoreBase
from broker.store.sql import INSERT_MESSAGE, MESSAGE_COLUMNS, message_row, row_to_message, rows_in, translated


class LogStore(StoreBase):
    """Topics and the queue logs of their messages."""

    async def create_topic(self, name: str, queues: int) -> bool:
        """Create a topic; True if created, False if it already had ``queues``.

        Raises TopicExists if it exists with another queue count.
        """

        def work(conn: sqlite3.Connection) -> bool:
            row = conn.execute("SELECT queues FROM topics WHERE name = ?", (name,)).fetchone()
            if row is not None:
                if row[0] != queues:
                    raise TopicExists(f"topic {name!r} exists with {row[0]} queues, not {queues}")
                return False
            conn.execute("INSERT INTO topics (name, queues) VALUES (?, ?)", (name, queues))
            return True

        created = await self._writer.run(work)
        if created:  # only once committed
            self._topics[name] = Topic(name, queues)
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
        """Return up to ``limit`` messages of the queue from ``offset`` on, in offset order, stopping
        before the one that would take the total past ``max_bytes`` (the first is always returned).
        Rows are read one at a time, so what is not returned is never loaded."""
        cursor = self._reader().execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE topic = ? AND queue_id = ? AND queue_offset >= ?"
            " ORDER BY queue_offset LIMIT ?",
            (topic, queue_id, offset, limit),
        )
        messages: list[StoredMessage] = []
        total = 0
        for row in cursor:
            message = row_to_message(row)
            total += message_size(message) + len(message.message_id) + len(message.transaction_id)
            if messages and total > max_bytes:
                break
            messages.append(message)
        cursor.close()
        return messages

    @translated
    def queue_range(self, topic: str, queue_id: int) -> tuple[int, int]:
        """``(min_offset, max_offset)`` of a queue; max is one past the newest message, (0, 0) when empty."""
        # Two subqueries: SQLite answers a lone MIN or MAX from the index, but scans for both together.
        low, high = (
            self._reader()
            .execute(
                "SELECT (SELECT MIN(queue_offset) FROM messages WHERE topic = ?1 AND queue_id = ?2),"
                " (SELECT MAX(queue_offset) FROM messages WHERE topic = ?1 AND queue_id = ?2)",
                (topic, queue_id),
            )
            .fetchone()
        )
        return (0, 0) if high is None else (low, high + 1)
