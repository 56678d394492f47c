"""Reading the queue logs: a connection per reader thread, and the reads a pull makes.

``QueueReader`` is what the broker's store and a pull process (``broker.pull_process``) share:
either reads the same SQLite file beside its one writer (WAL lets readers in any process read
while it writes). ``ReadOnlyStore`` is the pull process's: read-only connections, and the
topics as their table holds them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from broker.errors import BrokerClosed, TopicNotFound
from broker.model import Packed, QueueColumns, StoredMessage, Topic
from broker.store.segments import attach, packed_at
from broker.store.sql import (
    CONTROL_END,
    MESSAGE_COLUMNS,
    STABLE_END,
    TOPIC_COLUMNS,
    queue_floor,
    row_to_message,
    topic_of,
    translated,
)

log = logging.getLogger(__name__)

READER_THREADS = 4
# How much lower than the rest of the broker the background thread's CPU priority is (Linux nice,
# which is per thread there): its work waits for the cores while writes and reads want them.
BACKGROUND_NICE = 10
# As much as SQLite allows (its build caps it: 2 GB in Python's); the rest is read as before.
READ_MMAP_BYTES = 1 << 40
P = ParamSpec("P")
T = TypeVar("T")

# A queue's committed messages from an offset on: up to its last stable offset (parameters: topic,
# queue id, offset, limit).
_FROM_QUEUE = (
    "FROM messages WHERE topic = ?1 AND queue_id = ?2 AND queue_offset >= ?3"
    f" AND queue_offset < COALESCE({STABLE_END}, 1 << 62) ORDER BY queue_offset LIMIT ?4"
)
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
    """Rows of ``columns`` (after the row's size, its first value) of the queue's committed
    messages from ``offset`` on: at most ``limit``, stopping before the one that would take the
    total past ``max_bytes``, but at least one if there is one. Rows are stepped one at a time,
    so no more than one row past the budget is ever loaded."""
    cursor = conn.execute(f"SELECT {_SIZE}, {columns} {_FROM_QUEUE}", (topic, queue_id, offset, limit))
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
    """``QueueReader.read_columns`` on any read connection to the store's file."""
    rows = _within_budget(conn, _BYTE_COLUMNS, topic, queue_id, offset, limit, max_bytes)
    return QueueColumns(*(list(zip(*rows, strict=True))[1:] if rows else ((),) * 9))


def queue_range_of(conn: sqlite3.Connection, topic: str, queue_id: int) -> tuple[int, int]:
    """``(min_offset, max_offset)`` of a queue's committed messages: min is where retention left
    the queue (0 if it never deleted from it; offsets rolled back after it are gaps that pulls
    step over), max one past the newest message or the last offset a transaction's end took,
    or the queue's last stable offset while a range is open there. An empty queue gives (n, n)."""
    high, stable, control = conn.execute(
        f"SELECT (SELECT MAX(queue_offset) FROM messages WHERE topic = ?1 AND queue_id = ?2), {STABLE_END},"
        f" ({CONTROL_END})",
        (topic, queue_id),
    ).fetchone()
    low = queue_floor(conn, topic, queue_id)
    end = max(low, -1 if high is None else high + 1, control or 0)
    return low, end if stable is None else max(low, min(end, stable))


def _lower_priority() -> None:
    """Lower the calling thread's CPU priority by BACKGROUND_NICE where the nice value is per
    thread (Linux); elsewhere it would lower the whole process's, so it is left as it is. Where
    the system refuses (a sandbox's rules), the thread keeps the broker's priority: a failure
    here would break the thread pool, and the work with it."""
    if sys.platform != "linux":
        return
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + BACKGROUND_NICE)
    except OSError as exc:
        log.warning("the background thread keeps the broker's CPU priority: %s", exc)


class QueueReader(ABC):
    """Reads of the queue logs in ``path``, each on its reader thread's own connection."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False
        self._read_pool = ThreadPoolExecutor(READER_THREADS, thread_name_prefix="halfmq-reader")
        self._background = ThreadPoolExecutor(1, thread_name_prefix="halfmq-background", initializer=_lower_priority)

    @abstractmethod
    def topic(self, name: str) -> Topic:
        """Return the topic; raise TopicNotFound if it does not exist."""

    @abstractmethod
    def _open_reader(self) -> sqlite3.Connection:
        """A new connection for the calling reader thread."""

    def close_readers(self) -> None:
        """Finish the reads under way, then close every reader's connection."""
        self._closed = True
        self._read_pool.shutdown(wait=True)
        self._background.shutdown(wait=True)
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()

    async def query(self, read: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run one of the store's reads on a reader thread, with its own connection (WAL lets
        readers run beside the writer), so the event loop only awaits it."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._read_pool, lambda: read(*args, **kwargs))

    async def in_background(self, read: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``query`` for work no request waits on (packing segments, checkpoints): one at a time,
        on a thread of its own at a lower CPU priority (BACKGROUND_NICE)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._background, lambda: read(*args, **kwargs))

    def _reader(self) -> sqlite3.Connection:
        if self._closed:
            raise BrokerClosed("the store is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open_reader()
            # Reads map the file instead of copying each page with a system call: a pull steps
            # through rows of one queue, which lie between other queues' rows.
            conn.execute(f"PRAGMA mmap_size={READ_MMAP_BYTES}")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """The reads of this thread inside the block see the store as of one moment."""
        conn = self._reader()
        conn.execute("BEGIN")
        try:
            yield
        finally:
            conn.execute("COMMIT")

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
    def read_packed(self, topic: str, queue_id: int, offset: int, limit: int, max_bytes: int) -> QueueColumns | Packed:
        """``read_columns``, or the packed segment that holds exactly those messages
        (``broker.store.segments``); inside a segment, the rows up to its end."""
        conn = self._reader()
        packed = packed_at(conn, topic, queue_id, offset, limit)
        if isinstance(packed, Packed):
            return packed
        return read_columns_of(conn, topic, queue_id, offset, limit if packed is None else min(limit, packed - offset),
                               max_bytes)  # fmt: skip

    @translated
    def queue_range(self, topic: str, queue_id: int) -> tuple[int, int]:
        """``queue_range_of`` on this thread's connection."""
        return queue_range_of(self._reader(), topic, queue_id)


class ReadOnlyStore(QueueReader):
    """The queue logs of the store file at ``path``, which another process writes."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._topics: dict[str, Topic] = {}

    @translated
    def topic(self, name: str) -> Topic:
        """Return the topic, read again from the file when it is not known yet (the broker may
        have created it since); raise TopicNotFound if it does not exist. A topic's queue count
        never changes once created."""
        if name not in self._topics:
            rows = self._reader().execute(f"SELECT {TOPIC_COLUMNS} FROM topics")
            self._topics = {row[0]: topic_of(*row) for row in rows}
        try:
            return self._topics[name]
        except KeyError:
            raise TopicNotFound(f"topic {name!r} does not exist") from None

    def _open_reader(self) -> sqlite3.Connection:
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=5000")
        attach(conn, self.path, read_only=True)
        return conn
