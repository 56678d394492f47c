"""Topics and their queue logs: create topics, append normal messages (reading them is ``reads``)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from typing import Any

from broker.errors import HalfmqError, MessageIdInUse, TopicExists, TopicInUse, TopicNotFound
from broker.model import HALF_TOPIC, Appended, Message, MessageRows, MessageType, Topic
from broker.store.base import StoreBase
from broker.store.sql import (
    FROM_JSON,
    OPEN_HOLDING,
    RAISE_FLOOR,
    TOPIC_COLUMNS,
    MessagesInsert,
    hand_back,
    json_list,
    json_object,
    rows_in,
    topic_of,
)

# What keeps a topic from being deleted: work not finished that would land in it.
_PENDING_OF_TOPIC = (
    ("pending transaction(s)", "SELECT COUNT(*) FROM transactions WHERE state = 'PENDING' AND topic = ?"),
    ("delayed message(s)", "SELECT COUNT(*) FROM delayed WHERE topic = ?"),
    ("open batch or Kafka transaction range(s)", "SELECT COUNT(*) FROM open_ranges WHERE topic = ?"),
    ("Kafka transaction offset(s) waiting", "SELECT COUNT(*) FROM txn_offsets WHERE topic = ?"),
)
# Everything of a topic, once nothing is pending in it.
_DELETE_TOPIC = (
    "DELETE FROM messages WHERE topic = ?1",
    "DELETE FROM consumer_offsets WHERE topic = ?1",
    "DELETE FROM deliveries WHERE topic = ?1",
    "DELETE FROM queue_floors WHERE topic = ?1",
    "DELETE FROM control_offsets WHERE topic = ?1",
    "DELETE FROM delayed_counts WHERE topic = ?1",
    "DELETE FROM checks WHERE transaction_id IN (SELECT transaction_id FROM transactions WHERE topic = ?1)",
    "DELETE FROM transactions WHERE topic = ?1",
    "DELETE FROM topics WHERE name = ?1",
)


class LogStore(StoreBase):
    """Topics and the queue logs of their messages."""

    async def create_topic(
        self, name: str, queues: int, retention: float | None = None, message_type: MessageType | None = None
    ) -> bool:
        """Create a topic; True if created, False if it already had ``queues`` and
        ``message_type`` (None: every type). A ``retention`` (seconds; 0 keeps everything) is set
        on the new or existing topic; None leaves it as it is.

        Raises TopicExists if it exists with another queue count or message type.
        """
        kind = None if message_type is None else message_type.value

        def work(conn: sqlite3.Connection) -> tuple[bool, tuple[Any, ...]]:
            row = conn.execute("SELECT queues, message_type FROM topics WHERE name = ?", (name,)).fetchone()
            if row is not None and row[0] != queues:
                raise TopicExists(f"topic {name!r} exists with {row[0]} queues, not {queues}")
            if row is not None and row[1] != kind:
                raise TopicExists(f"topic {name!r} exists for {row[1] or 'every'} message type, not {kind or 'every'}")
            if row is None:
                conn.execute("INSERT INTO topics (name, queues, message_type) VALUES (?, ?, ?)", (name, queues, kind))
            if retention is not None:
                conn.execute("UPDATE topics SET retention_ms = ? WHERE name = ?", (round(retention * 1000), name))
            return row is None, conn.execute(f"SELECT {TOPIC_COLUMNS} FROM topics WHERE name = ?", (name,)).fetchone()

        created, stored = await self._writer.run(work)
        self._topics[name] = topic_of(*stored)  # only once committed
        return created

    async def delete_topic(self, name: str) -> None:
        """Delete a topic with its messages, consumer offsets and deliveries, and its resolved
        transactions' half messages, in one write, and hand the freed pages back to the file
        system; its segments are ``drop_topic_segments``'. Raises TopicNotFound, or TopicInUse
        while a transaction or a delayed message of it is pending, or a batch or Kafka-model
        transaction holds a range of it open; nothing is deleted then."""

        def work(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM topics WHERE name = ?", (name,)).fetchone() is None:
                raise TopicNotFound(f"topic {name!r} does not exist")
            waiting = [
                f"{count} {what}"
                for what, query in _PENDING_OF_TOPIC
                if (count := conn.execute(query, (name,)).fetchone()[0])
            ]
            if waiting:
                raise TopicInUse(f"topic {name!r} has {', '.join(waiting)}: end or recall them first")
            # the half log's offsets are never handed out again, whichever topic its newest were of
            conn.execute(RAISE_FLOOR, (HALF_TOPIC, 0, self._tails.next(HALF_TOPIC, 0)))
            for statement in _DELETE_TOPIC:
                conn.execute(statement, (name,))
            self._tails.reload(conn)
            hand_back(conn, "main")

        # Unknown from now on, so that no send, prepare or hold checked after this is queued
        # behind the deletion (those checked before are queued ahead of it, and deleted with it).
        topic = self._topics.pop(name, None)
        try:
            await self._writer.run(work, alone=True)  # a savepoint's journal would copy the topic
        except BaseException:
            if topic is not None:
                self._topics[name] = topic
            raise

    def topic(self, name: str) -> Topic:
        """Return the topic; raise TopicNotFound if it does not exist."""
        try:
            return self._topics[name]
        except KeyError:
            raise TopicNotFound(f"topic {name!r} does not exist") from None

    def topics(self) -> list[Topic]:
        return sorted(self._topics.values(), key=lambda t: t.name)

    # --- normal messages ----------------------------------------------------------------

    async def append(self, placed: Sequence[tuple[Message, int]], now_ms: int) -> Appended:
        """Append messages to the given queues, all or none: the first refusal undoes them all.
        A message id already in its topic is not stored again and its original position is
        returned instead."""
        insert = MessagesInsert(*message_rows(placed))

        def work(conn: sqlite3.Connection) -> Appended:
            appended = self._append_rows(conn, insert, now_ms)
            for refusal in appended.refused.values():
                raise refusal
            return appended

        return await self._writer.run(work)

    async def append_each(self, placed: Sequence[tuple[Message, int]], now_ms: int) -> Appended:
        """``append``, each message on its own: its position or its refusal (MessageIdInUse);
        a storage failure fails them all."""
        insert = MessagesInsert(*message_rows(placed))
        return await self._writer.run(lambda conn: self._append_rows(conn, insert, now_ms))

    async def append_rows(self, rows: MessageRows, queue_ids: Sequence[int], now_ms: int) -> Appended:
        """``append_each`` of messages as columns, message i to queue ``queue_ids[i]``."""
        insert = MessagesInsert(rows, queue_ids)
        return await self._writer.run(lambda conn: self._append_rows(conn, insert, now_ms))

    def _append_rows(self, conn: sqlite3.Connection, insert: MessagesInsert, now_ms: int) -> Appended:
        rows, queue_ids, ids = insert.rows, insert.queue_ids, insert.rows.message_ids
        in_transactions = {
            message_id
            for (message_id,) in conn.execute(
                f"SELECT message_id FROM transactions WHERE message_id IN ({FROM_JSON})", (insert.ids,)
            )
        }
        if not in_transactions and len(set(zip(rows.topics, ids, strict=True))) == len(ids):
            # Ids are almost always new: the insert itself finds one already in its topic (its
            # unique index refuses the statement, which SQLite undoes alone), not a lookup first.
            offsets = self._tails.next_each(rows.topics, queue_ids)
            with contextlib.suppress(sqlite3.IntegrityError):
                insert.run(conn, offsets, now_ms)
                self._tails.taken(rows.topics, queue_ids, offsets)
                return Appended(queue_ids, offsets, {}, len(ids))
        stored = {
            (topic, message_id): (queue_id, queue_offset)
            for topic in set(rows.topics)
            for message_id, queue_id, queue_offset in rows_in(
                conn, "SELECT message_id, queue_id, queue_offset FROM messages WHERE topic = ? AND message_id IN ({})",
                ids, topic,
            )
        }  # fmt: skip
        held = {
            (topic, message_id)
            for topic in {topic for topic, _ in stored}
            for message_id, *_ in rows_in(conn, OPEN_HOLDING, [i for t, i in stored if t == topic], topic)
        }
        new: list[int] = []
        placed: list[tuple[int, int]] = []
        refused: dict[int, HalfmqError] = {}
        for index, (topic, message_id, queue_id) in enumerate(zip(rows.topics, ids, queue_ids, strict=True)):
            if message_id in in_transactions or (topic, message_id) in held:
                what = "a transaction" if message_id in in_transactions else "a batch or transaction not committed yet"
                refused[index] = MessageIdInUse(f"message id {message_id!r} belongs to {what}")
                placed.append((-1, -1))
                continue
            known = stored.get((topic, message_id))
            if known is None:
                known = stored[(topic, message_id)] = (queue_id, self._tails.take(topic, queue_id))
                new.append(index)
            placed.append(known)
        MessagesInsert(rows.take(new), [queue_ids[i] for i in new]).run(conn, [placed[i][1] for i in new], now_ms)
        return Appended([q for q, _ in placed], [o for _, o in placed], refused, len(new))

    def low_offsets(self) -> dict[tuple[str, int], int]:
        """The low offset of every queue of every topic, system topics included."""
        return {(t.name, q): self.queue_range(t.name, q)[0] for t in self.topics() for q in range(t.queues)}


def message_rows(placed: Sequence[tuple[Message, int]]) -> tuple[MessageRows, list[int]]:
    """Messages and their queues as the columns ``MessagesInsert`` takes."""
    return rows_of([message for message, _ in placed]), [queue_id for _, queue_id in placed]


def rows_of(messages: Sequence[Message]) -> MessageRows:
    """Messages as the columns the store appends: keys and properties as their stored JSON."""
    return MessageRows(
        topics=[m.topic for m in messages],
        message_ids=[m.message_id for m in messages],
        keys=[json_list(m.keys) for m in messages],
        tags=[m.tags for m in messages],
        properties=[json_object(m.properties) for m in messages],
        bodies=[m.body for m in messages],
        born_timestamps=[m.born_timestamp for m in messages],
    )
