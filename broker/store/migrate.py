"""Bring a store's schema to the current version, in place, at open (sqlite-utils on the write
connection). ``PRAGMA user_version`` records the version; each migration runs once, in order.

- v1: the first release's tables.
- v2: ``auto_vacuum = INCREMENTAL``, so pages freed by deletions can be handed back to the file
  system a few at a time (``PRAGMA incremental_vacuum``) instead of by a full VACUUM. A v1 file
  is switched by one VACUUM, which rewrites it: a minute per few GB.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable

import sqlite_utils

from broker.errors import StorageFailure
from broker.store.schema import DDL, VERSION

log = logging.getLogger(__name__)


def _incremental_vacuum(db: sqlite_utils.Database) -> None:
    db.execute("PRAGMA auto_vacuum = INCREMENTAL")
    db.vacuum()


MIGRATIONS: dict[int, Callable[[sqlite_utils.Database], None]] = {2: _incremental_vacuum}


def bring_up_to_date(conn: sqlite3.Connection) -> None:
    """Create the schema in a new file, or migrate an older one to VERSION; raise StorageFailure
    for a file from a newer halfmq."""
    db = sqlite_utils.Database(conn)
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if not db.table_names():  # a new file: switching it is instant (WAL mode has already written its header)
        _incremental_vacuum(db)
        version = VERSION
    elif version > VERSION:
        raise StorageFailure(f"the store has schema v{version}, newer than this halfmq's v{VERSION}; upgrade halfmq")
    for target in range(max(version, 1) + 1, VERSION + 1):
        began = time.monotonic()
        MIGRATIONS[target](db)
        conn.execute(f"PRAGMA user_version = {target}")
        log.info("store migrated to schema v%d in %.1f s", target, time.monotonic() - began)
    conn.executescript(DDL)
    conn.execute(f"PRAGMA user_version = {VERSION}")
