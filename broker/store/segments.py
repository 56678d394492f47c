"""Packed segments: the committed messages of real topics kept a second time, in runs of up to a
pull's worth (MAX_PULL messages within PULL_BYTES), each already in the form a pull sends.

A pull that starts where a segment starts and asks for at least as many messages as it holds is
answered with the segment's bytes as they are stored, as Kafka ships record batches: no row is
stepped and no value is made per message. A pull that starts inside a segment reads rows up to
the segment's end, so the next pull starts on a boundary. The queue's tail, not yet a whole
segment, is read as rows.

Segments live in their own file beside the store (``SEGMENTS_FILE``), attached to every reader
connection as ``segments``. They are derived: the broker packs them after the rows are committed
(``broker.store.packing``, on the store's background thread, never on the writer), deletes them
once retention has passed them, and a deleted file is packed again. A segment is served only while the store's
row at its last offset is still the message it was packed from (message id and store time), so a
store file replaced, restored or compacted under it never has stale segments served. The store
knows nothing of what a segment's bytes are: ``Encode`` is the serving front end's.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

from broker.model import Packed, QueueColumns
from broker.store.sql import LOG_LIMIT

log = logging.getLogger(__name__)

SEGMENTS_FILE = "segments.db"
# A segment's messages and the offset after them → the bytes a pull starting at the first sends.
Encode = Callable[[QueueColumns, int], bytes]
# A segment's bytes → its messages.
Decode = Callable[[bytes], QueueColumns]

DDL = """
CREATE TABLE IF NOT EXISTS segments (
    topic TEXT NOT NULL,
    queue_id INTEGER NOT NULL,
    first INTEGER NOT NULL,
    -- Offsets it spans: its last message is at first + count - 1 (offsets rolled back are gaps).
    count INTEGER NOT NULL,
    -- The message at the segment's last offset when it was packed.
    last_id TEXT NOT NULL,
    last_stored INTEGER NOT NULL,
    -- Last, so that reading the columns before it never loads it.
    data BLOB NOT NULL,
    PRIMARY KEY (topic, queue_id, first)
)
"""


# A segment ``s`` and the store's row ``m`` at its last offset; the segment is valid while that row
# is the message it was packed from.
LAST_ROW = "m.topic = s.topic AND m.queue_id = s.queue_id AND m.queue_offset = s.first + s.count - 1"
PACKED_FROM = "m.message_id = s.last_id AND m.store_timestamp = s.last_stored"


def create(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the segments file; the connection keeps its WAL open for the
    read-only connections of pull processes. A file SQLite cannot read is derived data: it is
    replaced by an empty one, to be packed again."""
    try:
        return _open(path)
    except sqlite3.DatabaseError as exc:
        log.warning("%s is unreadable (%s): starting it afresh; the packer packs the queues again", path, exc)
        for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            stale.unlink(missing_ok=True)
        return _open(path)


def _open(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        # Both take effect on a new file only. 16 KiB pages: a 1 MB segment commits in 1.9 ms of
        # CPU where 4 KiB pages take 3.2 (measured here).
        conn.execute("PRAGMA page_size=16384")
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(DDL)
        conn.execute("SELECT topic, queue_id, first, count, last_id, last_stored, data FROM segments LIMIT 0")
    except sqlite3.DatabaseError:
        conn.close()
        raise
    return conn


def attach(conn: sqlite3.Connection, store_path: Path, *, read_only: bool) -> None:
    """Attach the segments file beside ``store_path`` to ``conn`` as ``segments``. Read-only needs
    ``conn`` opened with URI file names."""
    path = store_path.with_name(SEGMENTS_FILE)
    conn.execute("ATTACH DATABASE ? AS segments", (f"file:{path}?mode=ro" if read_only else str(path),))
    # Derived data: a power cut may lose the newest segments, which are packed again.
    conn.execute("PRAGMA segments.synchronous=NORMAL")
    conn.execute(f"PRAGMA segments.journal_size_limit={LOG_LIMIT}")


def packed_at(conn: sqlite3.Connection, topic: str, queue_id: int, offset: int, limit: int) -> Packed | int | None:
    """The segment a pull of at most ``limit`` messages from ``offset`` sends whole, if there is
    one and it is still valid; else the end of the segment ``offset`` lies inside (where the pull's
    rows should stop), else None."""
    found = conn.execute(
        "SELECT first, count FROM segments.segments WHERE topic = ? AND queue_id = ? AND first <= ?"
        " ORDER BY first DESC LIMIT 1",
        (topic, queue_id, offset),
    ).fetchone()
    if found is None or found[0] + found[1] <= offset:
        return None
    first: int = found[0]
    count: int = found[1]
    if first < offset or count > limit:
        return first + count
    valid = conn.execute(
        f"SELECT s.data FROM segments.segments s JOIN messages m ON {LAST_ROW} AND {PACKED_FROM}"
        " WHERE s.topic = ? AND s.queue_id = ? AND s.first = ?",
        (topic, queue_id, first),
    ).fetchone()
    if valid is None:
        return None
    data: bytes = valid[0]
    return Packed(data, first + count)
