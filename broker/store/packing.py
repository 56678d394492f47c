"""Packing the store's queues into segments (``broker.store.segments``): the broker's side; pull
processes only read them."""

from __future__ import annotations

from broker.model import MAX_PULL, PULL_BYTES, check_data_topic
from broker.store.base import StoreBase
from broker.store.reads import queue_range_of, read_columns_of
from broker.store.segments import LAST_ROW, PACKED_FROM, Encode
from broker.store.sql import translated

# The first segment of a queue whose last message is not the one it was packed from.
# (No row there leaves the test NULL, which ``IS NOT 1`` counts as stale too.)
_FIRST_STALE = (
    f"SELECT MIN(s.first) FROM segments.segments s LEFT JOIN messages m ON {LAST_ROW}"
    f" WHERE s.topic = ? AND s.queue_id = ? AND ({PACKED_FROM}) IS NOT 1"
)


class SegmentStore(StoreBase):
    """Packing of the store's queues into segments (the broker's side; pull processes only read)."""

    @translated
    def pack(self, topic: str, queue_id: int, encode: Encode, max_segments: int, *, verify: bool = False) -> int:
        """Pack up to ``max_segments`` more segments of a real topic's queue, after its last one
        (or from its low offset), each a whole MAX_PULL messages or cut by PULL_BYTES, never the
        tail short of that; delete those wholly below the low offset. With ``verify``, first
        delete the queue's segments from the first one that is not of this store's rows on (a
        file replaced or restored under them). Returns how many messages it packed. Runs on a
        reader thread (``query``): the writer never waits for it."""
        check_data_topic(topic)
        conn = self._reader()
        conn.execute("BEGIN")  # one snapshot of both files
        try:
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
            conn.execute("PRAGMA segments.incremental_vacuum")
            last = conn.execute(
                "SELECT first + count FROM segments.segments WHERE topic = ? AND queue_id = ?"
                " ORDER BY first DESC LIMIT 1",
                (topic, queue_id),
            ).fetchone()
            start, packed = low if last is None else last[0], 0
            for _ in range(max_segments):
                if high - start < MAX_PULL:  # the tail: a segment only once it cannot grow
                    break
                columns = read_columns_of(conn, topic, queue_id, start, MAX_PULL, PULL_BYTES)
                count = len(columns)
                conn.execute(
                    "INSERT INTO segments.segments VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (topic, queue_id, start, count, columns.message_ids[-1].decode(), columns.store_timestamps[-1],
                     encode(columns, start + count)),
                )  # fmt: skip
                start += count
                packed += count
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return packed

    @translated
    def drop_segments(self) -> None:
        """Delete every segment and hand the space back (packing turned off)."""
        conn = self._reader()
        conn.execute("DELETE FROM segments.segments")
        conn.execute("PRAGMA segments.incremental_vacuum")
