"""Packed segments (issue 10): committed messages are also packed a pull's worth at a time, and a
columnar pull from a segment's start is the segment as stored. Whatever a pull is answered from,
it is exactly what the row pull returns; stale segments are never served; retention and
``--segments off`` leave no segment behind."""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from hashlib import md5
from pathlib import Path

import grpc
import httpx
import pyarrow as pa
import pytest
from pyspark.sql import functions

from broker.columns import MessageColumns
from broker.delays import DelayService
from broker.errors import HiddenTopic
from broker.grpc_api.convert import columns_to_pb, segment_to_pb
from broker.messaging import MessagingService
from broker.metrics import Metrics
from broker.model import MAX_PULL, PULL_BYTES, SYSTEM_TOPICS, Message, Packed, PullBatch, QueueColumns, Topic
from broker.packer import INTERVAL, Packer
from broker.store import Store
from broker.store.reads import BACKGROUND_NICE
from broker.store.segments import SEGMENTS_FILE
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import Message as SdkMessage
from producer_sdk import Producer, PullConsumer
from producer_sdk.errors import OffsetOutOfRange
from tests.spark_support import batch_reader
from tests.support import BrokerThread, broker_settings, wait_until
from tests.test_columns import rows_of

NOW_MS = 1_800_000_000_000
WORDS = ["", "a", "żółw", "🐢", "k|ey", "ключ", "x" * 40]


def random_message(rng: random.Random, i: int, body_bytes: int) -> Message:
    return Message(
        topic="t",
        body=rng.randbytes(rng.randint(0, body_bytes)),
        message_id=f"m-{i}-{rng.getrandbits(32)}",
        keys=tuple(w for w in rng.sample(WORDS, rng.randint(0, 2)) if w),
        tags=rng.choice(WORDS).replace("|", ""),
        properties={w: rng.choice(WORDS) for w in rng.sample(WORDS[1:], rng.randint(0, 2))},
        born_timestamp=NOW_MS - rng.randint(0, 10_000),
    )


def fill(data_dir: Path, sizes: dict[int, int], *, seed: int = 1, body_bytes: int = 3000) -> None:
    """A store with ``sizes[queue]`` random messages in each queue of topic ``t``."""

    async def scenario() -> None:
        rng = random.Random(seed)
        store = Store(data_dir)
        await store.create_topic("t", len(sizes))
        placed = [(random_message(rng, i, body_bytes), q) for q, n in sizes.items() for i in range(n)]
        rng.shuffle(placed)
        for start in range(0, len(placed), 500):
            await store.append(placed[start : start + 500], NOW_MS)
        store.close()

    asyncio.run(scenario())


def segments(data_dir: Path) -> list[tuple[int, int, int]]:
    """(queue_id, first, count) of every segment, read from the file."""
    with sqlite3.connect(data_dir / SEGMENTS_FILE) as conn:
        return conn.execute("SELECT queue_id, first, count FROM segments ORDER BY queue_id, first").fetchall()


def wait_packed(data_dir: Path, expected: list[tuple[int, int, int]]) -> None:
    wait_until(lambda: segments(data_dir) == expected, timeout=30)


def whole_segments(sizes: dict[int, int], low: int = 0) -> list[tuple[int, int, int]]:
    """The segments of MAX_PULL messages the packer makes of queues that hold ``sizes`` from ``low``."""
    return [(q, first, MAX_PULL) for q, n in sizes.items() for first in range(low, n - MAX_PULL + 1, MAX_PULL)]


@pytest.fixture
def packed(tmp_path: Path) -> Iterator[tuple[BrokerThread, dict[int, int]]]:
    """A broker over a store of random messages, once every whole segment is packed."""
    sizes = {0: 2 * MAX_PULL + 300, 1: MAX_PULL, 2: MAX_PULL - 1}
    fill(tmp_path / "data", sizes)
    broker = BrokerThread(broker_settings(tmp_path / "data", topics=()))
    wait_packed(tmp_path / "data", whole_segments(sizes))
    yield broker, sizes
    broker.stop()


def raw_pull_columns(address: str, topic: str, queue_id: int, offset: int, max_messages: int) -> bytes:
    """PullColumns' reply as it came over the wire."""
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(
            "/halfmq.v1.Broker/PullColumns",
            request_serializer=pb.PullRequest.SerializeToString,
            response_deserializer=lambda data: data,
        )
        request = pb.PullRequest(topic=topic, queue_id=queue_id, offset=offset, max_messages=max_messages)
        reply: bytes = call(request, timeout=10)
        return reply


def assert_first_pulls_agree(address: str) -> None:
    """A columnar pull of queue 0 from offset 0 returns what the row pull returns."""
    with PullConsumer(group="g", broker=address) as consumer:
        table = consumer.pull_table("t", queue_id=0, offset=0, max_messages=MAX_PULL)
        assert rows_of(table.messages) == consumer.pull("t", queue_id=0, offset=0, max_messages=MAX_PULL).messages


def stored_segment(data_dir: Path, queue_id: int, first: int) -> bytes:
    with sqlite3.connect(data_dir / SEGMENTS_FILE) as conn:
        (data,) = conn.execute(
            "SELECT data FROM segments WHERE queue_id = ? AND first = ?", (queue_id, first)
        ).fetchone()
        return bytes(data)


def test_a_pull_from_a_segment_s_start_is_the_segment_as_stored_and_exactly_the_row_pull(packed, tmp_path):
    broker, _ = packed
    with PullConsumer(group="g", broker=broker.address) as consumer:
        for queue_id, first in [(0, 0), (0, MAX_PULL), (1, 0)]:
            table = consumer.pull_table("t", queue_id=queue_id, offset=first, max_messages=MAX_PULL)
            rows = consumer.pull("t", queue_id=queue_id, offset=first, max_messages=MAX_PULL)
            assert table.messages.num_rows == MAX_PULL
            assert rows_of(table.messages) == rows.messages
            assert (table.next_offset, table.min_offset, table.max_offset) == (
                rows.next_offset,
                rows.min_offset,
                rows.max_offset,
            )


def test_the_metrics_count_the_packed_messages(packed):
    """The counter moves at the end of the packer's round, a moment after the file shows the segments."""
    broker, sizes = packed
    counted = f"halfmq_packed_messages_total {float(len(whole_segments(sizes)) * MAX_PULL)}"
    wait_until(lambda: counted in httpx.get(f"{broker.http}/metrics").text, timeout=10)


def test_a_segment_goes_out_as_it_is_stored(packed, tmp_path):
    """Altered in the file (its last message untouched), a segment is sent altered: no row was read."""
    broker, _ = packed
    segment = pb.PullColumnsResponse.FromString(stored_segment(tmp_path / "data", 1, 0))
    segment.bodies.data = b"!" + segment.bodies.data[1:]
    with sqlite3.connect(tmp_path / "data" / SEGMENTS_FILE) as conn:
        conn.execute("UPDATE segments SET data = ? WHERE queue_id = 1 AND first = 0", (segment.SerializeToString(),))
    raw = raw_pull_columns(broker.address, "t", 1, 0, MAX_PULL)
    assert raw.startswith(segment.SerializeToString())
    reply = pb.PullColumnsResponse.FromString(raw)
    assert reply.bodies.data.startswith(b"!") and (reply.min_offset, reply.max_offset) == (0, MAX_PULL)


def test_every_pull_returns_what_the_row_pull_returns_and_one_from_inside_a_segment_stops_at_its_end(packed):
    broker, sizes = packed
    rng = random.Random(7)
    with PullConsumer(group="g", broker=broker.address) as consumer:
        for queue_id, size in sizes.items():
            starts = [0, 1, MAX_PULL - 1, MAX_PULL, MAX_PULL + 1, size - 1, size, size + 5]
            for offset in starts + [rng.randrange(size) for _ in range(6)]:
                for max_messages in (1, 7, MAX_PULL - 1, MAX_PULL):
                    table = consumer.pull_table("t", queue_id=queue_id, offset=offset, max_messages=max_messages)
                    count = table.messages.num_rows
                    rows = consumer.pull("t", queue_id=queue_id, offset=offset, max_messages=max(count, 1))
                    assert rows_of(table.messages) == rows.messages[:count]
                    assert table.next_offset == offset + count
                    assert (table.min_offset, table.max_offset) == (rows.min_offset, rows.max_offset)
                    whole = min(max_messages, size - offset)
                    inside = [(q, f, n) for q, f, n in whole_segments(sizes) if q == queue_id and f < offset < f + n]
                    expected = min(whole, inside[0][1] + MAX_PULL - offset) if inside else max(whole, 0)
                    assert count == expected, (queue_id, offset, max_messages)


def test_a_whole_queue_read_by_columnar_pulls_is_the_whole_queue(packed):
    broker, sizes = packed
    with PullConsumer(group="g", broker=broker.address) as consumer:
        for queue_id, size in sizes.items():
            offset, pulled = 3, []  # off a boundary: the first pull stops at the first segment's end
            while offset < size:
                table = consumer.pull_table("t", queue_id=queue_id, offset=offset, max_messages=MAX_PULL)
                pulled += rows_of(table.messages)
                offset = table.next_offset
            everything = []
            for start in range(3, size, 100):
                everything += consumer.pull("t", queue_id=queue_id, offset=start, max_messages=100).messages
            assert pulled == everything[: size - 3] and len(pulled) == size - 3


def test_segments_cut_by_the_byte_budget_hold_what_a_pull_within_the_budget_returns(tmp_path):
    """20 KB bodies: a pull's 16 MiB budget stops before 1,024 messages, and so does each segment."""
    sizes = {0: 2 * MAX_PULL}
    fill(tmp_path / "data", sizes, body_bytes=40_000)

    async def scenario() -> None:
        store = Store(tmp_path / "data")
        assert await store.query(store.pack, "t", 0, segment_to_pb, 100) > 0
        made = segments(tmp_path / "data")
        assert len(made) >= 2 and all(count < MAX_PULL for _, _, count in made)
        for _, first, count in made:
            packed = store.read_packed("t", 0, first, MAX_PULL, PULL_BYTES)
            columns = store.read_columns("t", 0, first, MAX_PULL, PULL_BYTES)
            assert isinstance(packed, Packed) and packed.end == first + count == first + len(columns)
            assert sum(map(len, columns.bodies)) <= PULL_BYTES
            assert packed.data == columns_to_pb(PullBatch(columns, first + count, 0, 0)).SerializeToString()
            assert len(store.read_packed("t", 0, first, count - 1, PULL_BYTES)) == count - 1  # fewer: rows
        assert made[-1][1] + made[-1][2] > 2 * MAX_PULL - MAX_PULL, "the tail short of a pull is not packed"
        store.close()

    asyncio.run(scenario())


def test_segments_of_another_store_file_are_never_served_and_are_packed_again(tmp_path):
    """A store file replaced under its segments (a restore, a copy): rows decide."""
    sizes = {0: 2 * MAX_PULL + 10}
    fill(tmp_path / "old", sizes, seed=1)
    fill(tmp_path / "data", sizes, seed=2)

    async def pack_old() -> None:
        store = Store(tmp_path / "old")
        await store.query(store.pack, "t", 0, segment_to_pb, 100)
        store.close()

    asyncio.run(pack_old())
    assert segments(tmp_path / "old") == whole_segments(sizes)
    stale = stored_segment(tmp_path / "old", 0, 0)
    shutil.copy(tmp_path / "old" / SEGMENTS_FILE, tmp_path / "data" / SEGMENTS_FILE)

    store = Store(tmp_path / "data")
    for first in (0, MAX_PULL):
        read = store.read_packed("t", 0, first, MAX_PULL, PULL_BYTES)
        rows = store.read_columns("t", 0, first, MAX_PULL, PULL_BYTES)
        assert not hasattr(read, "data") and read == rows, "a stale segment was served"
    store.close()

    broker = BrokerThread(broker_settings(tmp_path / "data", topics=()))
    try:
        wait_until(lambda: stored_segment(tmp_path / "data", 0, 0) != stale, timeout=30)
        assert segments(tmp_path / "data") == whole_segments(sizes)
        assert_first_pulls_agree(broker.address)
    finally:
        broker.stop()


def test_below_the_low_offset_a_pull_is_out_of_range_even_where_a_segment_is_left_and_the_packer_drops_it(tmp_path):
    sizes = {0: 3 * MAX_PULL}
    fill(tmp_path / "data", sizes)
    broker = BrokerThread(broker_settings(tmp_path / "data", topics=(), segments=False))
    store = broker.broker.store
    try:
        broker.run(store.query(store.pack, "t", 0, segment_to_pb, 100))  # no packer runs: the test packs
        assert segments(tmp_path / "data") == whole_segments(sizes)
        low = MAX_PULL + 500
        broker.run(store.expire_queue("t", 0, 1 << 62, low))
        with PullConsumer(group="g", broker=broker.address) as consumer:
            for offset in (0, MAX_PULL, low - 1):
                with pytest.raises(OffsetOutOfRange):
                    consumer.pull_table("t", queue_id=0, offset=offset, max_messages=MAX_PULL)
            table = consumer.pull_table("t", queue_id=0, offset=low, max_messages=MAX_PULL)
            assert table.next_offset == 2 * MAX_PULL and table.min_offset == low
        broker.run(store.query(store.pack, "t", 0, segment_to_pb, 100))
        assert segments(tmp_path / "data") == whole_segments(sizes)[1:], "the segment wholly below low stays"
    finally:
        broker.stop()


def test_with_segments_off_nothing_is_packed_and_what_was_is_dropped(tmp_path):
    sizes = {0: MAX_PULL + 1}
    fill(tmp_path / "data", sizes)
    broker = BrokerThread(broker_settings(tmp_path / "data", topics=()))
    wait_packed(tmp_path / "data", whole_segments(sizes))
    broker.stop()
    broker = BrokerThread(broker_settings(tmp_path / "data", topics=(), segments=False))
    try:
        assert segments(tmp_path / "data") == []
        with Producer(broker=broker.address) as producer:
            for _ in range(2):
                producer.send_batch([SdkMessage(topic="t", body=b"x") for _ in range(MAX_PULL)])
        time.sleep(3 * INTERVAL)  # rounds a packer would have made
        assert segments(tmp_path / "data") == []
        assert_first_pulls_agree(broker.address)
    finally:
        broker.stop()


def test_the_spark_source_reads_packed_queues_exactly(packed, spark):
    broker, sizes = packed
    starts = {0: 5, 1: 0, 2: 3}
    frame = batch_reader(spark, broker.address, topics="t", startingOffsets=json.dumps({"t": starts}))
    digests = frame.select("queue_id", "queue_offset", "message_id", functions.md5("body").alias("md5"))
    got = sorted((r.queue_id, r.queue_offset, r.message_id, r.md5) for r in digests.collect())  # results stay small
    with PullConsumer(group="g", broker=broker.address) as consumer:
        expected = []
        for queue_id, start in starts.items():
            for offset in range(start, sizes[queue_id], 100):
                messages = consumer.pull("t", queue_id=queue_id, offset=offset, max_messages=100).messages
                expected += [(m.queue_id, m.queue_offset, m.message_id, md5(m.body).hexdigest()) for m in messages]
    assert len(got) == sum(sizes.values()) - 8 and got == sorted(expected)


def test_system_topics_are_never_packed(tmp_path):
    async def scenario() -> None:
        store = Store(tmp_path / "data")
        for topic in SYSTEM_TOPICS:
            with pytest.raises(HiddenTopic):
                await store.query(store.pack, topic, 0, segment_to_pb, 1)
        store.close()

    asyncio.run(scenario())


def test_a_pull_process_sends_the_same_segments_and_the_same_replies_as_the_broker(tmp_path):
    sizes = {0: 2 * MAX_PULL + 1}
    fill(tmp_path / "data", sizes)
    broker = BrokerThread(broker_settings(tmp_path / "data", topics=(), pull_processes=1))
    try:
        wait_packed(tmp_path / "data", whole_segments(sizes))
        with grpc.insecure_channel(broker.address) as channel:
            (port,) = pb_grpc.BrokerStub(channel).GetQueueOffsets(pb.GetQueueOffsetsRequest(topic="t")).pull_ports
        for offset in (0, 1, MAX_PULL, 2 * MAX_PULL):
            for max_messages in (1, MAX_PULL):
                ours = raw_pull_columns(f"127.0.0.1:{port}", "t", 0, offset, max_messages)
                assert ours == raw_pull_columns(broker.address, "t", 0, offset, max_messages)
        assert raw_pull_columns(f"127.0.0.1:{port}", "t", 0, MAX_PULL, MAX_PULL).startswith(
            stored_segment(tmp_path / "data", 0, MAX_PULL)
        )
    finally:
        broker.stop()


def test_an_unreadable_segments_file_is_started_afresh_and_packed_again(tmp_path):
    sizes = {0: MAX_PULL + 1}
    fill(tmp_path / "data", sizes)
    (tmp_path / "data" / SEGMENTS_FILE).write_bytes(b"not a database" * 1000)
    broker = BrokerThread(broker_settings(tmp_path / "data", topics=()))
    try:
        wait_packed(tmp_path / "data", whole_segments(sizes))
        assert_first_pulls_agree(broker.address)
    finally:
        broker.stop()


def test_pulls_stay_exact_while_messages_arrive_segments_are_packed_and_retention_deletes(tmp_path):
    """Everything at once on a real broker: sends, the packer, retention (2 s) sweeping every
    0.5 s, and a reader that pulls columns from offset 0 on, among the oldest messages, where
    retention deletes. Every message it reads is the one sent
    with that id, offsets run on without a gap unless retention took them, and a pull below the
    low offset is OUT_OF_RANGE, never a stale answer."""
    broker = BrokerThread(broker_settings(tmp_path / "data", topics=(Topic("t", 1),), retention=2))
    sent: dict[str, bytes] = {}
    stop = threading.Event()

    def produce() -> None:
        rng = random.Random(3)
        with Producer(broker=broker.address) as producer:
            while not stop.is_set():
                batch = [SdkMessage(topic="t", body=rng.randbytes(rng.randint(0, 2000))) for _ in range(300)]
                sent.update((m.message_id, m.body) for m in batch)
                producer.send_batch(batch)

    try:
        producer_thread = threading.Thread(target=produce)
        producer_thread.start()
        time.sleep(4)  # the reader starts from offset 0, which retention has deleted by then
        read, offset, out_of_range = 0, 0, 0
        deadline = time.monotonic() + 6
        with PullConsumer(group="g", broker=broker.address) as consumer:
            while time.monotonic() < deadline:
                try:
                    table = consumer.pull_table("t", queue_id=0, offset=offset, max_messages=MAX_PULL)
                except OffsetOutOfRange:
                    low = consumer.queue_offsets("t")[0][0]
                    assert low > offset, "out of range, yet the offset is still in the queue"
                    offset, out_of_range = low, out_of_range + 1
                    continue
                rows = table.messages.to_pydict()
                assert rows["queue_offset"] == list(range(offset, offset + table.messages.num_rows))
                assert all(sent[i] == body for i, body in zip(rows["message_id"], rows["body"], strict=True))
                read += table.messages.num_rows
                offset = table.next_offset
        stop.set()
        producer_thread.join()
        assert read > 2 * MAX_PULL and len(segments(tmp_path / "data")) > 0 and out_of_range > 0
    finally:
        stop.set()
        broker.stop()


def test_runs_a_table_wrote_are_packed_from_memory_exactly_as_from_the_rows(tmp_path):
    """The packer packs SendColumns calls' messages from the columns in hand, keeping a queue's
    messages short of a segment for the next run, and reading back the few messages between a
    queue's segments and a run; each segment is byte for byte the one it packs by reading the
    rows back."""

    rng = random.Random(7)

    async def scenario() -> None:
        store, packer, messaging = await _packing(tmp_path, 3)
        await store.append([(random_message(rng, 99, 10), 2)], NOW_MS)  # queue 2 starts with a plain send
        # Queues 0, 1, 2, 0, 1, 2: queue 0 two whole runs, queue 1 a short run then a long one,
        # queue 2 runs after a message that came in no run (read from the store, packed with them).
        counts = (MAX_PULL, 5, MAX_PULL, MAX_PULL, MAX_PULL, MAX_PULL)
        queues = [
            (await messaging.send_columns(_table(rng, "t", f"r{n}", count))).queue_ids[0]
            for n, count in enumerate(counts)
        ]
        assert queues == [0, 1, 2, 0, 1, 2]
        # Queue 1: 5 + 1,024 messages, one segment; queue 2: 1 + 2,048, two segments, the first
        # with the message before its runs.
        assert await packer.pack_runs() == 2 * MAX_PULL + MAX_PULL + 2 * MAX_PULL - 1
        from_memory = await store.query(_segment_rows, store)
        assert [row[:3] for row in from_memory] == [
            (0, 0, MAX_PULL), (0, MAX_PULL, MAX_PULL), (1, 0, MAX_PULL), (2, 0, MAX_PULL), (2, MAX_PULL, MAX_PULL)
        ]  # fmt: skip
        from_rows = await _packed_from_rows(store, 3)
        store.close()
        assert from_rows == from_memory

    asyncio.run(scenario())


def test_small_runs_are_kept_in_memory_until_a_segment_can_be_cut(tmp_path, monkeypatch):
    """Runs of a few messages each (a Kafka producer's batches) cost the store nothing while they
    only add to what a queue keeps: the store packs once a segment's worth has come, and the
    segment is the one packed by reading the rows back."""
    rng = random.Random(13)

    async def scenario() -> None:
        store, packer, messaging = await _packing(tmp_path, 1)
        calls = []
        pack_run = store.pack_run
        monkeypatch.setattr(store, "pack_run", lambda *args: calls.append(len(args[2])) or pack_run(*args))
        packed = 0
        for n in range(69):  # 69 runs of 15: 1,035 messages
            await messaging.send_columns(_table(rng, "t", f"r{n}", 15))
            packed += await packer.pack_runs()
        # The first run, on its own (what precedes it is read back), then the 69th with the 67
        # kept between: 1,035 messages, a segment of 1,024 and 11 kept for the next run.
        assert calls == [15, 1035]
        assert packed == MAX_PULL
        from_memory = await store.query(_segment_rows, store)
        assert [row[:3] for row in from_memory] == [(0, 0, MAX_PULL)]
        from_rows = await _packed_from_rows(store, 1)
        store.close()
        assert from_rows == from_memory

    asyncio.run(scenario())


def test_rounds_after_one_that_found_nothing_visit_no_queue_until_the_store_writes(tmp_path, monkeypatch):
    """An idle broker's packer costs the store nothing: once a round has visited every queue and
    packed nothing, rounds visit none until a write commits; the round after it packs what came."""

    async def scenario() -> None:
        store, packer, messaging = await _packing(tmp_path, 2)  # its verifying round packed nothing
        visits = []
        pack = store.pack
        monkeypatch.setattr(store, "pack", lambda *args, **kwargs: visits.append(args[1]) or pack(*args, **kwargs))
        assert (await packer.pack(), await packer.pack(), visits) == (0, 0, [])
        for part in range(2):
            await messaging.send([Message("t", b"%d" % i, message_id=f"m{part}-{i}") for i in range(MAX_PULL)])
        assert await packer.pack() == 2 * MAX_PULL
        assert visits == [0, 1]
        assert await packer.pack() == 0
        assert visits == [0, 1, 0, 1], "a round that packed something is followed by one that looks again"
        assert (await packer.pack(), visits) == (0, [0, 1, 0, 1])
        store.close()

    asyncio.run(scenario())


def test_a_committed_batch_is_packed_from_memory_exactly_as_from_the_rows(tmp_path):
    """An exactly-once batch's prepared ranges are kept until the batch ends: its commit hands
    them to the packer, in offset order per queue, and each segment is byte for byte the one the
    rounds pack by reading the rows back. A rolled-back batch and a replayed commit hand over
    nothing."""
    from broker.batches import BatchService
    from broker.model import Resolution

    rng = random.Random(11)
    told: list[tuple[int, int, int]] = []

    async def scenario() -> None:
        store, packer, messaging = await _packing(tmp_path, 2)

        def committed(topic: str, queue_id: int, columns: QueueColumns) -> None:
            told.append((queue_id, columns.queue_offsets[0], len(columns)))
            packer.written(topic, queue_id, columns)

        batches = BatchService(store, messaging, max_body_bytes=1 << 20, timeout=60, on_committed=committed)
        # Queues 0, 1, 0, 1, 0 in turn: queue 0 1,000 messages, a range of another group rolled
        # back (a gap of 1,000 offsets), then 1,024 more; queue 1 5 messages, then 1,024.
        g = [await batches.prepare("g", 1, _table(rng, "t", f"a{n}", n)) for n in (1000, 5)]
        rolled_back = await batches.prepare("other", 1, _table(rng, "t", "b", 1000))
        g += [await batches.prepare("g", 1, _table(rng, "t", f"c{n}", MAX_PULL)) for n in range(2)]
        assert [r.queue_id for r in (*g[:2], rolled_back, *g[2:])] == [0, 1, 0, 1, 0]
        await batches.end("other", 1, Resolution.ROLLBACK, [])
        ranges = [r.range_id for r in g]
        await batches.end("g", 1, Resolution.COMMIT, ranges)
        # A replay whose rows differ: the batch is already committed, so its range rolls back.
        replayed = await batches.prepare("g", 1, _table(rng, "t", "d", 3))
        assert (await batches.end("g", 1, Resolution.COMMIT, [replayed.range_id])).already_committed
        assert told == [(0, 0, 1000), (0, 2000, MAX_PULL), (1, 0, 5), (1, 5, MAX_PULL)]
        # Queue 0: one segment, its first 1,000 messages (read back: the run after them does not
        # follow them) and 24 of the run after the gap; queue 1: one segment, 5 + 1,019.
        assert await packer.pack_runs() == 24 + MAX_PULL
        from_memory = await store.query(_segment_rows, store)
        assert [row[:3] for row in from_memory] == [(0, 0, 2024), (1, 0, MAX_PULL)]
        from_rows = await _packed_from_rows(store, 2)
        store.close()
        assert from_rows == from_memory

    asyncio.run(scenario())


def test_a_batch_never_ended_lets_go_of_its_messages_at_its_timeout(tmp_path, monkeypatch):
    """What is kept of prepared ranges is bounded (HELD_BYTES), and a batch never ended gives its
    share back when the timeout rolls it back: a later batch's messages are kept again."""
    import broker.batches
    from broker.batches import BatchService
    from broker.model import Resolution

    rng = random.Random(12)
    monkeypatch.setattr(broker.batches, "HELD_BYTES", 100)
    now = [1000.0]
    told: list[int] = []

    async def scenario() -> None:
        store, _, messaging = await _packing(tmp_path, 1)
        batches = BatchService(
            store, messaging, max_body_bytes=1 << 20, timeout=60, clock=lambda: now[0],
            on_committed=lambda topic, queue_id, columns: told.append(len(columns)),
        )  # fmt: skip
        await batches.prepare("g", 1, _table(rng, "t", "a", 1, body=b"x" * 60))  # never ended
        late = await batches.prepare("h", 1, _table(rng, "t", "b", 1, body=b"y" * 60))
        await batches.end("h", 1, Resolution.COMMIT, [late.range_id])
        assert told == []  # 120 bytes would pass HELD_BYTES: the second range was not kept
        now[0] += 61
        assert await batches.expire() == 1
        kept = await batches.prepare("h", 2, _table(rng, "t", "c", 1, body=b"z" * 60))
        await batches.end("h", 2, Resolution.COMMIT, [kept.range_id])
        store.close()
        assert told == [1]

    asyncio.run(scenario())


def _table(rng: random.Random, topic: str, prefix: str, count: int, *, body: bytes | None = None) -> MessageColumns:
    """A table of ``count`` random messages (or of ``body``) with ids ``prefix-0`` on."""
    messages = [random_message(rng, i, 3000) for i in range(count)]
    return MessageColumns(
        topic=topic,
        message_ids=pa.array([f"{prefix}-{i}".encode() for i in range(count)], pa.binary()),
        keys=pa.array([json.dumps(list(m.keys)).encode() if m.keys else b"[]" for m in messages], pa.binary()),
        tags=pa.array([m.tags.encode() for m in messages], pa.binary()),
        properties=pa.array(
            [json.dumps(dict(m.properties), sort_keys=True).encode() if m.properties else b"{}" for m in messages],
            pa.binary(),
        ),
        bodies=pa.array([body if body is not None else m.body for m in messages], pa.binary()),
        born_timestamps=pa.array([m.born_timestamp for m in messages], pa.int64()),
    )


def test_a_run_after_an_open_range_is_not_packed_over_it(tmp_path):
    """The messages between a queue's segments and a run are packed with it only if all are
    committed: an open range there (an exactly-once batch not ended) keeps the run out of any
    segment until the range commits, and the rounds then pack the whole queue."""
    from broker.model import MessageRows

    ids = pa.array([f"m-{i}".encode() for i in range(MAX_PULL)], pa.binary())
    run = MessageColumns("t", ids, None, None, None, ids, None)
    held = MessageRows(["t"] * 3, ["h-0", "h-1", "h-2"], ["[]"] * 3, [""] * 3, ["{}"] * 3, [b"h"] * 3, [0] * 3)

    async def scenario() -> None:
        store, packer, messaging = await _packing(tmp_path, 1)
        opened = await store.prepare_range("g", 1, held, 0, NOW_MS)
        assert (await messaging.send_columns(run)).queue_offsets[0] == 3
        assert await packer.pack_runs() == 0
        assert await store.query(_segment_rows, store) == []
        await store.end_batch("g", 1, [opened.range_id], NOW_MS)
        assert await store.query(store.pack, "t", 0, segment_to_pb, 4) == MAX_PULL
        segments = await store.query(_segment_rows, store)
        store.close()
        assert [row[:3] for row in segments] == [(0, 0, MAX_PULL)]

    asyncio.run(scenario())


async def _packing(tmp_path: Path, queues: int) -> tuple[Store, Packer, MessagingService]:
    """A store with topic ``t`` of ``queues`` queues, its packer (every queue's segments verified by
    a first round) and a messaging service that hands the packer what SendColumns calls write."""
    store = Store(tmp_path / "data")
    await store.create_topic("t", queues)
    packer = Packer(store, segment_to_pb, metrics=Metrics())
    await packer.pack()
    delays = DelayService(store, max_delay=3600)
    return store, packer, MessagingService(store, delays, max_body_bytes=1 << 20, on_written=packer.written)


async def _packed_from_rows(store: Store, queues: int) -> list[tuple[int, int, int, bytes]]:
    """The segments of topic ``t``'s first ``queues`` queues, dropped and packed again from the rows."""
    await store.query(store.drop_segments)
    for queue in range(queues):
        await store.query(store.pack, "t", queue, segment_to_pb, 4)
    return await store.query(_segment_rows, store)


def _segment_rows(store: Store) -> list[tuple[int, int, int, bytes]]:
    query = "SELECT queue_id, first, count, data FROM segments.segments ORDER BY queue_id, first"
    return store._reader().execute(query).fetchall()


def test_a_call_with_a_message_stored_before_it_is_not_handed_to_the_packer(tmp_path):
    """Its offsets may run on from the queue's end (the message stored before was the last one),
    but that message's columns are the resend's, not the store's: it is left to the rounds."""

    def table(*ids: str) -> MessageColumns:
        binary = pa.array([i.encode() for i in ids], pa.binary())
        return MessageColumns("t", binary, None, None, None, binary, None)

    runs: list[tuple[str, int, object]] = []

    async def scenario() -> tuple[list[int], int]:
        store = Store(tmp_path / "data")
        await store.create_topic("t", 1)
        messaging = MessagingService(
            store, DelayService(store, max_delay=3600), max_body_bytes=1024, on_written=lambda *run: runs.append(run)
        )
        await messaging.send_columns(table("a", "b"))
        again = await messaging.send_columns(table("b", "c"))
        store.close()
        return list(again.queue_offsets), again.new

    assert asyncio.run(scenario()) == ([1, 2], 1)
    assert [(topic, queue, len(columns)) for topic, queue, columns in runs] == [("t", 0, 2)]


@pytest.mark.skipif(sys.platform != "linux", reason="only Linux gives a thread a nice value of its own")
def test_segments_are_packed_at_a_lower_cpu_priority_than_writes(tmp_path, monkeypatch):
    broker = BrokerThread(broker_settings(tmp_path / "data"))
    try:
        store = broker.broker.store
        priorities: list[int] = []

        def recording(pack: Callable[..., int]) -> Callable[..., int]:
            def packing(*args: object, **kwargs: object) -> int:
                packed = pack(*args, **kwargs)
                if packed > 0:
                    priorities.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
                return packed

            return packing

        # A run written before the packer's first round has looked at its queue is packed by a
        # round (``pack``), any other from memory (``pack_run``): either way on the background thread.
        monkeypatch.setattr(store, "pack_run", recording(store.pack_run))
        monkeypatch.setattr(store, "pack", recording(store.pack))
        with Producer(broker=broker.address) as producer:
            producer.send_table("orders", pa.table({"body": [b"x" * 100] * MAX_PULL}))
        wait_until(lambda: priorities)
    finally:
        broker.stop()
    # The writer, the event loop and the readers keep the process's priority, as this thread does.
    assert set(priorities) == {os.getpriority(os.PRIO_PROCESS, 0) + BACKGROUND_NICE}


def test_background_work_runs_where_the_system_refuses_a_lower_priority(tmp_path, monkeypatch, caplog):
    def refuse(*args: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "setpriority", refuse)  # as a sandbox's system-call rules may
    store = Store(tmp_path / "data")
    try:
        assert asyncio.run(store.in_background(threading.get_native_id)) != threading.get_native_id()
    finally:
        store.close()
    assert any("keeps the broker's CPU priority" in r.getMessage() for r in caplog.records) == (sys.platform == "linux")
