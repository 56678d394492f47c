"""The ``halfmq`` Spark sink publishes exactly once (issue 13): a streaming query copies topic
``input`` to ``output`` through it (``tests/programs/spark_sink_job.py``), against a real broker
process, with the driver killed in the worst windows, a task failing, and the marker removed."""

from __future__ import annotations

import re
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
from tests.support import store_snapshot, topic_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROWS = 30  # three micro-batches of 10


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker process whose topic ``input`` holds the rows to copy."""
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


def committed_batches(broker: BrokerProcess) -> dict[int, int]:
    """batch id -> messages committed, by the sink's batch markers."""
    with sqlite3.connect(broker.data_dir / DB_FILE) as conn:
        return dict(conn.execute("SELECT batch_id, messages FROM committed_batches WHERE producer_group LIKE 'spark%'"))


def still_open(broker: BrokerProcess) -> dict[int, int]:
    """batch id -> messages prepared and neither committed nor rolled back."""
    with sqlite3.connect(broker.data_dir / DB_FILE) as conn:
        return dict(conn.execute("SELECT batch_id, SUM(end_offset - first_offset) FROM open_ranges GROUP BY 1"))


def offsets_taken(broker: BrokerProcess) -> int:
    """Offsets handed out in topic ``output``: messages committed, and rolled back (gaps)."""
    with PullConsumer(group="check", broker=broker.address) as consumer:
        return sum(high for _, high in consumer.queue_offsets("output").values())


EVERY_ROW_ONCE = Counter({b"row-%d" % i: 1 for i in range(ROWS)})


def test_three_micro_batches_are_published_once_each_and_none_is_visible_before_its_commit(pipeline, tmp_path, spark):
    visibility = tmp_path / "visibility.txt"
    done = run_job(pipeline, tmp_path, "--visibility", str(visibility))
    assert done.returncode == 0, done.stderr[-3000:]
    assert visibility.read_text().split("\n")[:-1] == [
        "0 before 0", "0 after 10", "1 before 10", "1 after 20", "2 before 20", "2 after 30",
    ]  # fmt: skip
    assert published(pipeline) == EVERY_ROW_ONCE
    assert committed_batches(pipeline) == {0: 10, 1: 10, 2: 10} and still_open(pipeline) == {}
    # A read-committed consumer downstream, the halfmq source, ingests the same rows once.
    rows = batch_reader(spark, pipeline.address, topics="output").select("body", "keys").collect()
    assert Counter(bytes(r.body) for r in rows) == EVERY_ROW_ONCE
    assert sorted(r.keys[0] for r in rows) == sorted(f"k-{i}" for i in range(ROWS)), "keys travel with the rows"


@pytest.mark.parametrize("marker", [True, False], ids=["with-marker", "without-marker"])
def test_a_driver_killed_after_the_sink_committed_replays_the_batch_without_a_duplicate(pipeline, tmp_path, marker):
    flags = () if marker else ("--group-per-run",)
    crashed = run_job(pipeline, tmp_path, "--crash", "after-commit", "--crash-batch", "1", *flags)
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    assert sum(published(pipeline).values()) == 20, "batches 0 and 1 were committed before the kill"

    finished = run_job(pipeline, tmp_path, *flags)
    assert finished.returncode == 0, finished.stderr[-3000:]
    copies = published(pipeline)
    if marker:
        assert copies == EVERY_ROW_ONCE
        assert committed_batches(pipeline) == {0: 10, 1: 10, 2: 10} and still_open(pipeline) == {}
        assert offsets_taken(pipeline) == ROWS + 10, "the replay's 10 rows took offsets, then were rolled back"
    else:  # the same test without the marker shows the duplicate it prevents
        assert sorted(copies.values()) == [1] * 20 + [2] * 10


def test_a_driver_killed_before_the_commit_leaves_an_open_batch_that_the_restart_rolls_back(pipeline, tmp_path):
    crashed = run_job(pipeline, tmp_path, "--crash", "before-commit", "--crash-batch", "1")
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    assert sum(published(pipeline).values()) == 10
    assert still_open(pipeline) == {1: 10}, "batch 1 was prepared, never committed"

    finished = run_job(pipeline, tmp_path)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert published(pipeline) == EVERY_ROW_ONCE
    assert committed_batches(pipeline) == {0: 10, 1: 10, 2: 10} and still_open(pipeline) == {}
    assert offsets_taken(pipeline) == ROWS + 10, "the dead run's batch 1 took offsets, then was rolled back"


def test_a_failed_task_attempt_leaves_no_stray_message_committed(pipeline, tmp_path):
    done = run_job(pipeline, tmp_path, "--fail-first-attempt")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "injected failure" in done.stderr, "the first attempt really failed"
    assert published(pipeline) == EVERY_ROW_ONCE
    assert offsets_taken(pipeline) > ROWS, "the failed attempt's rows were prepared, then rolled back"
    assert sum(committed_batches(pipeline).values()) == ROWS and still_open(pipeline) == {}


@pytest.mark.parametrize(
    ("columns", "options", "message"),
    [
        ("cast(id as string) as keys", {}, "needs a 'body' column"),
        ("cast(id as string) as body, id as extra", {}, "does not know column 'extra'"),
        ("id as body", {}, "column 'body' must be binary or string, not bigint"),
        ("cast(id as string) as body", {"topic": None}, "needs option 'topic' or a 'topic' column"),
        ("cast(id as string) as body", {"deliveryGuarantee": "maybe"}, "'deliveryGuarantee' must be"),
        ("cast(id as string) as body", {"topics": "orders"}, "unknown option(s) ['topics']"),
    ],
)
def test_bad_sink_options_and_columns_fail_before_anything_is_written(spark, broker, columns, options, message):
    given = {"broker": broker.address, "topic": "orders", **options}
    writer = spark.range(3).selectExpr(*columns.split(", ")).write.format("halfmq").mode("append")
    for key, value in given.items():
        writer = writer if value is None else writer.option(key, value)
    before = store_snapshot(broker.broker.settings.data_dir)
    with pytest.raises(Exception, match=re.escape(message)):
        writer.save()
    assert store_snapshot(broker.broker.settings.data_dir) == before


def test_a_batch_write_publishes_once_and_at_least_once_sends_plain_messages(spark, broker):
    rows = spark.range(40).selectExpr("concat('m-', cast(id as string)) as body", "'tag' as tags", "'orders' as topic")
    rows.write.format("halfmq").option("broker", broker.address).mode("append").save()
    rows.write.format("halfmq").option("broker", broker.address).option("deliveryGuarantee", "at-least-once").mode(
        "append"
    ).save()
    stored = topic_rows(broker.broker.settings.data_dir, "orders")
    assert Counter(body for *_, body in stored) == Counter({b"m-%d" % i: 2 for i in range(40)})
    markers = store_snapshot(broker.broker.settings.data_dir)["committed_batches"]
    assert [(group.startswith("spark-write-"), batch, messages) for group, batch, _, messages in markers] == [
        (True, 0, 40)
    ], "only the first used two-phase commit"
