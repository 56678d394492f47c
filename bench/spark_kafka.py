"""Spark's own Kafka connector beside halfmq's data source, side by side in one run, on the same
rows, against Apache Kafka (the conformance harness's, ``halfmq_peers.kafka``):

- publish: halfmq's exactly-once sink (``format("halfmq")``), and Spark's Kafka sink (at least
  once) into halfmq's Kafka port and into Apache Kafka;
- ingest: ``format("halfmq")`` reading what its sink published, and Spark's Kafka source reading
  what the Kafka sink published, over halfmq's Kafka port and over Apache Kafka.

    .venv/bin/python -m bench.spark_kafka --rows 200000 --body 1024 --rounds 3

The input is ``--files`` Parquet files of ``--rows`` rows (a body of ``--body`` bytes and a key
each), published as a stream, one file per micro-batch, to a fresh topic of 4 partitions on each
side; each topic is then read whole by a streaming query (``availableNow``, ``noop`` sink). Round 0
warms the JVM and the workers and is not recorded; then ``--rounds`` rounds, each way in turn, in
an order that turns by one each round (``rotated``), so that over a multiple of 3 rounds each way
publishes first, and reads first, equally often.
Spark runs ``local[2]``; the broker flushes as Kafka does by default (``--flush async``, left to
the OS), so both keep what they acknowledged in the page cache. The reads of a round start once
both brokers are idle: halfmq's packer packs what was published after the publishing query ends
(Apache Kafka has no such work left), so the round first waits for it, and prints how long.

Goals: halfmq's source at least 1.0x Spark's Kafka source on Apache Kafka; halfmq's exactly-once
sink at least 0.5x Spark's Kafka sink into Apache Kafka.

Beside the rates, what shows where the time went: for each publish, the CPU the receiving broker
used (its process, from ``/proc``) and the bytes it wrote (its write calls: files and sockets)
per byte of the bodies published; for each read, the query's time outside its triggers
(starting the query, and, for a Python data source, Spark's streaming source runner).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # exported untyped

from bench._spark import local_session
from bench.delays import cpu_seconds
from bench.fresh_backlog import wait_packed
from bench.spark_ingest import Read, halfmq_read, stream_read
from bench.spark_sink import write_input
from bench.txn import start_broker
from halfmq_peers.jvm import free_port
from halfmq_peers.kafka import SPARK_CONNECTOR, Kafka

PARTITIONS = 4
PUBLISH = ("halfmq exactly-once", "kafka sink -> halfmq", "kafka sink -> Apache Kafka")
INGEST = ("halfmq source", "kafka source <- halfmq", "kafka source <- Apache Kafka")


def rotated(ways: tuple[str, ...], n: int) -> tuple[str, ...]:
    """The ways in round ``n``'s order: each goes first in turn. The first query after another
    kind of work pays for the session's changing over (idle Python workers replaced, the JVM's
    memory and compiled code for the new work), seconds at 1,000,000 rows."""
    return ways[n % len(ways) :] + ways[: n % len(ways)]


@dataclass(frozen=True)
class Usage:
    """CPU seconds and bytes written (``wchar``: files and sockets) of a broker's processes."""

    cpu: float
    written: int

    @classmethod
    def of(cls, pids: list[int]) -> Usage:
        lines = [line for pid in pids for line in Path(f"/proc/{pid}/io").read_text().splitlines()]
        written = sum(int(line.split()[1]) for line in lines if line.startswith("wchar:"))
        return cls(sum(cpu_seconds(pid) for pid in pids), written)

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.cpu - other.cpu, self.written - other.written)


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result()


def publish(spark: Any, source: Path, work: Path, topic: str, *, address: str | None, bootstrap: str | None) -> float:
    """Publish the input to ``topic`` through halfmq's sink (``address``) or Spark's Kafka sink
    (``bootstrap``); wall-clock seconds to the query's end."""
    frame = spark.readStream.schema("body binary, keys string").option("maxFilesPerTrigger", 1).parquet(str(source))
    if address is not None:
        writer = (frame.writeStream.format("halfmq").option("broker", address).option("topic", topic)
                  .option("deliveryGuarantee", "exactly-once"))  # fmt: skip
    else:
        writer = (frame.selectExpr("keys as key", "body as value").writeStream.format("kafka")
                  .option("kafka.bootstrap.servers", bootstrap).option("topic", topic))  # fmt: skip
    began = time.perf_counter()
    query = writer.option("checkpointLocation", str(work / f"publish-{topic}")).trigger(availableNow=True).start()
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return time.perf_counter() - began


def kafka_ingest(spark: Any, bootstrap: str, topic: str, work: Path) -> Read:
    def stream() -> Any:
        frame = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        frame = frame.option("subscribe", topic).option("startingOffsets", "earliest")
        return frame.option("kafka.isolation.level", "read_committed").load()

    return stream_read(stream, work / f"ingest-{bootstrap.replace(':', '_')}-{topic}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--files", type=int, default=10, help="input files, one micro-batch each")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="halfmq-bench-spark-kafka-"))
    kafka_port = free_port()
    broker, address = start_broker(work / "data", "--flush", "async", "--kafka-port", str(kafka_port))
    ours = f"127.0.0.1:{kafka_port}"
    rates: dict[str, list[float]] = {name: [] for name in (*PUBLISH, *INGEST)}
    used: dict[str, list[Usage]] = {name: [] for name in PUBLISH}
    outside: dict[str, list[float]] = {name: [] for name in INGEST}
    waits: list[float] = []
    with Kafka(work / "kafka") as kafka:
        theirs = kafka.endpoints["bootstrap"]
        spark = local_session(SPARK_CONNECTOR)
        try:
            write_input(spark, work / "input", args.rows, args.files, args.body)
            for n in range(args.rounds + 1):
                eo, ks = f"eo{n}", f"ks{n}"
                create_topic(ours, eo)
                create_topic(ours, ks)
                create_topic(theirs, ks)
                publishes: dict[str, tuple[Callable[[], float], list[int]]] = {
                    PUBLISH[0]: (partial(publish, spark, work / "input", work, eo, address=address, bootstrap=None),
                                 [broker.pid]),
                    PUBLISH[1]: (partial(publish, spark, work / "input", work, ks, address=None, bootstrap=ours),
                                 [broker.pid]),
                    PUBLISH[2]: (partial(publish, spark, work / "input", work / "theirs", ks, address=None,
                                         bootstrap=theirs), kafka.pids),
                }  # fmt: skip
                seconds: dict[str, tuple[float, Usage]] = {}
                for name in rotated(PUBLISH, n):
                    run, pids = publishes[name]
                    before = Usage.of(pids)
                    elapsed = run()
                    seconds[name] = elapsed, Usage.of(pids) - before
                packing = sum(wait_packed(work / "data", topic, args.rows, PARTITIONS) for topic in (eo, ks))
                reads: dict[str, Callable[[], Read]] = {
                    INGEST[0]: partial(halfmq_read, spark, "halfmq", address, eo),
                    INGEST[1]: partial(kafka_ingest, spark, ours, ks, work),
                    INGEST[2]: partial(kafka_ingest, spark, theirs, ks, work),
                }
                read = {name: reads[name]() for name in rotated(INGEST, n)}
                for name, done in read.items():
                    if done.rows != args.rows:
                        raise RuntimeError(f"{name} read {done.rows} rows of {args.rows}")
                if n:  # round 0 warms up
                    waits.append(packing)
                    for name, (elapsed, usage) in seconds.items():
                        rates[name].append(args.rows / elapsed)
                        used[name].append(usage)
                    for name, done in read.items():
                        rates[name].append(done.rows / done.seconds)
                        outside[name].append(done.outside)
        finally:
            spark.stop()
            broker.terminate()
            broker.wait()
    subprocess.run(["rm", "-rf", str(work)], check=False)
    print(f"config: rows={args.rows} body={args.body}B files={args.files} rounds={args.rounds} local[2]"
          f" partitions={PARTITIONS} cpus={os.cpu_count()} connector={SPARK_CONNECTOR}")  # fmt: skip
    for name, figures in rates.items():
        print(
            f"{name + ':':<30} {' / '.join(f'{r:,.0f}' for r in figures)} rows/s, mean {statistics.mean(figures):,.0f}"
        )
    body_bytes = args.rows * args.body
    for name, usages in used.items():
        cpu = " / ".join(f"{u.cpu:.1f}" for u in usages)
        written = " / ".join(f"{u.written / body_bytes:.1f}" for u in usages)
        print(f"{name + ':':<30} its broker used {cpu} s of CPU and wrote {written} bytes a body byte")
    for name, figures in outside.items():
        print(f"{name + ':':<30} {' / '.join(f'{f:.2f}' for f in figures)} s of the query outside its triggers")
    print(f"{'packing after the publishes:':<30} {' / '.join(f'{w:.1f}' for w in waits)} s before the reads")
    mean = {name: statistics.mean(figures) for name, figures in rates.items()}
    print(f"ratio halfmq source / kafka source <- Apache Kafka: {mean[INGEST[0]] / mean[INGEST[2]]:.2f} (goal: 1.0)")
    print(
        f"ratio halfmq exactly-once / kafka sink -> Apache Kafka: {mean[PUBLISH[0]] / mean[PUBLISH[2]]:.2f} (goal: 0.5)"
    )


if __name__ == "__main__":
    main()
