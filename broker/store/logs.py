"""Topics and their queue logs: create topics, append normal messages (reading them is ``reads``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import cast

from broker.errors import HalfmqError, MessageIdInUse, TopicExists, TopicNotFound
from broker.model import Message, StoredMessage, Topic
from broker.store.base import StoreBase
from broker.store.sql import INSERT_MESSAGE, MESSAGE_COLUMNS, message_row, row_to_message, rows_in, topic_of


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

    def low_offsets(self) -> dict[tuple[str, int], int]:
        """The low offset of every queue of every topic, system topics included."""
        return {(t.name, q): self.queue_range(t.name, q)[0] for t in self.topics() for q in range(t.queues)}
