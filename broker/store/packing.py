"""Packing the store's queues into segments (``broker.store.segments``): the broker's side; pull
processes only read them."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from itertools import accumulate

from broker.model import MAX_PULL, PULL_BYTES, QueueColumns, check_data_topic
from broker.store.base import StoreBase
from broker.store.reads import queue_range_of, read_columns_of
from broker.store.segments import LAST_ROW, PACKED_FROM, Encode
from broker.store.sql import hand_back, translated

# The first segment of a queue whose last message is not the one it was packed from.
# (No row there leaves the test NULL, which ``IS NOT 1`` counts as stale too.)
_FIRST_STALE = (
    f"SELECT MIN(s.first) FROM segments.segments s LEFT JOIN messages m ON {LAST_ROW}"
    f" WHERE s.topic = ? AND s.queue_id = ? AND ({PACKED_FROM}) IS NOT 1"
)

# Every segment wholly below its queue's low offset (where retention left it).
_PASSED = (
    "DELETE FROM segments.segments AS s WHERE s.first + s.count <="
    " (SELECT f.next_offset FROM queue_floors f WHERE f.topic = s.topic AND f.queue_id = s.queue_id)"
)


@contextlib.contextmanager
def _snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """One transaction over both files: committed when the block ends, undone if it raises."""
    conn.execute("BEGIN")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _segments_end(conn: sqlite3.Connection, topic: str, queue_id: int, low: int) -> int:
    """Where the queue's next segment starts: after its last one, else at its low offset."""
    last = conn.execute(
        "SELECT first + count FROM segments.segments WHERE topic = ? AND queue_id = ? ORDER BY first DESC LIMIT 1",
        (topic, queue_id),
    ).fetchone()
    return low if last is None else int(last[0])


def _insert_segment(
    conn: sqlite3.Connection, topic: str, queue_id: int, first: int, columns: QueueColumns, encode: Encode
) -> int:
    """Store ``columns``, the messages of a queue from offset ``first`` on, as one segment;
    return the offset after it."""
    end = columns.queue_offsets[-1] + 1
    conn.execute(
        "INSERT INTO segments.segments VALUES (?, ?, ?, ?, ?, ?, ?)",
        (topic, queue_id, first, end - first, columns.message_ids[-1].decode(), columns.store_timestamps[-1],
         encode(columns, end)),
    )  # fmt: skip
    return end


def _at_hand(conn: sqlite3.Connection, topic: str, queue_id: int, start: int, high: int) -> int:
    """How many messages of the queue lie in ``[start, high)``, counting up to MAX_PULL."""
    (count,) = conn.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM messages WHERE topic = ? AND queue_id = ? AND queue_offset >= ?"
        " AND queue_offset < ? LIMIT ?)",
        (topic, queue_id, start, high, MAX_PULL),
    ).fetchone()
    return int(count)


def _whole_segment(columns: QueueColumns) -> int:
    """How many of the first messages of ``columns`` make a segment, as ``pack`` cuts one from
    the rows: only with MAX_PULL messages at hand, all of them, or fewer when the next would take
    the segment past PULL_BYTES (at least one); 0 with fewer at hand."""
    if len(columns) < MAX_PULL:
        return 0
    first = [list(map(len, getattr(columns, name)[:MAX_PULL])) for name in _SIZED]
    if sum(map(sum, first)) <= PULL_BYTES:
        return MAX_PULL
    totals = accumulate(map(sum, zip(*first, strict=True)))
    return max(1, next(index for index, total in enumerate(totals) if total > PULL_BYTES))


def _rows_between(
    conn: sqlite3.Connection, topic: str, queue_id: int, start: int, columns: QueueColumns
) -> QueueColumns | None:
    """The queue's messages from ``start`` up to the first of ``columns``: None unless there are
    fewer than MAX_PULL, all committed and within PULL_BYTES (none past an open range)."""
    first = columns.queue_offsets[0]
    if start > first:
        return None
    count = _at_hand(conn, topic, queue_id, start, first)
    if count == MAX_PULL:
        return None
    rows = read_columns_of(conn, topic, queue_id, start, count, PULL_BYTES)
    return rows if len(rows) == count else None


# The columns a message's size in a pull counts (``reads._SIZE``).
_SIZED = ("bodies", "message_ids", "transaction_ids", "keys", "tags", "properties")


class SegmentStore(StoreBase):
    """Packing of the store's queues into segments (the broker's side; pull processes only read)."""

    @translated
    def pack(self, topic: str, queue_id: int, encode: Encode, max_segments: int, *, verify: bool = False) -> int:
        """Pack up to ``max_segments`` more segments of a real topic's queue, after its last one
        (or from its low offset), each a whole MAX_PULL messages or cut by PULL_BYTES, never the
        tail short of that; delete those wholly below the low offset. With ``verify``, first
        delete the queue's segments from the first one that is not of this store's rows on (a
        file replaced or restored under them). Returns how many messages it packed. Runs on a
        background thread (``in_background``): the writer never waits for it."""
        check_data_topic(topic)
        conn = self._reader()
        with _snapshot(conn):
            low, high = queue_range_of(conn, topic, queue_id)
            conn.execute(
                "DELETE FROM segments.segments WHERE topic = ? AND queue_id = ? AND first + count <= ?",
                (topic, queue_id, low),
            )
            if verify:
                (stale,) = conn.execute(_FIRST_STALE, (topic, queue_id)).fetchone()
                if stale is not None:
                    conn.execute(
                        "DELETE FROM segments.segments WHERE topic = ? AND queue_id = ? AND first >= ?",
                        (topic, queue_id, stale),
                    )
            hand_back(conn, "segments")
            start, packed = _segments_end(conn, topic, queue_id, low), 0
            for _ in range(max_segments):
                if _at_hand(conn, topic, queue_id, start, high) < MAX_PULL:  # the tail: packed once it cannot grow
                    break
                columns = read_columns_of(conn, topic, queue_id, start, MAX_PULL, PULL_BYTES)
                start = _insert_segment(conn, topic, queue_id, start, columns, encode)
                packed += len(columns)
        return packed

    @translated
    def pack_run(self, topic: str, queue_id: int, columns: QueueColumns, encode: Encode) -> int:
        """Pack messages just committed to a queue from memory, as ``pack`` would pack them from
        the store: their whole segments (MAX_PULL messages, or fewer when PULL_BYTES of them come
        first), never the rest. Messages between the queue's segments and them (fewer than
        MAX_PULL, a tail the rounds left) are read first and packed with them. Returns how many
        of ``columns`` it packed, or -1 if it cannot start them (the rounds will pack them)."""
        conn = self._reader()
        with _snapshot(conn):
            low, _ = queue_range_of(conn, topic, queue_id)
            before = _rows_between(conn, topic, queue_id, _segments_end(conn, topic, queue_id, low), columns)
            if before is None:
                return -1
            columns, packed = QueueColumns.joined([before, columns]), 0
            while (count := _whole_segment(columns.cut(packed))) > 0:
                run = columns.cut(packed, packed + count)
                _insert_segment(conn, topic, queue_id, run.queue_offsets[0], run, encode)
                packed += count
        return max(packed - len(before), 0)

    @translated
    def expire_segments(self) -> None:
        """Delete every segment retention has passed (wholly below its queue's low offset) and hand
        the space back, as ``pack`` does queue by queue."""
        conn = self._reader()
        with _snapshot(conn):
            conn.execute(_PASSED)
            hand_back(conn, "segments")

    @translated
    def drop_topic_segments(self, topic: str) -> None:
        """Delete a deleted topic's segments and hand the space back."""
        conn = self._reader()
        conn.execute("DELETE FROM segments.segments WHERE topic = ?", (topic,))
        hand_back(conn, "segments")

    @translated
    def drop_segments(self) -> None:
        """Delete every segment and hand the space back (packing turned off)."""
        conn = self._reader()
        conn.execute("DELETE FROM segments.segments")
        hand_back(conn, "segments")
