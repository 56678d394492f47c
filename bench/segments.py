"""What a pull would cost if a queue's messages were also stored as packed column segments
(issue 10's next lever, not built): the read of a pull of 1,024 messages, per message.

    .venv/bin/python -m bench.segments --messages 200000 --segment 256 --rounds 3

A store of committed 1 KB messages in 4 queues is built through the store's API. Each queue is
then packed, offline, into segments of ``--segment`` messages: each segment is the ``PullColumns``
reply for its messages, serialised, in a table of its own (a separate SQLite file). Then, on one
thread with no gRPC, pulls of 1,024 messages from offsets that do not fall on a segment's
boundary, over every queue, are timed two ways, alternating:
- today's: ``read_columns_of`` and ``columns_to_pb``, then serialising the reply;
- from segments: the segments that cover the range (one indexed read), parsed, cut to the range
  and joined into one reply (the column offsets re-based), then serialising the reply;
and, as the floor, the covering segments shipped whole in one framed message, for the client to
cut (as Kafka ships record batches). The first two replies are checked equal before timing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import tempfile
import time
from array import array
from pathlib import Path

from bench.spark_ingest import fill
from broker.grpc_api.convert import columns_to_pb
from broker.model import PullBatch
from broker.store.base import DB_FILE
from broker.store.reads import READ_MMAP_BYTES, read_columns_of
from halfmq_proto.v1 import halfmq_pb2 as pb

FETCH = 1024
BUDGET = 16 * 1024 * 1024
# The packed columns, with the value each message has when a reply leaves the column empty.
PACKED = {"message_ids": b"", "transaction_ids": b"", "keys": b"[]", "tags": b"", "properties": b"{}", "bodies": b""}
FIXED = ("queue_offsets", "born_timestamps", "store_timestamps")


def reply_of(conn: sqlite3.Connection, queue_id: int, offset: int, limit: int) -> pb.PullColumnsResponse:
    columns = read_columns_of(conn, "bench", queue_id, offset, limit, BUDGET)
    return columns_to_pb(PullBatch(columns, offset + len(columns), 0, 0))


def pack(conn: sqlite3.Connection, segments: sqlite3.Connection, queues: int, size: int) -> None:
    segments.execute(
        "CREATE TABLE segments (queue_id INTEGER, first INTEGER, reply BLOB, PRIMARY KEY (queue_id, first))"
    )
    for queue_id in range(queues):
        offset = 0
        while (reply := reply_of(conn, queue_id, offset, size)).count:
            segments.execute("INSERT INTO segments VALUES (?, ?, ?)", (queue_id, offset, reply.SerializeToString()))
            offset += reply.count
    segments.commit()


def joined(segments: sqlite3.Connection, queue_id: int, offset: int, limit: int, size: int) -> pb.PullColumnsResponse:
    """The reply for ``[offset, offset + limit)`` of the queue, cut from its segments."""
    out = pb.PullColumnsResponse()
    rows = segments.execute(
        "SELECT first, reply FROM segments WHERE queue_id = ? AND first > ? AND first < ? ORDER BY first",
        (queue_id, offset - size, offset + limit),
    )
    fixed: dict[str, list[bytes]] = {name: [] for name in FIXED}
    data: dict[str, list[bytes]] = {name: [] for name in PACKED}
    ends: dict[str, array[int]] = {name: array("i", [0]) for name in PACKED}
    filled: set[str] = set()
    for first, blob in rows:
        segment = pb.PullColumnsResponse.FromString(blob)
        begin, end = max(offset - first, 0), min(offset + limit - first, segment.count)
        out.count += end - begin
        for name in FIXED:
            fixed[name].append(getattr(segment, name)[8 * begin : 8 * end])
        for name, default in PACKED.items():
            column = getattr(segment, name)
            if column.offsets:
                filled.add(name)
                bounds = array("i", column.offsets)
            else:  # every value is the default: spell it out, another segment may have values
                bounds = array("i", (len(default) * i for i in range(segment.count + 1)))
                column.data = default * segment.count
            base, shift = bounds[begin], ends[name][-1]
            ends[name].extend(bound - base + shift for bound in bounds[begin + 1 : end + 1])
            data[name].append(column.data[base : bounds[end]])
    for name in FIXED:
        setattr(out, name, b"".join(fixed[name]))
    for name in filled:
        getattr(out, name).offsets = ends[name].tobytes()
        getattr(out, name).data = b"".join(data[name])
    out.next_offset = offset + out.count
    return out


def shipped(segments: sqlite3.Connection, queue_id: int, offset: int, limit: int, size: int) -> bytes:
    """The segments that cover ``[offset, offset + limit)``, whole, framed as one message with a
    repeated bytes field would frame them: the client would cut the first and the last."""
    rows = segments.execute(
        "SELECT reply FROM segments WHERE queue_id = ? AND first > ? AND first < ? ORDER BY first",
        (queue_id, offset - size, offset + limit),
    )
    return b"".join(len(blob).to_bytes(4, "little") + blob for (blob,) in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--segment", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="halfmq-bench-segments-"))
    asyncio.run(fill(data, args.messages, os.urandom(1024)))
    conn = sqlite3.connect(f"file:{data / DB_FILE}?mode=ro", uri=True)
    conn.execute(f"PRAGMA mmap_size={READ_MMAP_BYTES}")
    segments = sqlite3.connect(data / "bench-segments.db")  # not the broker's own segments.db, which fill() made
    began = time.perf_counter()
    pack(conn, segments, 4, args.segment)
    per_queue = args.messages // 4
    print(f"packed {args.messages:,} messages into segments of {args.segment} in {time.perf_counter() - began:.1f}s")
    starts = [(q, offset) for q in range(4) for offset in range(args.segment // 3, per_queue - FETCH, FETCH)]
    for queue_id, offset in starts[:: max(len(starts) // 20, 1)]:
        assert joined(segments, queue_id, offset, FETCH, args.segment) == reply_of(conn, queue_id, offset, FETCH)
    ways = {
        "today (rows)": lambda q, o: reply_of(conn, q, o, FETCH),
        "from segments": lambda q, o: joined(segments, q, o, FETCH, args.segment),
    }
    for _ in range(args.rounds):
        for name, pull in ways.items():
            began, count = time.perf_counter(), 0
            for queue_id, offset in starts:
                reply = pull(queue_id, offset)
                reply.SerializeToString()
                count += reply.count
            elapsed = time.perf_counter() - began
            print(f"{name:>24}: {elapsed / count * 1e6:5.2f} µs per message, {count / elapsed:>10,.0f} messages/s")
        began = time.perf_counter()
        for queue_id, offset in starts:
            shipped(segments, queue_id, offset, FETCH, args.segment)
        elapsed = time.perf_counter() - began
        count = len(starts) * FETCH
        print(f"{'segments shipped whole':>24}: {elapsed / count * 1e6:5.2f} µs per message, {count / elapsed:>10,.0f}"
              " messages/s")  # fmt: skip
    shutil.rmtree(data)


if __name__ == "__main__":
    main()
