"""Spark reading a backlog right after it was written, against the same reading a backlog the
broker's packer has packed, in one run.

    .venv/bin/python -m bench.fresh_backlog --messages 200000 --rounds 2

A broker process (``--flush sync``, ``--pull-processes 2``, segments on) takes ``--messages``
1 KB messages through ``Producer.send_table``, on a topic of 4 queues. Then Spark (local[2],
Trigger.AvailableNow, noop sink) reads the topic through the ``halfmq`` source: at once ("fresh"),
or once every whole segment of the topic is packed ("packed"), on a new topic each time,
alternating, after one unrecorded round of both (JVM warm-up).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from bench._spark import local_session
from bench.spark_ingest import spark_ingest
from bench.txn import start_broker
from broker.model import MAX_PULL
from broker.store.segments import SEGMENTS_FILE
from producer_sdk import Producer

QUEUES = 4


def packed(data: Path, topic: str) -> int:
    with sqlite3.connect(f"file:{data / SEGMENTS_FILE}?mode=ro", uri=True) as conn:
        (count,) = conn.execute("SELECT COALESCE(SUM(count), 0) FROM segments WHERE topic = ?", (topic,)).fetchone()
    return int(count)


def wait_packed(data: Path, topic: str, messages: int, queues: int) -> float:
    """Wait until the packer has packed every whole segment of the ``messages`` of ``topic``
    (each queue's last, partial one stays rows); seconds waited."""
    began = time.perf_counter()
    while packed(data, topic) < messages - queues * MAX_PULL:
        time.sleep(0.05)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    table = pa.table({"body": pa.array([os.urandom(args.body)] * args.messages, pa.binary())})
    data = Path(tempfile.mkdtemp(prefix="halfmq-bench-fresh-"))
    broker, address = start_broker(data, "--flush", "sync", "--pull-processes", "2")
    spark = local_session()
    rates: dict[str, list[float]] = {"fresh": [], "packed": []}
    waits: list[float] = []
    try:
        with Producer(broker=address) as producer:
            for n in range(args.rounds + 1):
                for way in rates:
                    topic = f"{way}{n}"
                    producer.create_topic(topic, QUEUES)
                    producer.send_table(topic, table)
                    if way == "packed":
                        waits.append(wait_packed(data, topic, args.messages, QUEUES))
                    rows, seconds = spark_ingest(spark, "halfmq", address, topic)
                    assert rows == args.messages, (rows, args.messages)
                    if n:  # round 0 warms up
                        rates[way].append(rows / seconds)
    finally:
        spark.stop()
        broker.terminate()
        broker.wait()
        shutil.rmtree(data, ignore_errors=True)
    print(f"config: messages={args.messages} body={args.body}B queues={QUEUES} local[2] pull-processes=2"
          f" cpus={os.cpu_count()}")  # fmt: skip
    for way, measured in rates.items():
        figures = " / ".join(f"{r:,.0f}" for r in measured)
        print(f"{way + ':':<8} {figures} rows/s, mean {statistics.mean(measured):,.0f}")
    print(f"waited for the packer: {' / '.join(f'{w:.2f}' for w in waits)} s")
    ratio = statistics.mean(rates["fresh"]) / statistics.mean(rates["packed"])
    print(f"ratio fresh / packed: {ratio:.2f} (goal: at least 0.9)")


if __name__ == "__main__":
    main()
