"""Exactly once across a crash: the example job is killed after its sink committed a batch and
before Spark recorded it; restarted from its checkpoint, it replays that batch with the same id."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from producer_sdk import Message, PullConsumer, RocketMQTransactionProducer
from spark_consumer.sink import TotalsSink
from tests.support import ScriptedListener

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parent.parent


def send_orders(address: str, count: int) -> dict[str, float]:
    expected: Counter[str] = Counter()
    with RocketMQTransactionProducer(
        group="orders-svc", broker=address, listener=ScriptedListener("COMMIT")
    ) as producer:
        for i in range(count):
            customer, amount = f"c{i % 3}", float(i + 1)
            body = json.dumps({"order": f"o-{i}", "customer": customer, "amount": amount}).encode()
            producer.send_message_in_transaction(Message(topic="orders", body=body, keys=[f"o-{i}"]))
            expected[customer] += amount
    with RocketMQTransactionProducer(
        group="orders-svc", broker=address, listener=ScriptedListener("ROLLBACK")
    ) as producer:
        body = json.dumps({"order": "o-x", "customer": "c0", "amount": 1000.0}).encode()
        producer.send_message_in_transaction(Message(topic="orders", body=body, keys=["o-x"]))
    return dict(expected)


def run_job(address: str, work: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "spark_consumer.jobs.order_totals", "--broker", address, "--topic", "orders",
        "--checkpoint", str(work / "checkpoint"), "--sink", str(work / "totals.db"), "--parquet", str(work / "parquet"),
        "--once", "--max-per-batch", "10", *extra,
    ]  # fmt: skip
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def applied_batches(work: Path) -> list[tuple[str, int]]:
    """(query id, batch id) of every applied batch, in the order they were applied."""
    with sqlite3.connect(work / "totals.db") as conn:
        return conn.execute("SELECT query_id, batch_id FROM applied_batches ORDER BY rowid").fetchall()


def amounts(work: Path) -> dict[str, float]:
    return {key: amount for key, (amount, _) in TotalsSink(work / "totals.db").totals().items()}


def batch_amounts(work: Path, batch_id: int) -> Counter[str]:
    ((query_id, _), *_) = applied_batches(work)
    table = pq.read_table(work / "parquet" / f"query_id={query_id}" / f"batch_id={batch_id}")
    totals: Counter[str] = Counter()
    for customer, amount in zip(table["customer"].to_pylist(), table["amount"].to_pylist(), strict=True):
        totals[customer] += amount
    return totals


@pytest.mark.parametrize("guarded", [True, False], ids=["with-batch-guard", "without-batch-guard"])
def test_a_crash_between_sink_commit_and_spark_commit_is_replayed_without_double_counting(broker, tmp_path, guarded):
    expected = send_orders(broker.address, 30)
    flags = () if guarded else ("--no-batch-guard",)

    crashed = run_job(broker.address, tmp_path, "--crash-after-batch", "1", *flags)
    assert crashed.returncode == 3, crashed.stderr[-3000:]
    assert [b for _, b in applied_batches(tmp_path)] == [0, 1]
    replayed_batch = batch_amounts(tmp_path, 1)

    finished = run_job(broker.address, tmp_path, *flags)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert [b for _, b in applied_batches(tmp_path)] == [0, 1, 2]
    assert len({q for q, _ in applied_batches(tmp_path)}) == 1, "a restart from the checkpoint is the same query"
    assert batch_amounts(tmp_path, 1) == replayed_batch, "the replayed batch read exactly the same messages"
    if guarded:
        assert "batch 1: already applied, skipped" in finished.stderr
        assert amounts(tmp_path) == expected
    else:
        doubled = {c: expected[c] + replayed_batch.get(c, 0) for c in expected}
        assert amounts(tmp_path) == doubled
        assert amounts(tmp_path) != expected


def test_a_query_on_a_fresh_checkpoint_applies_its_batches_although_their_ids_were_seen(broker, tmp_path):
    expected = send_orders(broker.address, 20)
    first = run_job(broker.address, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    with PullConsumer(group="test", broker=broker.address) as consumer:
        ends = {str(q): high for q, (_, high) in consumer.queue_offsets("orders").items()}
    more = send_orders(broker.address, 20)
    fresh = tmp_path / "fresh-checkpoint"
    second = run_job(broker.address, tmp_path, "--checkpoint", str(fresh), "--starting-offsets",
                     json.dumps({"orders": ends}))  # fmt: skip
    assert second.returncode == 0, second.stderr[-3000:]
    applied = applied_batches(tmp_path)
    queries = list(dict.fromkeys(q for q, _ in applied))
    assert len(queries) == 2
    assert next(b for q, b in applied if q == queries[1]) == 0, "the new query counts its batch ids from 0"
    assert "already applied, skipped" not in second.stderr
    assert amounts(tmp_path) == {c: expected[c] + more[c] for c in expected}


def test_bodies_that_are_not_order_events_are_counted_and_reported(broker, tmp_path):
    expected = send_orders(broker.address, 3)
    with RocketMQTransactionProducer(
        group="orders-svc", broker=broker.address, listener=ScriptedListener("COMMIT")
    ) as p:
        for body in (b"not json", b'{"customer": "c9"}', b'{"customer": "c9", "amount": "lots"}'):
            p.send_message_in_transaction(Message(topic="orders", body=body))
    finished = run_job(broker.address, tmp_path)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert amounts(tmp_path) == expected
    assert "3 message(s) left out: their body is not an order event" in finished.stdout
    assert "message(s) whose body is not an order event were left out, the first at orders queue" in finished.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "spark_consumer.jobs.order_totals", "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert '{"order": "o-1", "customer": "alice", "amount": 30}' in shown.stdout
