"""SQL building blocks of the store: connections, row mapping, appends to a queue log.

Used inside the writer's jobs and by the readers; nothing outside ``broker.store`` imports it.
The hot paths use the standard ``sqlite3`` module, not sqlite-utils, and hand SQLite a whole
batch in one statement where they can (``MessagesInsert``, ``rows_in``). sqlite-utils serves
the schema migrations (``migrate.py``) and the offline store tools.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from itertools import accumulate
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from broker.errors import StorageFailure, StorageFull
from broker.model import (
    HALF_TOPIC,
    OP_TOPIC,
    Message,
    MessageRows,
    MessageType,
    StoredMessage,
    Topic,
    Transaction,
    TransactionState,
)
from broker.store.schema import HALF_COLUMNS

P = ParamSpec("P")
T = TypeVar("T")


class Flush(Enum):
    """When a write is acknowledged. SYNC: after fsync. ASYNC: after the write reaches the OS."""

    SYNC = "sync"
    ASYNC = "async"


MESSAGE_COLUMNS = (
    "topic, queue_id, queue_offset, message_id, transaction_id, keys, tags, properties, body,"
    " born_timestamp, store_timestamp"
)
TRANSACTION_COLUMNS = (
    "transaction_id, producer_group, half_offset, topic, queue_id, message_id, state, check_times,"
    " half_stored_at, last_check_at, resolved_at, resolution_source, resumes"
)


def translate(exc: sqlite3.Error) -> StorageFull | StorageFailure:
    """The one mapping of SQLite's errors to the core's: a full disk (or size limit) is
    StorageFull, anything else StorageFailure; the caller raises it ``from exc``."""
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return StorageFull(f"the store is full: {exc}; nothing of this request was stored")
    return StorageFailure(f"the store failed: {exc}")


def translated(read: Callable[P, T]) -> Callable[P, T]:
    """Make a read raise the core's storage errors instead of SQLite's."""

    @functools.wraps(read)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return read(*args, **kwargs)
        except sqlite3.Error as exc:
            raise translate(exc) from exc

    return wrapper


# The most a write-ahead log keeps on disk once a checkpoint has copied it: the first commit after
# the log restarts cuts the file back to this. Above what a log reaches under the heaviest load
# measured (about 55 MiB: send_table at 60,000 1 KB messages a second), so that a log under a
# steady load is not cut and grown again, block by block; a log that outgrew it (a long read held
# it) is. The checkpointer empties the logs of a broker that stopped writing (``broker.checkpoints``).
LOG_LIMIT = 64 * 1024 * 1024
BUSY_TIMEOUT_MS = 5000  # how long a connection waits for another's lock before it gives up


def connect(path: Path, flush: Flush) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    # A new store's pages: 16 KiB pages take 1 KB messages at 150,000 rows/s where 4 KiB ones take
    # 110,000 (sync flush, executemany of 1024 rows per transaction, measured here). A store
    # created with other pages keeps them (WAL fixes the page size once the file exists).
    conn.execute("PRAGMA page_size=16384")
    conn.execute("PRAGMA journal_mode=WAL")
    # In WAL mode FULL syncs the WAL on every commit; NORMAL leaves it to the OS (a process
    # crash loses nothing, a power cut may lose the last commits).
    conn.execute(f"PRAGMA synchronous={'FULL' if flush is Flush.SYNC else 'NORMAL'}")
    conn.execute(f"PRAGMA journal_size_limit={LOG_LIMIT}")
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    # Debian's SQLite overwrites deleted content with zeros by default (SECURE_DELETE), freed pages
    # included: every page retention frees would be written and fsynced once more. FAST zeroes only
    # what is written anyway; freed pages keep their old bytes until reused or vacuumed.
    conn.execute("PRAGMA secure_delete=FAST")
    return conn


def hand_back(conn: sqlite3.Connection, schema: str, pages: int | None = None) -> None:
    """Hand ``pages`` free pages of the database ``schema`` back to the file system (every free
    page if None; the database is in incremental auto-vacuum). One execution of the pragma per
    page: each step of it frees one, and Python's sqlite3 steps a statement that returns no
    columns once, whatever the count the pragma is given."""
    if pages is None:
        (pages,) = conn.execute(f"PRAGMA {schema}.freelist_count").fetchone()
    for _ in range(pages):
        conn.execute(f"PRAGMA {schema}.incremental_vacuum")


def row_to_message(row: Sequence[Any]) -> StoredMessage:
    """A message row as stored (SQLite already gives the right types); empty JSON is not parsed,
    which matters on the pull path, where most messages carry no keys or properties."""
    (topic, queue_id, queue_offset, message_id, transaction_id, keys, tags, props, body, born, stored) = row
    return StoredMessage(
        topic,
        queue_id,
        queue_offset,
        message_id,
        transaction_id,
        () if keys == "[]" else tuple(json.loads(keys)),
        tags,
        {} if props == "{}" else json.loads(props),
        body,
        born,
        stored,
    )


def row_to_transaction(row: Sequence[Any]) -> Transaction:
    (txid, group, half_offset, topic, queue_id, message_id, state, checks, stored_at, last_check, *rest) = row
    resolved_at, resolution_source, resumes = rest
    return Transaction(
        transaction_id=txid,
        producer_group=group,
        half_offset=half_offset,
        topic=topic,
        queue_id=queue_id,
        message_id=message_id,
        state=TransactionState(state),
        check_times=checks,
        half_stored_at=stored_at,
        last_check_at=last_check,
        resolved_at=resolved_at,
        resolution_source=resolution_source,
        resumes=resumes,
    )


_QUEUE_NEXT = "SELECT MAX(queue_offset) + 1 FROM messages WHERE topic = :topic AND queue_id = :queue"
# The half and op logs are tables of their own, whose offsets are their keys.
_STORED_NEXT = {
    HALF_TOPIC: "SELECT MAX(half_offset) + 1 FROM transactions",
    OP_TOPIC: "SELECT MAX(op_offset) + 1 FROM op_log",
}


class QueueTails:
    """The next offset of every queue (offsets are taken in order from 0), kept in memory by the writer's
    thread instead of a MAX() per append. After anything is rolled back, ``reload`` reads them
    again from what the connection sees."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._next: dict[tuple[str, int], int] = {}
        self.reload(conn)

    def reload(self, conn: sqlite3.Connection) -> None:
        queues = conn.execute("SELECT name, queues FROM topics").fetchall()
        self._next = {
            (topic, queue_id): max(
                conn.execute(_STORED_NEXT.get(topic, _QUEUE_NEXT), {"topic": topic, "queue": queue_id}).fetchone()[0]
                or 0,
                queue_floor(conn, topic, queue_id),
                conn.execute(f"SELECT ({CONTROL_END})", (topic, queue_id)).fetchone()[0] or 0,
            )
            for topic, count in queues
            for queue_id in range(count)
        }

    def next(self, topic: str, queue_id: int) -> int:
        """The offset the queue's next message will get."""
        return self._next.get((topic, queue_id), 0)

    def take(self, topic: str, queue_id: int) -> int:
        """The offset for the next message of the queue (the caller appends it)."""
        offset = self._next.get((topic, queue_id), 0)
        self._next[(topic, queue_id)] = offset + 1
        return offset

    def next_each(self, topics: Sequence[str], queue_ids: Sequence[int]) -> list[int]:
        """The offsets the next messages, message i to ``topics[i]`` and ``queue_ids[i]``, will
        get (``taken`` once they are appended); a run in one queue at once."""
        if len(set(topics)) == 1 and len(set(queue_ids)) == 1:
            first = self.next(topics[0], queue_ids[0])
            return list(range(first, first + len(topics)))
        after: dict[tuple[str, int], int] = {}
        offsets = []
        for queue in zip(topics, queue_ids, strict=True):
            offsets.append(after.get(queue, self.next(*queue)))
            after[queue] = offsets[-1] + 1
        return offsets

    def taken(self, topics: Sequence[str], queue_ids: Sequence[int], offsets: Sequence[int]) -> None:
        """Messages were appended at ``offsets`` (from ``next_each``)."""
        for queue, offset in dict(zip(zip(topics, queue_ids, strict=True), offsets, strict=True)).items():
            self._next[queue] = offset + 1


TOPIC_COLUMNS = "name, queues, retention_ms, message_type"


def topic_of(name: str, queues: int, retention_ms: int | None, message_type: str | None) -> Topic:
    """A row of ``topics`` (its TOPIC_COLUMNS) as a Topic."""
    return Topic(
        name,
        queues,
        None if retention_ms is None else retention_ms / 1000,
        None if message_type is None else MessageType(message_type),
    )


def queue_floor(conn: sqlite3.Connection, topic: str, queue_id: int) -> int:
    """The offset below which retention deleted every message of the queue (0 if it never did)."""
    row = conn.execute(
        "SELECT next_offset FROM queue_floors WHERE topic = ? AND queue_id = ?", (topic, queue_id)
    ).fetchone()
    return 0 if row is None else int(row[0])


# Offsets below ``next_offset`` of the queue were used: none is handed out again.
RAISE_FLOOR = (
    "INSERT INTO queue_floors (topic, queue_id, next_offset) VALUES (?, ?, ?) ON CONFLICT (topic, queue_id)"
    " DO UPDATE SET next_offset = MAX(next_offset, excluded.next_offset)"
)
# A queue's last stable offset (parameters 1 and 2: topic and queue id): the first offset of its
# first open range, where readers stop; NULL when none is open.
STABLE_END = "(SELECT MIN(first_offset) FROM open_ranges WHERE topic = ?1 AND queue_id = ?2)"
# One past the last offset a Kafka-model transaction's end took in a queue; NULL if none did.
CONTROL_END = "SELECT next_offset FROM control_offsets WHERE topic = ?1 AND queue_id = ?2"

# The open ranges of a topic that hold one of the message ids of ``IN ({})`` (after the topic).
OPEN_HOLDING = (
    "SELECT m.message_id, r.range_id, r.producer_group, r.batch_id, r.transactional_id FROM messages m"
    " JOIN open_ranges r"
    " ON r.topic = m.topic AND r.queue_id = m.queue_id AND m.queue_offset >= r.first_offset"
    " AND m.queue_offset < r.end_offset WHERE m.topic = ? AND m.message_id IN ({})"
)


# A character JSON writes as it is: printable ASCII, double quotes and backslashes aside.
PLAIN_CHAR = r"[ !#-\[\]-~]"
_PLAIN = re.compile(f"{PLAIN_CHAR}*")


def json_list(values: Sequence[str]) -> str:
    """``values`` as ``json.dumps`` writes them; plain ones (most keys) without calling it, which
    costs four times as long."""
    if not values:
        return "[]"
    if all(map(_PLAIN.fullmatch, values)):
        return '["' + '", "'.join(values) + '"]'
    return json.dumps(list(values))


def json_object(values: Mapping[str, str]) -> str:
    return json.dumps(values, sort_keys=True) if values else "{}"


HALF_COLUMNS_LIST = ", ".join(column for column, _ in HALF_COLUMNS)


def half_values(message: Message) -> tuple[object, ...]:
    """The values of a transaction row's half message columns (``HALF_COLUMNS_LIST``)."""
    return (json_list(message.keys), message.tags, json_object(message.properties), message.body,
            message.born_timestamp)  # fmt: skip


# The values of a JSON array bound as one parameter (``json_text``), for ``IN (...)``.
FROM_JSON = "SELECT value FROM json_each(?)"


def rows_in(conn: sqlite3.Connection, query: str, values: Sequence[object], *params: object) -> list[Any]:
    """The rows of ``query``, whose ``IN ({})`` is filled with ``values`` (after ``params``): one
    statement however many values, which SQLite reads from one JSON array."""
    return conn.execute(query.format(FROM_JSON), (*params, json_text(values))).fetchall()


def json_text(values: Sequence[object]) -> str:
    """``values`` as a JSON array, its text as it is (SQLite reads UTF-8 JSON)."""
    return json.dumps(list(values), ensure_ascii=False)


class MessagesInsert:
    """The one statement that inserts ``rows``, row i to queue ``queue_ids[i]``, made ready
    before the writer runs it (``run``), so that the writer's thread, which every write waits
    for, only binds the offsets it hands out. SQLite steps through the rows on its own, with
    Python's GIL let go, where ``executemany`` takes the GIL back for every row to bind its
    values (1,024 rows of 1 KB: 2.8 against 4.2 us a row here, Python's part included). A column
    holding one value is bound once; any other is bound as its values end to end, beside where
    each one ends."""

    def __init__(self, rows: MessageRows, queue_ids: Sequence[int]) -> None:
        self.rows = rows
        self.queue_ids = queue_ids
        self.ids = json_text(rows.message_ids)  # also what a lookup of the rows' ids binds
        self._values: dict[str, object] = {"ids": self.ids}
        if not rows:
            return
        self._head = ", ".join(
            _column_sql(name, column, self._values)
            for name, column in (("topic", rows.topics), ("queue_id", queue_ids))
        )
        self._tail = ", ".join(
            _column_sql(name, column, self._values)
            for name, column in (("keys", rows.keys), ("tags", rows.tags), ("properties", rows.properties),
                                 ("body", rows.bodies), ("born", rows.born_timestamps))
        )  # fmt: skip

    def run(self, conn: sqlite3.Connection, offsets: Sequence[int], now_ms: int) -> None:
        """Insert the rows, row i at ``offsets[i]``."""
        if not self.rows:
            return
        values = {**self._values, "now": now_ms}
        offset = _column_sql("queue_offset", offsets, values)
        conn.execute(
            f"INSERT INTO messages ({MESSAGE_COLUMNS}) SELECT {self._head}, {offset}, j.value, '', {self._tail}, :now"
            " FROM json_each(:ids) j",
            values,
        )


# A number in a fixed-width list of them: 20 digits hold any int64 with its sign.
_WIDTH = 20
_FIXED = b"%020d"


def _column_sql(name: str, column: Sequence[Any], values: dict[str, object]) -> str:
    """The SQL of row ``j.key``'s value of ``column`` in ``MessagesInsert``, adding what it binds
    to ``values``."""
    first = column[0]
    if column.count(first) == len(column):
        values[name] = first
        return f":{name}"
    if isinstance(first, int) and list(column) == list(range(first, first + len(column))):
        values[name] = first
        return f"(:{name} + j.key)"
    if isinstance(first, int):
        values[name] = _fixed(column)
        return _nth(name, "j.key")
    encoded = [v.encode() for v in column] if isinstance(first, str) else column
    ends = list(accumulate(map(len, encoded), initial=0))
    values[name], values[f"{name}_ends"] = b"".join(encoded), _fixed(ends)
    start, end = _nth(f"{name}_ends", "j.key"), _nth(f"{name}_ends", "j.key + 1")
    part = f"substr(:{name}, {start} + 1, {end} - {start})"
    return f"CAST({part} AS TEXT)" if isinstance(first, str) else part


def _fixed(numbers: Sequence[object]) -> bytes:
    return (_FIXED * len(numbers)) % tuple(numbers)


def _nth(name: str, index: str) -> str:
    """The SQL of the number at ``index`` of the fixed-width list bound as ``name``: a blob, so
    that ``substr`` finds it by position (in text it would count characters from the start)."""
    return f"CAST(substr(:{name}, ({index}) * {_WIDTH} + 1, {_WIDTH}) AS INTEGER)"


# What a group of copies will be, gathered first so that one statement copies them all: each
# half message (``half_offset``) to its topic, queue and offset, with extra properties (JSON).
COPY_PLAN = (
    "CREATE TEMP TABLE IF NOT EXISTS copy_plan (seq INTEGER PRIMARY KEY, topic TEXT NOT NULL,"
    " queue_id INTEGER NOT NULL, queue_offset INTEGER NOT NULL, extra TEXT NOT NULL, half_offset INTEGER NOT NULL)"
)


def copy_halves(
    conn: sqlite3.Connection,
    tails: QueueTails,
    copies: Sequence[tuple[Transaction, str, int, Mapping[str, str]]],
    now_ms: int,
) -> None:
    """Append each producer's message, copied from the half message of its transaction, to the
    given topic and queue with the given extra properties (``copy_planned``)."""
    if not copies:  # an INSERT, even of no rows, would start the table's AUTOINCREMENT record
        return
    conn.execute(COPY_PLAN)
    conn.executemany(
        "INSERT INTO temp.copy_plan (topic, queue_id, queue_offset, extra, half_offset) VALUES (?, ?, ?, ?, ?)",
        [(topic, queue_id, tails.take(topic, queue_id), json_object(extra), txn.half_offset)
         for txn, topic, queue_id, extra in copies],
    )  # fmt: skip
    copy_planned(conn, len(copies), now_ms)


def copy_planned(conn: sqlite3.Connection, planned: int, now_ms: int) -> None:
    """Carry out the ``planned`` copies of ``temp.copy_plan``, in its order, and empty it.

    The copy happens inside SQLite, in one INSERT ... SELECT for them all: the bodies never pass
    through Python, and the writer's thread gives up and takes back the GIL once, not per row.
    """
    copied = conn.execute(
        f"INSERT INTO messages ({MESSAGE_COLUMNS})"
        " SELECT p.topic, p.queue_id, p.queue_offset, h.message_id, h.transaction_id, h.keys, h.tags,"
        " CASE p.extra WHEN '{}' THEN h.properties ELSE json_patch(h.properties, p.extra) END,"
        " h.body, h.born_timestamp, ?"
        " FROM temp.copy_plan p JOIN transactions h ON h.half_offset = p.half_offset ORDER BY p.seq",
        (now_ms,),
    )
    conn.execute("DELETE FROM temp.copy_plan")
    if copied.rowcount != planned:  # the job fails, and its offsets are given back with the rollback
        raise StorageFailure(f"{planned - copied.rowcount} of {planned} half messages to copy are missing")


def set_consumer_offset(conn: sqlite3.Connection, group: str, topic: str, queue_id: int, offset: int) -> None:
    conn.execute(
        "INSERT INTO consumer_offsets (consumer_group, topic, queue_id, queue_offset) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (consumer_group, topic, queue_id) DO UPDATE SET queue_offset = excluded.queue_offset",
        (group, topic, queue_id, offset),
    )
