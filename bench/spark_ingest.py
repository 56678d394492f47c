"""Rows per second from the broker into a Spark streaming query, beside a plain Python pull.

    .venv/bin/python -m bench.spark_ingest --messages 1000000 --body 1024

A store of committed 1 KB messages in 4 queues is built through the store's API, a broker
process serves it, and in the same run:
1. a plain Python pull of every message (one client, fetch 1024, the Spark source's own client);
2. a Spark streaming query (local[2], Trigger.AvailableNow, noop sink) over the same messages,
   with the source yielding Arrow record batches (what it ships), and the same query with a
   variant of the source that yields tuples instead, to show which is faster (run alternately,
   twice each, best run of each reported).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.txn import free_port, start
from broker.model import Message
from broker.store import Flush, Store
from spark_consumer.client import BrokerReader
from spark_consumer.options import SourceOptions
from spark_consumer.source import HalfmqDataSource, HalfmqStreamReader


async def fill(path: Path, messages: int, body: bytes, chunk: int = 512) -> None:
    store = Store(path, flush=Flush.ASYNC)
    await store.create_topic("bench", 4)
    pending = []
    for start_at in range(0, messages, chunk):
        batch = [
            (Message(topic="bench", body=body, message_id=f"m{i}"), i % 4)
            for i in range(start_at, min(start_at + chunk, messages))
        ]
        pending.append(store.append(batch, 1_800_000_000_000))
        if len(pending) >= 32:
            await asyncio.gather(*pending)
            pending = []
    await asyncio.gather(*pending)
    store.close()


def plain_pull(address: str) -> tuple[int, float]:
    count = 0
    began = time.perf_counter()
    with BrokerReader(address) as broker:
        for queue, (low, high) in broker.ranges(("bench",))["bench"].items():
            offset = low
            while offset < high:
                reply = broker.pull("bench", queue, offset, 1024)
                count += len(reply.messages)
                offset = reply.next_offset
    return count, time.perf_counter() - began


class TupleStreamReader(HalfmqStreamReader):
    """The shipped reader, but ``read`` yields one tuple per message instead of Arrow batches."""

    def read(self, partition: Any) -> Iterator[tuple[Any, ...]]:
        import datetime

        utc = datetime.UTC
        with BrokerReader(partition.broker) as broker:
            offset = partition.start
            while offset < partition.end:
                reply = broker.pull(partition.topic, partition.queue_id, offset, min(1024, partition.end - offset))
                for m in reply.messages:
                    yield (
                        m.topic, m.queue_id, m.queue_offset, m.message_id, m.transaction_id, list(m.keys), m.tags,
                        dict(m.properties), m.body, datetime.datetime.fromtimestamp(m.born_timestamp / 1000, utc),
                        datetime.datetime.fromtimestamp(m.store_timestamp / 1000, utc),
                    )  # fmt: skip
                offset = reply.next_offset


class TupleDataSource(HalfmqDataSource):
    @classmethod
    def name(cls) -> str:
        return "halfmq_tuples"

    def streamReader(self, schema: Any) -> TupleStreamReader:
        return TupleStreamReader(SourceOptions.parse(self.options, streaming=True))


def spark_ingest(spark: Any, fmt: str, address: str) -> tuple[int, float]:
    began = time.perf_counter()
    query = (
        spark.readStream.format(fmt).option("broker", address).option("topics", "bench")
        .option("startingOffsets", "earliest").load()
        .writeStream.format("noop").trigger(availableNow=True)
        .option("checkpointLocation", tempfile.mkdtemp(prefix="halfmq-bench-ckpt-")).start()
    )  # fmt: skip
    query.awaitTermination()
    elapsed = time.perf_counter() - began
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    return rows, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--body", type=int, default=1024)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="halfmq-bench-ingest-"))
    began = time.perf_counter()
    asyncio.run(fill(data, args.messages, os.urandom(args.body)))
    print(f"built a store of {args.messages:,} messages x {args.body} B in {time.perf_counter() - began:.0f}s")

    port = free_port()
    broker = start(
        [
            sys.executable,
            "-m",
            "broker",
            "--data-dir",
            str(data),
            "--grpc-port",
            str(port),
            "--http-port",
            "0",
            "--rocketmq-port",
            "0",
        ],
        "ready",
    )
    address = f"127.0.0.1:{port}"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import spark_consumer

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark_consumer.register(spark)
    spark.dataSource.register(TupleDataSource)
    try:
        pulled, pull_seconds = plain_pull(address)
        # Alternate the two variants and keep each one's best run, so JVM warm-up favours neither.
        runs: dict[str, list[tuple[int, float]]] = {"halfmq_tuples": [], "halfmq": []}
        for _ in range(2):
            for fmt, results in runs.items():
                results.append(spark_ingest(spark, fmt, address))
        arrow_rows, arrow_seconds = min(runs["halfmq"], key=lambda r: r[1])
        tuple_rows, tuple_seconds = min(runs["halfmq_tuples"], key=lambda r: r[1])
    finally:
        spark.stop()
        broker.terminate()
        broker.wait()
    for name, rows, seconds in (
        ("plain Python pull", pulled, pull_seconds),
        ("Spark streaming, Arrow rows", arrow_rows, arrow_seconds),
        ("Spark streaming, tuple rows", tuple_rows, tuple_seconds),
    ):
        print(f"{name + ':':<30}{rows:>10,} rows in {seconds:6.1f}s = {rows / seconds:>9,.0f} rows/s")
    print(f"ratio Spark (Arrow) / plain pull: {(arrow_rows / arrow_seconds) / (pulled / pull_seconds):.2f}")
    print(f"ratio Arrow / tuples: {(arrow_rows / arrow_seconds) / (tuple_rows / tuple_seconds):.2f}")
    subprocess.run(["rm", "-rf", str(data)], check=False)


if __name__ == "__main__":
    main()
