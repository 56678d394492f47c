"""Process-level fault tests: real processes, real gRPC, SIGKILL (docs/architecture.md, guarantees 1, 3, 5)."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

from broker.store import DB_FILE
from producer_sdk import (
    HalfmqError,
    KafkaTransactionProducer,
    LocalTransactionState,
    Message,
    Producer,
    PullConsumer,
    RocketMQTransactionProducer,
    TransactionListener,
    TransactionState,
)
from spark_consumer.client import BrokerClient, Connection
from tests.processes import BrokerProcess
from tests.support import wait_until

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parent.parent
FAST_CHECKS = ("--check-interval", "0.3", "--transaction-timeout", "1", "--check-timeout", "1")


def query(data_dir: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(data_dir / DB_FILE, timeout=30) as conn:
        return conn.execute(sql).fetchall()


@pytest.fixture
def broker_process(tmp_path):
    broker = BrokerProcess(tmp_path / "data", *FAST_CHECKS)
    broker.start()
    yield broker
    broker.stop()


def test_a_peer_producer_commits_the_transaction_of_a_killed_producer_exactly_once(broker_process, tmp_path):
    local_db = tmp_path / "orders.db"
    crashing = subprocess.Popen(
        [sys.executable, "-m", "tests.programs.crashing_producer", broker_process.address, "orders-svc", str(local_db)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert crashing.stdout is not None
        assert crashing.stdout.readline().strip() == "LOCAL-COMMITTED"
    finally:
        os.kill(crashing.pid, signal.SIGKILL)
        crashing.wait()

    class Peer(TransactionListener):
        def execute_local_transaction(self, msg, arg):
            raise AssertionError("the peer sends nothing")

        def check_local_transaction(self, msg):
            with sqlite3.connect(local_db) as conn:
                found = conn.execute("SELECT 1 FROM orders WHERE id = ?", (msg.keys[0],)).fetchone()
            return LocalTransactionState.COMMIT if found else LocalTransactionState.ROLLBACK

    with RocketMQTransactionProducer(group="orders-svc", broker=broker_process.address, listener=Peer()) as peer:
        wait_until(lambda: query(broker_process.data_dir, "SELECT state FROM transactions") == [("COMMITTED",)], 30)
        assert peer.checks_received >= 1
    with PullConsumer(group="audit", broker=broker_process.address) as consumer:
        bodies = [m.body for q in range(4) for m in consumer.pull("orders", queue_id=q, offset=0).messages]
    assert bodies == [b"order-1"]


def test_sigterm_shuts_the_broker_down_cleanly(broker_process):
    assert broker_process.terminate() == 0
    assert "halfmq broker stopped" in broker_process.log.read_text()


def test_sigterm_with_writes_in_flight_keeps_every_acknowledged_one(broker_process):
    acknowledged: list[str] = []
    stop = threading.Event()

    def send_until_refused(worker: int) -> None:
        with Producer(broker=broker_process.address, timeout=2) as producer:
            for n in range(100_000):
                if stop.is_set():
                    return
                message_id = f"w{worker}-{n}"
                try:
                    producer.send(Message(topic="orders", body=b"x" * 512, message_id=message_id))
                except HalfmqError:
                    return  # the broker is stopping: this one was never acknowledged
                acknowledged.append(message_id)

    with ThreadPoolExecutor(8) as pool:
        senders = [pool.submit(send_until_refused, w) for w in range(8)]
        wait_until(lambda: len(acknowledged) > 500, timeout=30)
        assert broker_process.terminate() == 0
        stop.set()
        for sender in senders:
            sender.result()
    stored = {m for (m,) in query(broker_process.data_dir, "SELECT message_id FROM messages WHERE topic = 'orders'")}
    assert set(acknowledged) <= stored


class KnownOutcomes(TransactionListener):
    """Local state: key -> intended outcome, recorded before the half message is sent.

    Keys ending in "u" answer UNKNOWN first and leave the outcome to the broker's checks.
    """

    def __init__(self) -> None:
        self.intent: dict[str, LocalTransactionState] = {}

    def execute_local_transaction(self, msg, arg):
        key = msg.keys[0]
        return LocalTransactionState.UNKNOWN if key.endswith("u") else self.intent[key]

    def check_local_transaction(self, msg):
        return self.intent.get(msg.keys[0], LocalTransactionState.ROLLBACK)


@pytest.mark.slow
def test_a_broker_killed_repeatedly_under_load_loses_and_duplicates_nothing(broker_process):
    # 8 threads over 2 producers: concurrent transactions of one producer share batched calls.
    total, producers, threads, kills = 3000, 2, 8, 5
    listener = KnownOutcomes()
    for i in range(total):
        kind = ("c", "r", "u")[i % 3]
        key = f"k{i:05d}{kind}"
        commit = kind == "c" or (kind == "u" and i % 2 == 0)
        listener.intent[key] = LocalTransactionState.COMMIT if commit else LocalTransactionState.ROLLBACK
    keys = list(listener.intent)
    acknowledged: dict[str, TransactionState | None] = {}
    failed: list[str] = []
    done = threading.Event()
    killed: list[float] = []

    def killer() -> None:
        rng = random.Random(7)
        for _ in range(kills):
            if done.wait(rng.uniform(0.2, 0.5)):
                return
            broker_process.kill()
            killed.append(time.monotonic())
            broker_process.start()

    def produce(producer: RocketMQTransactionProducer, share: list[str]) -> None:
        for key in share:
            try:
                result = producer.send_message_in_transaction(Message(topic="orders", body=key.encode(), keys=[key]))
                acknowledged[key] = result.state
            except HalfmqError as exc:
                failed.append(f"{key}: {exc!r}")

    sdk = [
        RocketMQTransactionProducer(group="load", broker=broker_process.address, listener=listener, timeout=30)
        for _ in range(producers)
    ]
    kill_thread = threading.Thread(target=killer)
    kill_thread.start()
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(threads) as pool:
            for future in [pool.submit(produce, sdk[n % producers], keys[n::threads]) for n in range(threads)]:
                future.result()
        done.set()
        kill_thread.join()
        elapsed = time.monotonic() - started
        data_dir = broker_process.data_dir
        wait_until(lambda: query(data_dir, "SELECT COUNT(*) FROM transactions WHERE state = 'PENDING'") == [(0,)], 60)
    finally:
        done.set()
        for producer in sdk:
            producer.close()
    print(f"{total} transactions, {len(killed)} SIGKILLs in {elapsed:.1f}s; {len(failed)} sends failed {failed[:3]}")
    assert len(killed) >= 3, "the broker was not killed during the load"

    topic = Counter(body.decode() for (body,) in query(data_dir, "SELECT body FROM messages WHERE topic = 'orders'"))
    assert all(n == 1 for n in topic.values()), "a committed message appears twice"
    acked_commits = {k for k, s in acknowledged.items() if s is TransactionState.COMMITTED}
    assert acked_commits <= set(topic), "an acknowledged commit was lost"
    intended = {k for k, s in listener.intent.items() if s is LocalTransactionState.COMMIT}
    assert set(topic) <= intended, "a rolled-back message is readable"
    prepared = {key for (key,) in query(data_dir, "SELECT json_extract(keys, '$[0]') FROM transactions")}
    assert set(topic) == prepared & intended, "a prepared transaction was resolved against its local outcome"
    states = dict(query(data_dir, "SELECT state, COUNT(*) FROM transactions GROUP BY state"))
    assert "DISCARDED" not in states
    max_checks = query(data_dir, "SELECT MAX(check_times) FROM transactions")[0][0]
    assert max_checks <= 5
    assert len(acknowledged) + len(failed) == total


@pytest.mark.slow
def test_a_broker_killed_during_exactly_once_batches_loses_and_duplicates_nothing(broker_process):
    """The Spark sink's protocol from one client, as a query restarted after each failure does
    it: prepare a batch's tables as open ranges, end it; on any failure, prepare the whole batch
    again (fresh message ids) and end it again. The broker is SIGKILLed meanwhile, in prepares
    and in ends alike."""
    tables, rows, kills = 3, 300, 5
    group = "spark-crash"
    killed = threading.Event()
    retried: list[int] = []
    restarts: list[float] = []

    def killer() -> None:
        rng = random.Random(11)
        try:
            for _ in range(kills):
                time.sleep(rng.uniform(0.3, 0.9))
                broker_process.kill()
                broker_process.start()
                restarts.append(time.monotonic())
        finally:
            killed.set()  # a restart that failed ends the batches too, and the count below says so

    def batch_tables(batch: int) -> list[pa.Table]:
        return [pa.table({"body": [f"b{batch}-t{t}-r{r}".encode() for r in range(rows)]}) for t in range(tables)]

    kill_thread = threading.Thread(target=killer)
    kill_thread.start()
    batches = 0
    try:
        with BrokerClient(Connection(broker_process.address), timeout=30) as client:
            while not killed.is_set():  # batches until the last kill, then one more
                batch, batches = batches, batches + 1
                while True:
                    try:
                        ranges = [
                            r
                            for table in batch_tables(batch)
                            for r in client.prepare_table(group, batch, "orders", table)
                        ]
                        client.end_batch(group, batch, ranges, commit=True)
                        break
                    except HalfmqError:
                        retried.append(batch)
    finally:
        kill_thread.join()
    # Batches run until the last restart, so every kill fell among them; a call in flight may
    # fail (its batch is retried) or wait for the restarted broker.
    print(f"{batches} batches, {len(restarts)} SIGKILLs, batches retried: {retried}")
    assert len(restarts) == kills, "the broker was not killed during the batches"
    data_dir = broker_process.data_dir
    with PullConsumer(group="check", broker=broker_process.address) as consumer:
        published: Counter[bytes] = Counter()
        for queue, (low, high) in consumer.queue_offsets("orders").items():
            offset = low
            while offset < high:
                pulled = consumer.pull("orders", queue_id=queue, offset=offset, max_messages=1024)
                published.update(m.body for m in pulled.messages)
                offset = pulled.next_offset
    expected = Counter(body for b in range(batches) for table in batch_tables(b) for body in table["body"].to_pylist())
    assert published == expected, "every row of every batch once"
    assert query(data_dir, "SELECT COUNT(*) FROM open_ranges") == [(0,)]
    assert query(data_dir, "SELECT COUNT(*), SUM(messages) FROM committed_batches") == [
        (batches, batches * tables * rows)
    ]


@pytest.mark.slow
def test_a_broker_killed_during_kafka_model_commits_leaves_each_transaction_all_or_none(tmp_path):
    """Four transactional producers commit transactions of six messages over two topics while
    the broker is SIGKILLed and restarted four times. A producer whose call fails for good is
    replaced by a new one with the same transactional id (which aborts what the old one left)."""
    broker = BrokerProcess(tmp_path / "data", "--topic", "payments:3", "--topic", "audit:2")
    broker.start()
    producers, size, kills = 4, 6, 4
    killed = threading.Event()
    acknowledged: set[str] = set()
    attempted: list[str] = []
    replaced: list[str] = []

    def killer() -> None:
        rng = random.Random(7)
        for _ in range(kills):
            time.sleep(rng.uniform(0.4, 1.0))
            broker.kill()
            broker.start()
        time.sleep(0.5)
        killed.set()

    def produce(n: int) -> None:
        transactional_id = f"load-{n}"
        producer = KafkaTransactionProducer(transactional_id=transactional_id, broker=broker.address, timeout=30)
        serial = 0
        while not killed.is_set():
            serial += 1
            name = f"{transactional_id}/{serial}"
            attempted.append(name)
            try:
                with producer.transaction():
                    for i in range(size):
                        producer.send(Message(topic=("payments", "audit")[i % 2], body=f"{name}/{i}".encode()))
                acknowledged.add(name)
            except HalfmqError:
                replaced.append(name)
                producer.close()
                producer = KafkaTransactionProducer(
                    transactional_id=transactional_id, broker=broker.address, timeout=30
                )
        producer.close()

    try:
        with ThreadPoolExecutor(producers + 1) as pool:
            for future in [pool.submit(killer), *(pool.submit(produce, n) for n in range(producers))]:
                future.result()
        published: Counter[bytes] = Counter()
        with PullConsumer(group="check", broker=broker.address) as consumer:
            for topic in ("payments", "audit"):
                for queue, (low, _) in consumer.queue_offsets(topic).items():
                    offset = low
                    while (
                        pulled := consumer.pull(topic, queue_id=queue, offset=offset, max_messages=1024)
                    ).next_offset > offset:
                        published.update(m.body for m in pulled.messages)
                        offset = pulled.next_offset
        restarts = broker.log.read_text().count("serving gRPC") - 1
        open_ranges = query(broker.data_dir, "SELECT COUNT(*) FROM open_ranges")
    finally:
        broker.stop()
    print(f"{len(attempted)} transactions, {len(acknowledged)} acknowledged, {restarts} SIGKILLs, replaced: {replaced}")
    assert restarts == kills
    assert set(published.values()) <= {1}, "no message twice"
    per_txn = Counter(body.decode().rsplit("/", 1)[0] for body in published)
    assert set(per_txn.values()) <= {size}, "every transaction all or none"
    assert acknowledged <= set(per_txn), "every acknowledged commit visible"
    assert open_ranges == [(0,)]
