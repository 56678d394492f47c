"""Consumer progress: committed offsets, and receive / ack for RocketMQ 5 consumer groups."""

from __future__ import annotations

import json
import sqlite3
import uuid

from broker.model import DLQ_PREFIX, Admits, Delivery, Message, StoredMessage, Topic
from broker.retry import RetryPolicy, dead_letter_properties, dead_letter_topic
from broker.store import deliveries
from broker.store.logs import LogStore, message_rows
from broker.store.sql import MessagesInsert, set_consumer_offset, translated


class OffsetStore(LogStore):
    """Where each consumer group is in each queue, and its retry policy."""

    async def commit_consumer_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        def work(conn: sqlite3.Connection) -> None:
            set_consumer_offset(conn, group, topic, queue_id, offset)

        return await self._writer.run(work)

    async def reset_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """Set ``group``'s committed offsets in ``topic``'s queues, in one write, and forget its
        deliveries there (handed out from where it was; their receipt handles go stale)."""

        def work(conn: sqlite3.Connection) -> None:
            for queue_id, offset in offsets.items():
                set_consumer_offset(conn, group, topic, queue_id, offset)
            conn.execute("DELETE FROM deliveries WHERE consumer_group = ? AND topic = ?", (group, topic))

        await self._writer.run(work)

    async def delete_group(self, group: str) -> bool:
        """Forget ``group``: its committed offsets, those waiting in open Kafka transactions (the
        transactions' commits then write none), deliveries and retry policy (its retry and
        dead-letter topics stay, as topics). False if there was nothing of it."""

        def work(conn: sqlite3.Connection) -> bool:
            deleted = 0
            for table, column in (("consumer_offsets", "consumer_group"), ("txn_offsets", "consumer_group"),
                                  ("deliveries", "consumer_group"), ("consumer_groups", "name")):  # fmt: skip
                deleted += conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (group,)).rowcount
            return deleted > 0

        return await self._writer.run(work)

    async def delete_offsets(self, group: str, topic: str, queue_ids: list[int]) -> bool:
        """Forget ``group``'s committed offsets and deliveries in ``queue_ids`` of ``topic``, in
        one write. False, changing nothing, if nothing of the group is stored."""

        def work(conn: sqlite3.Connection) -> bool:
            known = conn.execute(
                "SELECT 1 FROM consumer_offsets WHERE consumer_group = ? UNION ALL SELECT 1 FROM deliveries"
                " WHERE consumer_group = ? UNION ALL SELECT 1 FROM consumer_groups WHERE name = ? LIMIT 1",
                (group, group, group),
            ).fetchone()
            if known is None:
                return False
            for table in ("consumer_offsets", "deliveries"):
                conn.executemany(
                    f"DELETE FROM {table} WHERE consumer_group = ? AND topic = ? AND queue_id = ?",
                    [(group, topic, queue_id) for queue_id in queue_ids],
                )
            return True

        return await self._writer.run(work)

    # --- receive / ack (RocketMQ 5 consumers) -----------------------------------------------

    async def receive(
        self,
        group: str,
        topic: str,
        queue_id: int,
        batch: int,
        invisible_ms: int,
        now_ms: int,
        admits: Admits | None,
        max_bytes: int,
        policy: RetryPolicy,
    ) -> list[Delivery]:
        """Hand out up to ``batch`` visible, unacknowledged messages of a queue to ``group``, within
        ``max_bytes`` (at least one); ``admits`` is the consumer's filter. One delivered the policy's
        maximum times already goes to the group's dead-letter topic instead; a FIFO group gets
        one message of a message group at a time."""
        dead_letter, moved = self._dead_letter(group, now_ms)
        received = await self._writer.run(
            deliveries.receive(
                group, topic, queue_id, batch, invisible_ms, now_ms, admits, max_bytes, policy, dead_letter
            )
        )
        self._known_dead_letters(moved)
        return received

    async def forward_to_dead_letters(self, group: str, topic: str, handle: str, now_ms: int) -> None:
        """Move the delivery ``handle`` names to the group's dead-letter topic now. Raises
        StaleReceiptHandle."""
        dead_letter, moved = self._dead_letter(group, now_ms)
        await self._writer.run(deliveries.forward(group, topic, handle, dead_letter))
        self._known_dead_letters(moved)

    def _dead_letter(self, group: str, now_ms: int) -> tuple[deliveries.DeadLetter, list[str]]:
        """What moves a message to ``group``'s dead-letter topic inside a write job (creating the
        topic, one queue, on first use), and the list it notes the topic in when it does."""
        topic, moved = dead_letter_topic(group), []

        def move(conn: sqlite3.Connection, message: StoredMessage, attempts: int) -> None:
            conn.execute("INSERT OR IGNORE INTO topics (name, queues) VALUES (?, 1)", (topic,))
            letter = Message(  # a new message, as in RocketMQ: its origin is in its properties
                topic,
                message.body,
                uuid.uuid4().hex,
                message.keys,
                message.tags,
                dead_letter_properties(message.properties, message.topic, message.message_id, attempts),
                message.born_timestamp,
            )
            for refusal in self._append_rows(
                conn, MessagesInsert(*message_rows([(letter, 0)])), now_ms
            ).refused.values():
                raise refusal
            moved.append(topic)

        return move, moved

    def _known_dead_letters(self, topics: list[str]) -> None:
        """Dead-letter topics a committed job created, now known to every reader of topics."""
        for topic in topics:
            self._topics.setdefault(topic, Topic(topic, 1))

    async def set_retry_policy(
        self, group: str, max_attempts: int | None, backoff: tuple[float, ...] | None, fifo: bool
    ) -> None:
        """Set ``group``'s retry policy; None follows the broker's."""

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO consumer_groups (name, max_attempts, backoff, fifo) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (name) DO UPDATE SET max_attempts = excluded.max_attempts,"
                " backoff = excluded.backoff, fifo = excluded.fifo",
                (group, max_attempts, None if backoff is None else json.dumps(list(backoff)), fifo),
            )

        await self._writer.run(work)

    @translated
    def retry_policy_of(self, group: str) -> tuple[int | None, tuple[float, ...] | None, bool]:
        """``group``'s own (max attempts, backoff), None where it follows the broker's, and
        whether it is a FIFO group."""
        row = (
            self._reader()
            .execute("SELECT max_attempts, backoff, fifo FROM consumer_groups WHERE name = ?", (group,))
            .fetchone()
        )
        if row is None:
            return None, None, False
        return row[0], None if row[1] is None else tuple(json.loads(row[1])), bool(row[2])

    @translated
    def retry_counts(self) -> dict[str, tuple[int, int]]:
        """Per consumer group: how many messages it is retrying, how many are in its dead-letter topic."""
        rows = self._reader().execute(
            "SELECT consumer_group, COUNT(*) FROM deliveries WHERE acked = 0 AND attempts > 1 GROUP BY consumer_group"
        )
        counts = {group: (int(n), 0) for group, n in rows}
        for topic in self.topics():
            if topic.name.startswith(DLQ_PREFIX):
                low, high = self.queue_range(topic.name, 0)
                group = topic.name.removeprefix(DLQ_PREFIX)
                counts[group] = (counts.get(group, (0, 0))[0], high - low)
        return counts

    async def ack(self, group: str, topic: str, handle: str) -> None:
        """Acknowledge a delivery; raise StaleReceiptHandle if the handle is no longer current."""
        await self._writer.run(deliveries.ack(group, topic, handle))

    async def change_invisible(self, group: str, topic: str, handle: str, visible_at: int) -> str:
        """Move a delivery's visibility; returns its new receipt handle. Raises StaleReceiptHandle."""
        return await self._writer.run(deliveries.change_invisible(group, topic, handle, visible_at))

    @translated
    def consumer_groups(self, group: str | None = None) -> list[tuple[str, str, int, int]]:
        """Every committed consumer offset (of ``group`` only, if given) as (group, topic, queue_id, offset)."""
        where, params = ("WHERE consumer_group = ?", (group,)) if group is not None else ("", ())
        query = f"SELECT * FROM consumer_offsets {where} ORDER BY consumer_group, topic, queue_id"
        return list(self._reader().execute(query, params))

    @translated
    def consumer_offsets(self, group: str, topic: str) -> dict[int, int]:
        rows = (
            self._reader()
            .execute(
                "SELECT queue_id, queue_offset FROM consumer_offsets WHERE consumer_group = ? AND topic = ?",
                (group, topic),
            )
            .fetchall()
        )
        return dict(rows)
