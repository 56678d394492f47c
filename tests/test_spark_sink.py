"""The ``halfmq`` Spark sink publishes exactly once (issue 13): a streaming query copies topic
``input`` to ``output`` through it (``tests/programs/spark_sink_job.py``), against a real broker
process, with the driver killed in the worst windows, a task failing, and the marker removed."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.store.base import DB_FILE
from producer_sdk import Message, Producer, PullConsumer
from tests.processes import ROOT, BrokerProcess
from tests.spark_support import batch_reader

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROWS = 30  # three micro-batches of 10


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", "--topic", "input:2", "--topic", "output:2")
    broker.start()
    with Producer(broker=broker.address) as producer:
        producer.send_batch([Message(topic="input", body=b"row-%d" % i, keys=[f"k-{i}"]) for i in range(ROWS)])
    yield broker
    broker.stop()


def run_job(broker: BrokerProcess, work: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tests.programs.spark_sink_job", broker.address, str(work / "checkpoint"), *flags]
    return subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,  # its own process group
    )


def published(broker: BrokerProcess) -> Counter[bytes]:
    """How many times each body is in topic ``output``."""
    bodies: Counter[bytes] = Counter()
    with PullConsumer(group="check", broker=broker.address) as consumer:
        for queue, (low, high) in consumer.queue_offsets("output").items():
            offset = low
            while offset < high:
                pulled = consumer.pull("output", queue_id=queue, offset=offset, max_messages=1024)
                bodies.update(m.body for m in pulled.messages)
                offset = pulled.next_offset
    return bodies


def sink_transactions(broker: BrokerProcess) -> dict[tuple[int, str], int]:
    """(batch id, state) -> how many of the sink's transactions."""
    with sqlite3.connect(broker.data_dir / DB_FILE) as conn:
        rows = conn.execute(
            "SELECT batch_id, state, COUNT(*) FROM transactions WHERE producer_group LIKE 'spark-%' GROUP BY 1, 2"
        ).fetchall()
    return {(batch, state): count for batch, state, count in rows}


def states(broker: BrokerProcess) -> Counter[str]:
    totals: Counter[str] = Counter()
    for (_, state), count in sink_transactions(broker).items():
        totals[state] += count
    return totals


EVERY_ROW_ONCE = Counter({b"row-%d" % i: 1 for i in range(ROWS)})


def test_three_micro_batches_are_published_once_each_and_none_is_visible_before_its_commit(broker, tmp_path, spark):
    visibility = tmp_path / "visibility.txt"
    done = run_job(broker, tmp_path, "--visibility", str(visibility))
    assert done.returncode == 0, done.stderr[-3000:]
    assert visibility.read_text().split("\n")[:-1] == [
        "0 before 0", "0 after 10", "1 before 10", "1 after 20", "2 before 20", "2 after 30",
    ]  # fmt: skip
    assert published(broker) == EVERY_ROW_ONCE
    assert states(broker) == {"COMMITTED": ROWS}
    # A read-committed consumer downstream, the halfmq source, ingests the same rows once.
    rows = batch_reader(spark, broker.address, topics="output").select("body", "keys").collect()
    assert Counter(bytes(r.body) for r in rows) == EVERY_ROW_ONCE
    assert sorted(r.keys[0] for r in rows) == sorted(f"k-{i}" for i in range(ROWS)), "keys travel with the rows"


@pytest.mark.parametrize("marker", [True, False], ids=["with-marker", "without-marker"])
def test_a_driver_killed_after_the_sink_committed_replays_the_batch_without_a_duplicate(broker, tmp_path, marker):
    flags = () if marker else ("--no-marker",)
    crashed = run_job(broker, tmp_path, "--crash", "after-commit", "--crash-batch", "1", *flags)
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    assert sum(published(broker).values()) == 20, "batches 0 and 1 were committed before the kill"

    finished = run_job(broker, tmp_path, *flags)
    assert finished.returncode == 0, finished.stderr[-3000:]
    copies = published(broker)
    if marker:
        assert copies == EVERY_ROW_ONCE
        assert sink_transactions(broker)[(1, "ROLLED_BACK")] == 10, "the replay's half messages were rolled back"
        assert "PENDING" not in states(broker)
    else:  # the same test without the marker shows the duplicate it prevents
        assert sorted(copies.values()) == [1] * 20 + [2] * 10


def test_a_driver_killed_before_the_commit_leaves_half_messages_that_the_restart_rolls_back(broker, tmp_path):
    crashed = run_job(broker, tmp_path, "--crash", "before-commit", "--crash-batch", "1")
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    assert sum(published(broker).values()) == 10
    assert sink_transactions(broker)[(1, "PENDING")] == 10, "batch 1 was prepared, never committed"

    finished = run_job(broker, tmp_path)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert published(broker) == EVERY_ROW_ONCE
    transactions = sink_transactions(broker)
    assert transactions[(1, "ROLLED_BACK")] == 10 and transactions[(1, "COMMITTED")] == 10
    assert "PENDING" not in states(broker)


def test_a_failed_task_attempt_leaves_no_stray_half_message_committed(broker, tmp_path):
    done = run_job(broker, tmp_path, "--fail-first-attempt")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "injected failure" in done.stderr, "the first attempt really failed"
    assert published(broker) == EVERY_ROW_ONCE
    transactions = sink_transactions(broker)
    assert transactions.get((0, "ROLLED_BACK"), 0) > 0, "the failed attempt's rows were prepared, then rolled back"
    assert states(broker)["COMMITTED"] == ROWS and "PENDING" not in states(broker)
