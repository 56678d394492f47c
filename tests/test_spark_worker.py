"""What halfmq's source and sink tasks do to the Spark Python worker process they run in: the
first task of a process freezes what the process holds, so that the full garbage collection
Spark's daemon runs after each task skips it; outside a task nothing is frozen."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from producer_sdk import Message, Producer
from tests.processes import ROOT

# Run in a process of its own, as a Spark worker is: a task's first read or write there, and the
# next one, each with Spark's task context set as Spark's worker sets it, after one without.
TASKS = """
import gc, json, sys
import pyarrow as pa
from pyspark import TaskContext
from spark_consumer.client import Connection
from spark_consumer.source import QueueSlice, read_slice
from spark_consumer.writer import SinkOptions, publish
from pyspark.sql.types import BinaryType, StructField, StructType

address, queue, end, way = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def task(number):
    if way == "read":
        part = QueueSlice(Connection(address), "orders", queue, 0, end, 4, True)
        return sum(len(batch) for batch in read_slice(part))
    options = SinkOptions.parse({"broker": address, "topic": "orders"}, StructType([StructField("body", BinaryType())]))
    rows = pa.record_batch([pa.array([b"x"] * 10, pa.binary())], names=["body"])
    return len(publish(options, iter([rows]), "spark-worker-test", number).range_ids)
seen = [(task(1), gc.get_freeze_count())]
TaskContext._setTaskContext(TaskContext())
seen += [(task(2), gc.get_freeze_count()), (task(3), gc.get_freeze_count())]
print(json.dumps(seen))
"""


@pytest.mark.parametrize("way", ["read", "write"])
def test_a_task_freezes_what_its_worker_holds_once_and_nothing_outside_a_task(broker, way):
    with Producer(broker=broker.address) as producer:
        producer.send_batch([Message(topic="orders", body=b"m") for _ in range(10)])
    (queue, (_, end)) = max(broker.run(broker.broker.messaging.queue_offsets("orders")).items())
    done = subprocess.run(
        [sys.executable, "-c", TASKS, broker.address, str(queue), str(end), way],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (outside, first), (_, after_first), (_, after_second) = json.loads(done.stdout)
    assert outside > 0, "the task did its work"
    assert first == 0, "outside a task nothing is frozen"
    assert after_first > 10_000, "the first task froze the modules it imported"
    assert after_second == after_first, "the next task froze nothing more"
