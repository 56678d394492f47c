"""Finding messages, and what became of one, for operators: reads only.

A message is found where it is: stored in its topic (``messages``), held as a half message not
committed (``transactions``) or held until due (``delayed``). Its trace adds its transaction and,
for each consumer group that reads its topic or holds a copy of it, the group's part: the copies
sent back to the group's retry topic and its dead letter name the message in their properties,
deliveries in flight are in ``deliveries``, and a committed offset past the message says the
group is done with it. Nothing is indexed for operators: a search by key reads every row's keys,
which costs the hot write path nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from broker.model import (
    ACKNOWLEDGED,
    DEAD_LETTERED,
    DELAYED,
    DELIVERED,
    DLQ_PREFIX,
    RETRYING,
    STORED,
    WAITING,
    Found,
    GroupTrace,
    StoredMessage,
    Trace,
    TransactionState,
)
from broker.retry import DELIVERY_ATTEMPTS, ORIGIN_MESSAGE_ID, RETRY_PREFIX
from broker.store.base import StoreBase
from broker.store.retention import first_at
from broker.store.sql import MESSAGE_COLUMNS, TRANSACTION_COLUMNS, row_to_message, row_to_transaction, translated

# Each source of found messages as message rows, the condition filled in by the search.
_STORED = f"SELECT {MESSAGE_COLUMNS}, NULL FROM messages WHERE {{}} ORDER BY store_offset DESC LIMIT ?"
_HALVES = (
    "SELECT topic, queue_id, -1, message_id, transaction_id, keys, tags, properties, body, born_timestamp,"
    f" half_stored_at, state FROM transactions WHERE state != '{TransactionState.COMMITTED.value}' AND {{}}"
    " ORDER BY half_offset DESC LIMIT ?"
)
_DELAYED = (
    "SELECT topic, queue_id, -1, message_id, '', keys, tags, properties, body, born_timestamp, stored_at, due_at"
    " FROM delayed WHERE {} ORDER BY delay_id DESC LIMIT ?"
)
_HAS_KEY = "keys != '[]' AND EXISTS (SELECT 1 FROM json_each(keys) WHERE value = ?)"
_ANY_TOPIC = "topic IN (SELECT name FROM topics) AND message_id = ?"  # the (topic, message_id) indexes
# Copies of a message in retry and dead-letter topics, which name it in their properties.
_COPIES = (
    f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE ((topic >= ? AND topic < ?) OR (topic >= ? AND topic < ?))"
    f" AND json_extract(properties, '$.{ORIGIN_MESSAGE_ID}') = ? ORDER BY store_offset"
)


def _prefix_range(prefix: str) -> tuple[str, str]:
    """The bounds of the names that start with ``prefix``, for an index range."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


class BrowseStore(StoreBase):
    """Messages found by id, key or time, and their traces."""

    @translated
    def find_by_id(self, message_id: str, limit: int) -> list[Found]:
        """The messages with ``message_id``, in any topic, held or stored."""
        conn = self._reader()
        return self._found(conn, _ANY_TOPIC, "message_id = ?", _ANY_TOPIC, (message_id,), limit)

    @translated
    def find_by_key(self, key: str, topic: str | None, limit: int) -> list[Found]:
        """The messages one of whose keys is ``key`` (of ``topic`` only, if given), newest first."""
        where, params = (_HAS_KEY, (key,)) if topic is None else (f"topic = ? AND {_HAS_KEY}", (topic, key))
        return self._found(self._reader(), where, where, where, params, limit)

    @translated
    def find_in_time(self, topic: str, since_ms: int, until_ms: int, limit: int) -> list[Found]:
        """The messages of ``topic`` stored (or held) from ``since_ms`` until before ``until_ms``,
        newest first."""
        conn = self._reader()
        first, last = (first_at(conn, "messages", "store_offset", "store_timestamp", t) for t in (since_ms, until_ms))
        stored = "topic = ? AND store_offset >= ? AND store_offset < ?"
        return self._found(
            conn, stored, "topic = ? AND half_stored_at >= ? AND half_stored_at < ?",
            "topic = ? AND stored_at >= ? AND stored_at < ?", (topic, since_ms, until_ms), limit,
            stored_params=(topic, first, last),
        )  # fmt: skip

    def _found(
        self,
        conn: sqlite3.Connection,
        stored: str,
        halves: str,
        delayed: str,
        params: tuple[object, ...],
        limit: int,
        stored_params: tuple[object, ...] | None = None,
    ) -> list[Found]:
        """Up to ``limit`` of the stored, half and delayed messages each condition selects, newest first."""
        found = [
            Found(row_to_message(row[:-1]), STORED)
            for row in conn.execute(_STORED.format(stored), (*(stored_params or params), limit))
        ]
        found += [
            Found(row_to_message(row[:-1]), row[-1]) for row in conn.execute(_HALVES.format(halves), (*params, limit))
        ]
        found += [
            Found(row_to_message(row[:-1]), DELAYED, due_at=row[-1])
            for row in conn.execute(_DELAYED.format(delayed), (*params, limit))
        ]
        found.sort(key=lambda f: f.message.store_timestamp, reverse=True)
        return found[:limit]

    @translated
    def trace(self, message_id: str) -> Trace:
        """Where the message with ``message_id`` went, and each consumer group's part in it."""
        conn = self._reader()
        found = self._found(conn, _ANY_TOPIC, "message_id = ?", _ANY_TOPIC, (message_id,), 100)
        row = conn.execute(f"SELECT {TRANSACTION_COLUMNS} FROM transactions WHERE message_id = ?", (message_id,))
        transaction = next((row_to_transaction(r) for r in row), None)
        copies: dict[str, list[StoredMessage]] = {}
        for copy in map(row_to_message, conn.execute(_COPIES, (*_prefix_range(RETRY_PREFIX),
                                                                *_prefix_range(DLQ_PREFIX), message_id))):  # fmt: skip
            group = copy.topic.removeprefix(RETRY_PREFIX).removeprefix(DLQ_PREFIX)
            copies.setdefault(group, []).append(copy)
        stored = [f.message for f in found if f.state == STORED]
        groups = {group: _group_trace(conn, group, stored, copies.get(group, [])) for group in copies}
        for message in stored:
            for group in _readers(conn, message):
                groups.setdefault(group, _group_trace(conn, group, stored, []))
        return Trace(message_id, tuple(found), transaction, tuple(groups[g] for g in sorted(groups)))


def _readers(conn: sqlite3.Connection, message: StoredMessage) -> Iterator[str]:
    """The consumer groups that read the message's queue: with a committed offset, or a delivery."""
    position = (message.topic, message.queue_id)
    for (group,) in conn.execute(
        "SELECT consumer_group FROM consumer_offsets WHERE topic = ? AND queue_id = ?"
        " UNION SELECT consumer_group FROM deliveries WHERE topic = ? AND queue_id = ?",
        (*position, *position),
    ):
        yield group


def _group_trace(
    conn: sqlite3.Connection, group: str, stored: list[StoredMessage], copies: list[StoredMessage]
) -> GroupTrace:
    """One group's part: its dead letter, else its retries, else its deliveries and offsets."""
    attempts = max((int(c.properties.get(DELIVERY_ATTEMPTS, "0")) for c in copies), default=0)
    if any(c.topic.startswith(DLQ_PREFIX) for c in copies):
        return GroupTrace(group, DEAD_LETTERED, attempts, tuple(copies))
    if copies:  # sent back: done once the group is past its last copy in the retry topic
        last = copies[-1]
        state = ACKNOWLEDGED if _past(conn, group, last) else RETRYING
        return GroupTrace(group, state, attempts + (state == ACKNOWLEDGED), tuple(copies))
    for message in stored:
        delivery = conn.execute(
            "SELECT attempts, acked FROM deliveries WHERE consumer_group = ? AND topic = ? AND queue_id = ?"
            " AND queue_offset = ?",
            (group, message.topic, message.queue_id, message.queue_offset),
        ).fetchone()
        if delivery is not None:
            return GroupTrace(group, ACKNOWLEDGED if delivery[1] else DELIVERED, int(delivery[0]))
        if _past(conn, group, message):
            return GroupTrace(group, ACKNOWLEDGED, 0)
    return GroupTrace(group, WAITING, 0)


def _past(conn: sqlite3.Connection, group: str, message: StoredMessage) -> bool:
    """Whether ``group``'s committed offset in the message's queue is past the message."""
    row = conn.execute(
        "SELECT queue_offset FROM consumer_offsets WHERE consumer_group = ? AND topic = ? AND queue_id = ?",
        (group, message.topic, message.queue_id),
    ).fetchone()
    return row is not None and row[0] > message.queue_offset
