"""Rows per second from the broker into Spark, beside what bounds it, all in one run.

    .venv/bin/python -m bench.spark_ingest --messages 1000000 --body 1024 --pull-processes 2

A store of committed 1 KB messages in 4 queues is built through the store's API. A broker
process serves it with ``--pull-processes`` pull processes beside it, twice: first with
``--segments off`` (every pull reads rows), then with the default (the packer packs the store
into segments, timed, then pulls from a segment's start send it as stored). Each time:
1. the columnar pull (``PullColumns``, fetch 1024) of every message into Arrow batches, the four
   queues in parallel (a thread and a channel each), as Spark's tasks read them: from the
   broker's own port, and from the pull processes (the queues spread over them);
2. Spark (local[2], Trigger.AvailableNow, noop sink) through the ``halfmq`` source, which reads
   from the pull processes, and through a variant of it that reads from the broker's own port;
3. the ceiling: the same query over a source with the same partitions that yields prebuilt Arrow
   batches and does no I/O at all.
With rows only, also the old row pull (``Pull``, fetch 1024) of every message by one client.
With segments, also: the source against a server that reads nothing and answers every pull with
one prebuilt reply (the cost of the path from the socket to Spark); Spark reading the same rows
from a local Parquet file (written from the first columnar pull); and transaction traffic on the
same broker (bench/txn.py's shared-async shape, 64 in flight), alone and while a Spark ingest of
every message runs through either way, with the ratios.
Spark figures are the best of two runs, run alternately, so JVM warm-up favours none.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench._spark import local_session
from bench.charts import bars
from bench.txn import Listener, run_shape, start, start_broker
from broker.model import MAX_PULL, Message
from broker.store import Flush, Store
from broker.store.segments import SEGMENTS_FILE
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_testing import free_port
from producer_sdk.columns import ARROW_SCHEMA, record_batch
from spark_consumer import offsets as off
from spark_consumer.client import BrokerClient, Connection
from spark_consumer.options import SourceOptions
from spark_consumer.source import HalfmqDataSource, HalfmqStreamReader, QueueSlice, slices


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


def row_pull(address: str) -> tuple[int, float]:
    count = 0
    began = time.perf_counter()
    with BrokerClient(Connection(address)) as broker:
        for queue, (low, high) in broker.ranges(("bench",))["bench"].items():
            offset = low
            while offset < high:
                reply = broker.pull("bench", queue, offset, 1024)
                count += len(reply.messages)
                offset = reply.next_offset
    return count, time.perf_counter() - began


def columnar_pull(address: str, readers: list[str], parquet: Path | None = None) -> tuple[int, float]:
    """Every message as Arrow batches, the queues pulled in parallel (one thread and channel
    each), spread in turn over ``readers``; with ``parquet``, also written there (not timed then).
    Without, each batch is dropped once made, as a consumer would: holding a gigabyte of them
    costs the client fresh memory for every reply."""

    def pull_queue(queue: int, low: int, high: int) -> list[pa.RecordBatch]:
        """The source's way: the next range asked for before the last one is turned into Arrow.
        Returns the batches, kept for ``parquet`` only."""
        batches = []
        with BrokerClient(Connection(readers[queue % len(readers)])) as broker:
            offset = low
            pending = broker.pull_columns_ahead("bench", queue, offset, min(1024, high - offset))
            while pending is not None:
                reply = pending()
                count = min(reply.count, high - offset)  # a replayed reply is the same whatever the offset
                offset += count
                pending = (
                    broker.pull_columns_ahead("bench", queue, offset, min(1024, high - offset))
                    if offset < high
                    else None
                )
                batch = record_batch("bench", queue, reply).slice(0, count)
                if parquet is not None:
                    batches.append(batch)
                counted[queue] = counted.get(queue, 0) + batch.num_rows
        return batches

    counted: dict[int, int] = {}
    with BrokerClient(Connection(address)) as broker:
        ranges = broker.ranges(("bench",))["bench"]
    began = time.perf_counter()
    with ThreadPoolExecutor(len(ranges)) as pool:
        pulled = [b for batches in pool.map(lambda q: pull_queue(q, *ranges[q]), ranges) for b in batches]
    elapsed = time.perf_counter() - began
    if parquet is not None:
        pq.write_table(pa.Table.from_batches(pulled, ARROW_SCHEMA), parquet)
    return sum(counted.values()), elapsed


TXN_SECONDS = 10
# The Spark runs from segments, alternated: the source through the pull processes, through the
# broker's port, and from a server that replays one prebuilt reply; the no-I/O ceiling, and Parquet.
SPARK_RUNS = ("halfmq", "halfmq_direct", "replay", "halfmq_ceiling", "parquet")


class CeilingStreamReader(HalfmqStreamReader):
    """The shipped reader's planning (same offsets, same partitions), but ``read`` yields prebuilt
    Arrow batches of the same shape and does no I/O: what any Python source can reach here."""

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        body = b"x" * 1024
        batch = pa.RecordBatch.from_pylist(
            [{"topic": "bench", "queue_id": partition.queue_id, "queue_offset": i, "message_id": f"m{i}",
              "transaction_id": "", "keys": [], "tags": "", "properties": [], "body": body,
              "born_timestamp": 0, "store_timestamp": 0} for i in range(1024)],
            schema=ARROW_SCHEMA,
        )  # fmt: skip
        for at in range(partition.start, partition.end, 1024):
            yield batch.slice(0, min(1024, partition.end - at))


class DirectStreamReader(HalfmqStreamReader):
    """The shipped reader, but every slice reads from the broker's own port."""

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[QueueSlice]:
        return slices(self._options, off.from_json(start), off.from_json(end), (self._options.connection,))


class DirectDataSource(HalfmqDataSource):
    @classmethod
    def name(cls) -> str:
        return "halfmq_direct"

    def streamReader(self, schema: Any) -> DirectStreamReader:
        return DirectStreamReader(SourceOptions.parse(self.options, streaming=True))


class CeilingDataSource(HalfmqDataSource):
    @classmethod
    def name(cls) -> str:
        return "halfmq_ceiling"

    def streamReader(self, schema: Any) -> CeilingStreamReader:
        return CeilingStreamReader(SourceOptions.parse(self.options, streaming=True))


@dataclass(frozen=True)
class Read:
    rows: int
    seconds: float  # from building the stream to the query's end
    outside: float  # of those, the seconds outside the query's triggers


def stream_read(stream: Callable[[], Any], checkpoint: Path) -> Read:
    """Read the stream ``stream()`` builds (from the earliest offsets) whole by a streaming query
    (``availableNow``, ``noop`` sink); raises if the query fails."""
    began = time.perf_counter()
    query = (
        stream().writeStream.format("noop").trigger(availableNow=True)
        .option("checkpointLocation", str(checkpoint)).start()
    )  # fmt: skip
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    seconds = time.perf_counter() - began
    triggers = sum(p["durationMs"]["triggerExecution"] for p in query.recentProgress) / 1000
    return Read(sum(p["numInputRows"] for p in query.recentProgress), seconds, seconds - triggers)


def halfmq_read(spark: Any, fmt: str, address: str, topic: str = "bench") -> Read:
    """A topic read whole through the data source ``fmt`` (``halfmq`` or a variant of it)."""

    def stream() -> Any:
        return (spark.readStream.format(fmt).option("broker", address).option("topics", topic)
                .option("startingOffsets", "earliest").load())  # fmt: skip

    return stream_read(stream, Path(tempfile.mkdtemp(prefix="halfmq-bench-ckpt-")))


def spark_ingest(spark: Any, fmt: str, address: str, topic: str = "bench") -> tuple[int, float]:
    read = halfmq_read(spark, fmt, address, topic)
    return read.rows, read.seconds


def start_replay(address: str, data: Path) -> tuple[subprocess.Popen[bytes], str]:
    """bench._replay_server, answering with the broker's own first reply of queue 0 and its offsets."""
    with BrokerClient(Connection(address)) as broker:
        (data / "reply.bin").write_bytes(broker.pull_columns("bench", 0, 0, 1024).SerializeToString())
        ranges = broker.ranges(("bench",))["bench"]
    queues = [pb.QueueOffsets(queue_id=q, min_offset=low, max_offset=high) for q, (low, high) in ranges.items()]
    (data / "offsets.bin").write_bytes(pb.GetQueueOffsetsResponse(queues=queues).SerializeToString())
    port = free_port()
    server = start([sys.executable, "-m", "bench._replay_server", str(port), str(data / "reply.bin"),
                    str(data / "offsets.bin")], "ready")  # fmt: skip
    return server, f"127.0.0.1:{port}"


def parquet_read(spark: Any, path: Path) -> tuple[int, float]:
    began = time.perf_counter()
    frame = spark.read.parquet(str(path))
    frame.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - began
    return frame.count(), elapsed


def wait_packed(data: Path, messages: int) -> float:
    """Seconds until the broker's packer has packed every whole segment of the bench topic (all
    but each queue's tail, short of MAX_PULL messages)."""
    began = time.perf_counter()
    while True:
        with sqlite3.connect(f"file:{data / SEGMENTS_FILE}?mode=ro", uri=True) as conn:
            (packed,) = conn.execute("SELECT COALESCE(SUM(count), 0) FROM segments").fetchone()
        if packed > messages - 4 * MAX_PULL:
            return time.perf_counter() - began
        time.sleep(0.05)


def spark_runs(spark: Any, runs: tuple[str, ...], address: str, replay: str, parquet: Path) -> dict[str, Any]:
    """The best of two runs of each, run alternately, so JVM warm-up favours none."""
    results: dict[str, list[tuple[int, float]]] = {name: [] for name in runs}
    for _ in range(2):
        for name in runs:
            if name == "parquet":
                results[name].append(parquet_read(spark, parquet))
            else:
                results[name].append(
                    spark_ingest(spark, *(("halfmq", replay) if name == "replay" else (name, address)))
                )
    return {name: min(found, key=lambda r: r[1]) for name, found in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--pull-processes", type=int, default=2)
    parser.add_argument("--chart", type=Path, help="draw Spark's rows/s, each way, to this PNG file")
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="halfmq-bench-ingest-"))
    began = time.perf_counter()
    asyncio.run(fill(data, args.messages, os.urandom(args.body)))
    print(f"built a store of {args.messages:,} messages x {args.body} B in {time.perf_counter() - began:.0f}s")
    parquet = data / "bench.parquet"
    spark = local_session()
    spark.dataSource.register(CeilingDataSource)
    spark.dataSource.register(DirectDataSource)
    body = os.urandom(args.body)
    pulls = ("--pull-processes", str(args.pull_processes))
    named: dict[str, dict[str, tuple[int, float]]] = {}
    try:
        broker, address = start_broker(data, "--segments", "off", *pulls)
        try:
            with BrokerClient(Connection(address)) as client:
                readers = [connection.broker for connection in client.readers("bench")]
            rows = row_pull(address)
            named["rows"] = {"columnar": columnar_pull(address, [address], parquet),
                             "columnar_split": columnar_pull(address, readers), "row": rows}  # fmt: skip
            named["rows"] |= spark_runs(spark, ("halfmq", "halfmq_direct", "halfmq_ceiling"), address, "", parquet)
        finally:
            broker.terminate()
            broker.wait()
        broker, address = start_broker(data, *pulls)
        try:
            packing = wait_packed(data, args.messages)
            with BrokerClient(Connection(address)) as client:
                readers = [connection.broker for connection in client.readers("bench")]
            named["segments"] = {"columnar": columnar_pull(address, [address]),
                                 "columnar_split": columnar_pull(address, readers)}  # fmt: skip
            replay_server, replay = start_replay(address, data)
            named["segments"] |= spark_runs(spark, SPARK_RUNS, address, replay, parquet)
            replay_server.terminate()
            txn_alone = run_shape("shared-async", address, 64, TXN_SECONDS, body, Listener(0.0))
            during: dict[str, tuple[dict[str, float], tuple[int, float]]] = {}
            for source in ("halfmq_direct", "halfmq"):
                with ThreadPoolExecutor(1) as pool:
                    ingest = pool.submit(spark_ingest, spark, source, address)
                    txn = run_shape("shared-async", address, 64, TXN_SECONDS, body, Listener(0.0))
                    during[source] = txn, ingest.result()
        finally:
            broker.terminate()
            broker.wait()
    finally:
        spark.stop()
    split = f"{len(readers)} pull process(es)" if args.pull_processes else "the broker's port again"
    labels = {
        "row": "old row pull",
        "columnar": "columnar pull, broker's port",
        "columnar_split": f"columnar pull, {split}",
        "halfmq_direct": "Spark via halfmq, broker's port",
        "halfmq": f"Spark via halfmq, {split}",
        "replay": "Spark via halfmq, a server replaying one reply",
        "halfmq_ceiling": "Spark, no-I/O Python source",
        "parquet": "Spark from Parquet",
    }
    rate = {
        (phase, name): count / seconds for phase, results in named.items() for name, (count, seconds) in results.items()
    }
    print(f"packed {args.messages:,} messages into segments in {packing:.1f}s after the broker's start"
          f" ({args.messages / packing:,.0f} msg/s)")  # fmt: skip
    for phase, results in named.items():
        print(f"--- read from {phase}" + (" (--segments off)" if phase == "rows" else " (the default)"))
        for name, (count, seconds) in results.items():
            print(f"{labels[name] + ':':<50}{count:>10,} rows in {seconds:6.1f}s = {rate[phase, name]:>10,.0f} rows/s")
        for name in ("halfmq_direct", "halfmq"):
            print(f"ratio {labels[name]} / no-I/O ceiling: {rate[phase, name] / rate[phase, 'halfmq_ceiling']:.2f}")
    print("--- segments / rows, same run")
    for name in ("columnar", "columnar_split", "halfmq_direct", "halfmq"):
        print(f"{labels[name] + ':':<50}{rate['segments', name] / rate['rows', name]:.2f}")
    print(f"Spark via halfmq / Parquet: {rate['segments', 'halfmq'] / rate['segments', 'parquet']:.2f}")
    latency = f"p50 {txn_alone['p50_ms']:.1f} ms, p99 {txn_alone['p99_ms']:.1f} ms"
    print(f"transactions alone: {txn_alone['tps']:,.0f} txn/s, {latency}")
    for name, (txn, (count, seconds)) in during.items():
        how = "from the broker's port" if name == "halfmq_direct" else f"from {split}"
        latency = f"p50 {txn['p50_ms']:.1f} ms, p99 {txn['p99_ms']:.1f} ms"
        print(f"transactions during a Spark ingest {how}: {txn['tps']:,.0f} txn/s, {latency};"
              f" ratio to alone {txn['tps'] / txn_alone['tps']:.2f}; ingest {count / seconds:,.0f} rows/s")  # fmt: skip
    if args.chart:
        spark_ways = [("segments", name) for name in ("halfmq_direct", "halfmq", "replay", "halfmq_ceiling", "parquet")]
        spark_ways.insert(1, ("rows", "halfmq_direct"))
        bars(
            args.chart,
            f"Spark ingest, local[2], {args.messages:,} x {args.body} B, {os.cpu_count()} cores",
            "rows per second",
            {
                labels[name] + (" (--segments off)" if phase == "rows" else ""): rate[phase, name]
                for phase, name in spark_ways
            },
        )
        print(f"chart: {args.chart}")
    subprocess.run(["rm", "-rf", str(data)], check=False)


if __name__ == "__main__":
    main()
