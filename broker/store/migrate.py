"""Bring a store's schema to the current version, in place, at open (sqlite-utils on the write
connection). ``PRAGMA user_version`` records the version; each migration runs once, in order.

- v1: the first release's tables.
- v2: ``auto_vacuum = INCREMENTAL``, so pages freed by deletions can be handed back to the file
  system a few at a time (``PRAGMA incremental_vacuum``) instead of by a full VACUUM. A v1 file
  is switched by one VACUUM, which rewrites it: a minute per few GB.
- v3: a retention per topic (``topics.retention_ms``, NULL: the broker's); the ``queue_floors``
  table comes with the DDL.
- v4: two-phase batches (the Spark sink): ``transactions.batch_id``; the ``committed_batches``
  table comes with the DDL.
- v5: the half and op logs leave ``messages``: each half message moves into its transaction's
  row (its properties without the broker's), each op record into ``op_log``, and the next offset
  of both logs is kept in ``queue_floors``, so none is reused. One SQLite transaction.
- v6: exactly-once batches are stored as open ranges of their final messages (the table comes
  with the DDL): half messages of a batch still pending are rolled back (the query prepares the
  batch again when it restarts), ``transactions.batch_id`` goes, and ``committed_batches``
  counts messages.
- v7: Kafka-model transactions: ``open_ranges.transactional_id``; the ``transactional_ids`` and
  ``txn_offsets`` tables come with the DDL.
- v8: a message type per topic (``topics.message_type``, NULL: every type); the ``delayed`` and
  ``consumer_groups`` tables come with the DDL.
- v9: FIFO consumer groups (``consumer_groups.fifo``).
- v10: Kafka-model transactions' ends take an offset per queue, as Kafka's markers do; the
  ``control_offsets`` table comes with the DDL, and an older halfmq, which would hand those
  offsets out again, refuses the file.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.errors import StorageFailure
from broker.model import HALF_TOPIC, OP_TOPIC, SYSTEM_PROPERTIES, Source, TransactionState
from broker.store.schema import DDL, HALF_COLUMNS, VERSION

if TYPE_CHECKING:
    import sqlite_utils

log = logging.getLogger(__name__)


def _incremental_vacuum(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("VACUUM")


def _topic_retention(db: sqlite_utils.Database) -> None:
    db["topics"].add_column("retention_ms", int)  # type: ignore[union-attr]


def _transaction_batch(db: sqlite_utils.Database) -> None:
    db["transactions"].add_column("batch_id", int)  # type: ignore[union-attr]


def _half_and_op_logs(db: sqlite_utils.Database) -> None:
    conn = db.conn
    conn.executescript(DDL)  # the tables that come with it: op_log, and queue_floors for a file older than v3
    conn.execute("BEGIN IMMEDIATE")
    for column, declared in HALF_COLUMNS:
        conn.execute(f"ALTER TABLE transactions ADD COLUMN {column} {declared}")
    removed = ", ".join(f"'$.{name}'" for name in SYSTEM_PROPERTIES)
    conn.execute(
        "UPDATE transactions SET keys = h.keys, tags = h.tags, properties = json_remove(h.properties, "
        f"{removed}), body = h.body, born_timestamp = h.born_timestamp FROM messages h"
        " WHERE h.topic = ? AND h.queue_id = 0 AND h.queue_offset = transactions.half_offset",
        (HALF_TOPIC,),
    )
    conn.execute(
        "INSERT INTO op_log (op_offset, half_offset, stored_at)"
        " SELECT queue_offset, CAST(CAST(body AS TEXT) AS INTEGER), store_timestamp FROM messages WHERE topic = ?",
        (OP_TOPIC,),
    )
    conn.execute(
        "INSERT INTO queue_floors (topic, queue_id, next_offset) SELECT topic, 0, MAX(queue_offset) + 1 FROM messages"
        " WHERE topic IN (?1, ?2) GROUP BY topic ON CONFLICT (topic, queue_id)"
        " DO UPDATE SET next_offset = MAX(next_offset, excluded.next_offset)",
        (HALF_TOPIC, OP_TOPIC),
    )
    conn.execute("DELETE FROM messages WHERE topic IN (?, ?)", (HALF_TOPIC, OP_TOPIC))
    conn.execute("PRAGMA user_version = 5")
    conn.execute("COMMIT")


def _open_ranges(db: sqlite_utils.Database) -> None:
    conn = db.conn
    conn.execute("BEGIN IMMEDIATE")
    now_ms = int(time.time() * 1000)
    pending = [h for (h,) in conn.execute(
        "SELECT half_offset FROM transactions WHERE batch_id IS NOT NULL AND state = 'PENDING' ORDER BY half_offset"
    )]  # fmt: skip
    (first_op,) = conn.execute(
        "SELECT MAX(COALESCE((SELECT MAX(op_offset) + 1 FROM op_log), 0),"
        " COALESCE((SELECT next_offset FROM queue_floors WHERE topic = ? AND queue_id = 0), 0))",
        (OP_TOPIC,),
    ).fetchone()
    conn.executemany(
        "INSERT INTO op_log (op_offset, half_offset, stored_at) VALUES (?, ?, ?)",
        ((first_op + i, half_offset, now_ms) for i, half_offset in enumerate(pending)),
    )
    conn.execute(
        "UPDATE transactions SET state = ?, resolved_at = ?, resolution_source = ?"
        " WHERE batch_id IS NOT NULL AND state = 'PENDING'",
        (TransactionState.ROLLED_BACK.value, now_ms, Source.OPERATOR.value),
    )
    conn.execute("ALTER TABLE transactions DROP COLUMN batch_id")
    if "transactions" in db["committed_batches"].columns_dict:  # v5's migration may have made it as v6 has it
        conn.execute("ALTER TABLE committed_batches RENAME COLUMN transactions TO messages")
    conn.execute("PRAGMA user_version = 6")
    conn.execute("COMMIT")


def _transactional_ids(db: sqlite_utils.Database) -> None:
    ranges = db["open_ranges"]  # an older migration may have made it as the DDL has it now
    if ranges.exists() and "transactional_id" not in ranges.columns_dict:
        db.conn.execute("ALTER TABLE open_ranges ADD COLUMN transactional_id TEXT")


def _message_types(db: sqlite_utils.Database) -> None:
    db["topics"].add_column("message_type", str)  # type: ignore[union-attr]


def _fifo_groups(db: sqlite_utils.Database) -> None:
    groups = db["consumer_groups"]
    if groups.exists() and "fifo" not in groups.columns_dict:
        db.conn.execute("ALTER TABLE consumer_groups ADD COLUMN fifo INTEGER NOT NULL DEFAULT 0")


MIGRATIONS: dict[int, Callable[[sqlite_utils.Database], None]] = {
    2: lambda db: _incremental_vacuum(db.conn),
    3: _topic_retention,
    4: _transaction_batch,
    5: _half_and_op_logs,
    6: _open_ranges,
    7: _transactional_ids,
    8: _message_types,
    9: _fifo_groups,
    10: lambda db: None,
}


def bring_up_to_date(conn: sqlite3.Connection) -> None:
    """Create the schema in a new file, or migrate an older one to VERSION; raise StorageFailure
    for a file from a newer halfmq."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0:
        _incremental_vacuum(conn)  # a new file: instant (WAL mode has already written its header)
        version = VERSION
    elif version > VERSION:
        raise StorageFailure(f"the store has schema v{version}, newer than this halfmq's v{VERSION}; upgrade halfmq")
    if version < VERSION:
        _migrate(conn, version)
    conn.executescript(DDL)
    conn.execute(f"PRAGMA user_version = {VERSION}")


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    # Imported here: it takes a third of a second, a third of the broker's start, and only an
    # older file needs it.
    import sqlite_utils

    db = sqlite_utils.Database(conn)
    for target in range(max(version, 1) + 1, VERSION + 1):
        began = time.monotonic()
        MIGRATIONS[target](db)
        conn.execute(f"PRAGMA user_version = {target}")
        log.info("store migrated to schema v%d in %.1f s", target, time.monotonic() - began)
