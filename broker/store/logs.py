"""Topics and their queue logs: create topics, append normal messages, read a queue by offset."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from broker.errors import MessageIdInUse, TopicExists, TopicNotFound
from broker.model import Message, StoredMessage, Topic, message_size
from broker.store.base import StoreBase
from broker.store.sql import MESSAGE_COLUMNS, append_message, find_message, row_to_message, translated


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
        """Append messages to the given queues, all or none; a message id already in its topic
        is not stored again and its original position is returned instead."""

        def work(conn: sqlite3.Connection) -> list[StoredMessage]:
            for message, _ in placed:
                if conn.execute("SELECT 1 FROM transactions WHERE message_id = ?", (message.message_id,)).fetchone():
                    raise MessageIdInUse(f"message id {message.message_id!r} belongs to a transaction")
            return [
                find_message(conn, message.topic, message.message_id)
                or append_message(conn, self._tails, message.topic, queue_id, message, now_ms)
                for message, queue_id in placed
            ]

        return await self._writer.run(work)

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
