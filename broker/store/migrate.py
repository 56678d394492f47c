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
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.errors import StorageFailure
from broker.store.schema import DDL, VERSION

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


MIGRATIONS: dict[int, Callable[[sqlite_utils.Database], None]] = {
    2: lambda db: _incremental_vacuum(db.conn),
    3: _topic_retention,
    4: _transaction_batch,
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
