"""Retention (issue 11): old committed messages and resolved transactions leave the store, queues'
low offsets move up, a pull below them is refused with OFFSET_OUT_OF_RANGE, pending half messages
stay, and the store file stops growing under a steady load."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import grpc
import httpx
import pytest

import halfmq_cli.store
from broker.clock import to_ms
from broker.errors import StaleReceiptHandle
from broker.model import DISCARD_TOPIC, Message, Resolution, Source, Topic
from broker.retention import Swept
from broker.store import Flush
from broker.store.base import DB_FILE, bytes_on_disk
from broker.store.segments import SEGMENTS_FILE
from broker.store.sql import LOG_LIMIT
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import AsyncRocketMQTransactionProducer, OffsetOutOfRange, Producer, PullConsumer
from producer_sdk import Message as SdkMessage
from tests.support import BrokerThread, ScriptedListener, broker_settings, store_snapshot, wait_until, write_jobs
from tests.test_batches import end, prepare

HOUR = 3600.0


def send(broker: BrokerThread, count: int, topic: str = "orders", prefix: str = "m") -> None:
    with Producer(broker=broker.address) as producer:
        producer.send_batch([SdkMessage(topic=topic, body=f"{prefix}{i}".encode()) for i in range(count)])


def ranges(broker: BrokerThread, topic: str = "orders") -> dict[int, tuple[int, int]]:
    return broker.run(broker.broker.messaging.queue_offsets(topic))


def sweep(broker: BrokerThread):
    return broker.run(broker.broker.retention.sweep())


def counts(data_dir: Path) -> dict[str, int]:
    with sqlite3.connect(data_dir / DB_FILE) as conn:
        rows = dict(conn.execute("SELECT topic, COUNT(*) FROM messages GROUP BY topic").fetchall())
        rows["transactions"] = conn.execute("SELECT COUNT(*) FROM transactions").fetchone()[0]
        rows["checks"] = conn.execute("SELECT COUNT(*) FROM checks").fetchone()[0]
        return rows


def test_old_messages_leave_their_queues_and_a_pull_below_the_low_offset_is_out_of_range(broker, clock):
    send(broker, 40, prefix="old")
    before = ranges(broker)
    clock.advance(72 * HOUR - 1)
    send(broker, 40, prefix="new")
    middle = ranges(broker)
    assert sweep(broker).messages == 0, "nothing is older than the default 72 h yet"
    clock.advance(2)
    assert sweep(broker).messages == 40
    after = ranges(broker)
    assert all(after[q] == (before[q][1], middle[q][1]) for q in after), "each queue's low offset moved up"
    queue = max(after, key=lambda q: after[q][0])
    low = after[queue][0]
    with PullConsumer(group="c", broker=broker.address) as consumer:
        with pytest.raises(OffsetOutOfRange, match=f"below the queue's low offset {low}"):
            consumer.pull("orders", queue_id=queue, offset=low - 1)
        kept = consumer.pull("orders", queue_id=queue, offset=low)
        assert kept.messages and all(m.body.startswith(b"new") for m in kept.messages)
        assert kept.next_offset == after[queue][1]
    request = pb.PullRequest(topic="orders", queue_id=queue, offset=0, max_messages=1)
    with grpc.insecure_channel(broker.address) as channel, pytest.raises(grpc.RpcError) as refused:
        pb_grpc.BrokerStub(channel).PullColumns(request)
    assert refused.value.code() is grpc.StatusCode.OUT_OF_RANGE


def test_an_emptied_queue_keeps_its_offsets_and_never_reuses_one(tmp_path, clock):
    settings = broker_settings(tmp_path / "data", topics=(Topic("orders", 1),), retention=60)
    broker = BrokerThread(settings, clock)
    try:
        send(broker, 5)
        clock.advance(61)
        assert sweep(broker).messages == 5
        assert ranges(broker) == {0: (5, 5)}
    finally:
        broker.stop()
    broker = BrokerThread(settings, clock)  # the next offset survives a restart, with no message left to show it
    try:
        assert ranges(broker) == {0: (5, 5)}
        with PullConsumer(group="c", broker=broker.address) as consumer:
            with pytest.raises(OffsetOutOfRange):
                consumer.pull("orders", queue_id=0, offset=4)
            assert consumer.pull("orders", queue_id=0, offset=5).messages == []
        send(broker, 1, prefix="after")
        assert ranges(broker) == {0: (5, 6)}
    finally:
        broker.stop()


def test_pending_half_messages_survive_retention_and_resolved_transactions_leave(tmp_path, clock):
    data = tmp_path / "data"
    broker = BrokerThread(broker_settings(data, retention=60, max_half_age=10 * HOUR), clock)
    core = broker.broker
    try:
        messages = [(Message(topic="orders", body=b"%d" % i, message_id=f"id{i}"), "g") for i in range(30)]
        txids = [txn.transaction_id for txn in broker.run(core.transactions.prepare_many(messages))]
        for i in range(20):
            broker.run(
                core.transactions.end(txids[i], "g", [Resolution.COMMIT, Resolution.ROLLBACK][i % 2], Source.CLIENT)
            )
        broker.run(core.store.record_checks([(txid, "session-1") for txid in txids[20:]], to_ms(clock())))
        for txid in txids[20:25]:
            broker.run(core.transactions.discard(txid))
        broker.run(core.transactions.resume(txids[22]))  # resumed, then discarded again: two op records
        broker.run(core.transactions.discard(txids[22]))
        before = store_snapshot(data)
        pending = set(txids[25:])
        clock.advance(HOUR)
        swept = sweep(broker)
        assert (swept.transactions, swept.messages) == (25, 10 + 5), "10 committed, 5 discarded messages"
        after = store_snapshot(data)
        assert {row[0] for row in after["transactions"]} == pending
        assert after["transactions"] == [row for row in before["transactions"] if row[0] in pending], "untouched"
        assert after["checks"] == [row for row in before["checks"] if row[0] in pending]
        assert len(before["op_log"]) == 20 + 5 + 1 and after["op_log"] == [], "every resolution's op record"
        assert [row for row in after["messages"] if row[1] in (DISCARD_TOPIC, "orders")] == []
        floors = ranges(broker)
        assert sum(low for low, _ in floors.values()) == 10 and all(low == high for low, high in floors.values())
        # A pending transaction still commits: its half message is there to copy, at a fresh offset.
        broker.run(core.transactions.operator_end(txids[25], Resolution.COMMIT))
        committed = [row for row in store_snapshot(data)["messages"] if row[1] == "orders"]
        assert [(row[4], row[9]) for row in committed] == [("id25", b"25")]
        assert committed[0][3] == floors[committed[0][2]][0], "the queue's next offset, not a reused one"
    finally:
        broker.stop()


def test_a_sweep_with_nothing_old_enough_to_delete_writes_nothing(tmp_path, clock):
    """Every kind of record retention deletes is there, none old enough yet: the sweep runs no
    write job and the store is as it was. Once they are, the same sweep deletes each kind."""
    data = tmp_path / "data"
    broker = BrokerThread(broker_settings(data, retention=60), clock)
    core = broker.broker
    try:
        send(broker, 20)
        messages = [(Message(topic="orders", body=b"%d" % i, message_id=f"id{i}"), "g") for i in range(4)]
        for i, txn in enumerate(broker.run(core.transactions.prepare_many(messages))):
            resolution = [Resolution.COMMIT, Resolution.ROLLBACK][i % 2]
            broker.run(core.transactions.end(txn.transaction_id, "g", resolution, Source.CLIENT))
        with grpc.insecure_channel(broker.address) as channel:
            stub = pb_grpc.BrokerStub(channel)
            end(stub, 0, [prepare(stub, 0, "a", "b").range_id])
        clock.advance(59)
        before, jobs = store_snapshot(data), write_jobs(broker)
        assert not sweep(broker)
        assert write_jobs(broker) == jobs, "no write job"
        assert store_snapshot(data) == before
        clock.advance(2)
        assert sweep(broker) == Swept(messages=20 + 2 + 2, transactions=4)
        after = store_snapshot(data)
        assert (after["transactions"], after["op_log"], after["committed_batches"]) == ([], [], [])
    finally:
        broker.stop()


def test_the_half_and_op_logs_emptied_by_retention_never_reuse_an_offset(tmp_path, clock):
    settings = broker_settings(tmp_path / "data", retention=60)
    broker = BrokerThread(settings, clock)
    try:
        messages = [(Message(topic="orders", body=b"%d" % i, message_id=f"r-{i}"), "g") for i in range(3)]
        for txn in broker.run(broker.broker.transactions.prepare_many(messages)):
            broker.run(broker.broker.transactions.end(txn.transaction_id, "g", Resolution.ROLLBACK, Source.CLIENT))
        clock.advance(61)
        assert sweep(broker).transactions == 3
        assert {table: len(rows) for table, rows in store_snapshot(settings.data_dir).items()
                if table in ("transactions", "op_log")} == {"transactions": 0, "op_log": 0}  # fmt: skip
    finally:
        broker.stop()
    broker = BrokerThread(settings, clock)  # the next offsets survive a restart, with no row left to show them
    try:
        (txn,) = broker.run(
            broker.broker.transactions.prepare_many([(Message(topic="orders", body=b"new", message_id="r-new"), "g")])
        )
        assert txn.half_offset == 3
        broker.run(broker.broker.transactions.end(txn.transaction_id, "g", Resolution.COMMIT, Source.CLIENT))
        assert store_snapshot(settings.data_dir)["op_log"] == [(3, 3, to_ms(clock()))]
    finally:
        broker.stop()


class FileSizes(threading.Thread):
    """The largest the store's files (database and write-ahead log) get while it runs."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(daemon=True)
        self._files = [data_dir / DB_FILE, data_dir / f"{DB_FILE}-wal"]
        self.largest = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.05):
            self.largest = max(self.largest, sum(f.stat().st_size for f in self._files if f.exists()))

    def stop(self) -> int:
        self._done.set()
        self.join()
        return self.largest


TXNS, BODY, PER_SECOND = 20_000, 10 * 1024, 1000
# docs/operating.md, "How much disk", for the one database this load writes: each transaction
# stores its body twice (half and final message), retention 2 s and a sweep interval more, 1.6
# times the size in rows at 10 KB, a quarter of the file kept free, and the write-ahead log at
# most LOG_LIMIT: about 176 MB. Without retention the same load makes 480 MB.
BOUND = 2 * BODY * PER_SECOND * 2 * 1.25 * 1.6 * 4 / 3 + LOG_LIMIT


def test_a_store_under_steady_load_stays_bounded_with_a_short_retention(tmp_path):
    data = tmp_path / "data"
    broker = BrokerThread(broker_settings(data, retention=2, flush=Flush.ASYNC))
    sizes = FileSizes(data)
    sizes.start()

    async def produce() -> None:
        async with AsyncRocketMQTransactionProducer(
            group="g", broker=broker.address, listener=ScriptedListener()
        ) as producer:
            began = time.monotonic()
            for start in range(0, TXNS, PER_SECOND // 10):
                batch = [SdkMessage(topic="orders", body=bytes(BODY)) for _ in range(PER_SECOND // 10)]
                await asyncio.gather(*(producer.send_message_in_transaction(m) for m in batch))
                await asyncio.sleep(max(0.0, began + (start + len(batch)) / PER_SECOND - time.monotonic()))

    try:
        asyncio.run(produce())
        largest = sizes.stop()
        assert largest < BOUND, f"the store reached {largest / 2**20:.0f} MiB"
        lows = broker.broker.store.low_offsets()
        assert sum(lows[("orders", q)] for q in range(4)) > TXNS // 2, "the queues' low offsets moved up"
        left = counts(data)
        assert left["transactions"] < TXNS // 2
        assert broker.broker.metrics.totals()["committed"] == TXNS
        time.sleep(2.5)  # past the retention: everything goes, and the file hands its pages back
        broker.run(broker.broker.retention.sweep())
        # The file takes its new size at a checkpoint that copies the whole log; a reader on an
        # older snapshot can stop one short, and the checkpointer tries again until one succeeds.
        wait_until(lambda: broker.broker.store.path.stat().st_size < largest // 4, timeout=10)
    finally:
        sizes.stop()
        broker.stop()


def test_a_topic_s_own_retention_overrides_the_broker_s(tmp_path, clock):
    broker = BrokerThread(broker_settings(tmp_path / "data", retention=HOUR), clock)
    try:
        with Producer(broker=broker.address) as producer:
            assert producer.create_topic("audit", 1, retention=0)  # kept forever
            assert producer.create_topic("fast", 1, retention=10)
            assert not producer.create_topic("fast", 1), "an existing topic keeps its retention"
            assert broker.broker.messaging.topic("fast").retention == 10
        for topic in ("orders", "audit", "fast"):
            send(broker, 8, topic)
        clock.advance(20)
        assert sweep(broker).messages == 8
        assert [ranges(broker, t)[0][0] for t in ("audit", "fast")] == [0, 8]
        clock.advance(2 * HOUR)
        assert sweep(broker).messages == 8, "orders, at the broker's hour"
        assert ranges(broker, "audit") == {0: (0, 8)}
    finally:
        broker.stop()


def packed(data_dir: Path) -> int:
    with sqlite3.connect(data_dir / SEGMENTS_FILE) as conn:
        return int(conn.execute("SELECT COALESCE(SUM(count), 0) FROM segments").fetchone()[0])


def logs_emptied(broker: BrokerThread) -> bool:
    """Copy and empty the store's logs, as the checkpointer does once no one writes; True once done."""
    store = broker.broker.store
    return broker.run(store.in_background(store.checkpoint)) and broker.run(store.in_background(store.cut_logs))


def test_a_byte_limit_deletes_the_oldest_until_every_file_of_the_store_fits(tmp_path, clock):
    limit, batch, body = 16 * 1024 * 1024, 256, 2048
    data = tmp_path / "data"
    settings = broker_settings(data, topics=(Topic("orders", 1),), retention=0, retention_bytes=limit)
    broker = BrokerThread(settings, clock)
    try:
        for _ in range(40):  # 40 x 256 x 2 KB: 20 MB of bodies, over a second each, packed into segments too
            with Producer(broker=broker.address) as producer:
                producer.send_batch([SdkMessage(topic="orders", body=bytes(body)) for _ in range(batch)])
            clock.advance(1)
        wait_until(lambda: packed(data) >= 9 * 1024, timeout=20)
        assert sweep(broker).messages > 0
        wait_until(lambda: logs_emptied(broker) and bytes_on_disk(data) <= limit, timeout=10)
        low, high = ranges(broker)[0]
        assert high == 40 * batch and low % batch == 0, "whole seconds left, the oldest first"
        # A message takes its size in rows and again in segments, and a quarter of a file is kept free.
        assert (high - low) * body > limit // 4, "not more left than the limit asks for"
        stats = httpx.get(f"{broker.http}/stats").json()
        inspected = halfmq_cli.store.inspect(data)
        assert stats["store_bytes"] == inspected["file_bytes"] == bytes_on_disk(data) > (high - low) * body
    finally:
        broker.stop()


def test_a_receiving_group_behind_the_low_offset_moves_up_to_it(tmp_path, clock):
    broker = BrokerThread(broker_settings(tmp_path / "data", topics=(Topic("orders", 1),), retention=60), clock)
    messaging = broker.broker.messaging
    try:
        send(broker, 10, prefix="old")
        in_flight = broker.run(messaging.receive("readers", "orders", 0, 3, 30, None))
        assert [d.message.queue_offset for d in in_flight] == [0, 1, 2]
        clock.advance(61)
        send(broker, 5, prefix="new")
        assert sweep(broker).messages == 10
        with pytest.raises(StaleReceiptHandle):
            broker.run(messaging.ack("readers", "orders", in_flight[0].receipt_handle))
        received = broker.run(messaging.receive("readers", "orders", 0, 10, 30, None))
        assert [d.message.body for d in received] == [b"new%d" % i for i in range(5)]
        for delivery in received:
            broker.run(messaging.ack("readers", "orders", delivery.receipt_handle))
        assert broker.run(messaging.consumer_offsets("readers", "orders")) == {0: 15}
        assert store_snapshot(tmp_path / "data")["deliveries"] == []
    finally:
        broker.stop()


def test_metrics_show_the_store_size_the_low_offsets_and_what_retention_deleted(broker, clock):
    send(broker, 12)
    clock.advance(73 * HOUR)
    sweep(broker)
    wait_until(lambda: logs_emptied(broker))  # the files change size at checkpoints: settle them
    text = httpx.get(f"{broker.http}/metrics").text
    assert 'halfmq_retention_deleted_total{kind="messages"} 12.0' in text
    lows = {q: low for q, (low, _) in ranges(broker).items()}
    for queue, low in lows.items():
        assert f'halfmq_queue_low_offset{{queue="{queue}",topic="orders"}} {float(low)}' in text
    on_disk = float(next(line.split()[1] for line in text.splitlines() if line.startswith("halfmq_store_bytes ")))
    assert on_disk == bytes_on_disk(broker.broker.store.path.parent)
    stats = httpx.get(f"{broker.http}/stats").json()
    assert stats["store_bytes"] > 0 and 0 < stats["store_used_bytes"] <= stats["store_bytes"]


def test_a_quiet_broker_s_file_shrinks_after_a_small_sweep(broker, clock):
    with Producer(broker=broker.address) as producer:  # the sweep's writes stay under SQLite's automatic checkpoint
        for _ in range(4):
            producer.send_batch([SdkMessage(topic="orders", body=bytes(5000)) for _ in range(128)])
    wait_until(lambda: logs_emptied(broker))  # start from the whole log copied into the file, nothing pending
    full = broker.broker.store.path.stat().st_size
    clock.advance(73 * HOUR)
    assert sweep(broker).messages == 512
    wait_until(lambda: broker.broker.store.path.stat().st_size < full // 2, timeout=30)
