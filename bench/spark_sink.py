"""Rows per second a Spark streaming query publishes through the ``halfmq`` sink, exactly once
against at least once (plain sends) and against the same query writing Parquet files, in the
same run.

    .venv/bin/python -m bench.spark_sink --rows 200000 --body 1024 --rounds 2

The input is ``--files`` Parquet files of ``--rows`` rows in all (a body of ``--body`` bytes and
a key each), read as a stream one file per micro-batch. The same query writes them to a broker
process (``--flush sync``) with ``deliveryGuarantee`` ``exactly-once`` (``PrepareColumns`` open ranges per task,
one EndBatch per micro-batch) and ``at-least-once`` (``SendColumns`` per task), and to Parquet
files in a local folder, alternately,
``--rounds`` times each, after one unrecorded round of both (the JVM's and the workers' warm-up
would otherwise count against whichever runs first), each run on a fresh checkpoint and topic.
Spark runs ``local[2]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._spark import local_session
from bench.txn import start_broker
from producer_sdk import Producer

GUARANTEES = ("exactly-once", "at-least-once", "parquet")


def write_input(spark: Any, path: Path, rows: int, files: int, body: int) -> None:
    frame = spark.range(rows).selectExpr(
        f"cast(concat(cast(id as string), ':', repeat('x', {body})) as binary) as body",
        "concat('k-', cast(id as string)) as keys",
    )
    frame.repartition(files).write.parquet(str(path))


def publish(spark: Any, address: str, source: Path, topic: str, guarantee: str, work: Path) -> float:
    """Run the query to its end; its wall-clock seconds."""
    frame = spark.readStream.schema("body binary, keys string").option("maxFilesPerTrigger", 1).parquet(str(source))
    began = time.perf_counter()
    if guarantee == "parquet":
        writer = frame.writeStream.format("parquet").option("path", str(work / f"out-{topic}"))
    else:
        writer = (
            frame.writeStream.format("halfmq")
            .option("broker", address)
            .option("topic", topic)
            .option("deliveryGuarantee", guarantee)
        )
    query = writer.option("checkpointLocation", str(work / f"checkpoint-{topic}")).trigger(availableNow=True).start()
    query.awaitTermination()
    seconds = time.perf_counter() - began
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--files", type=int, default=10, help="input files, one micro-batch each")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="halfmq-bench-sink-"))
    broker, address = start_broker(work / "data", "--flush", "sync")
    spark = local_session()
    runs: dict[str, list[float]] = {g: [] for g in GUARANTEES}
    try:
        write_input(spark, work / "input", args.rows, args.files, args.body)
        with Producer(broker=address) as producer:
            for n in range(args.rounds + 1):
                for guarantee in GUARANTEES:
                    topic = f"{guarantee.replace('-', '')}{n}"
                    producer.create_topic(topic, 4)
                    seconds = publish(spark, address, work / "input", topic, guarantee, work)
                    if n:  # round 0 warms up
                        runs[guarantee].append(args.rows / seconds)
    finally:
        spark.stop()
        broker.terminate()
        broker.wait()
        subprocess.run(["rm", "-rf", str(work)], check=False)
    print(f"config: rows={args.rows} body={args.body}B files={args.files} rounds={args.rounds} local[2]"
          f" flush=sync cpus={os.cpu_count()}")  # fmt: skip
    for guarantee, rates in runs.items():
        figures = " / ".join(f"{r:,.0f}" for r in rates)
        print(f"{guarantee + ':':<15} {figures} rows/s, mean {statistics.mean(rates):,.0f}")
    mean = {guarantee: statistics.mean(rates) for guarantee, rates in runs.items()}
    print(
        f"ratio exactly-once / at-least-once: {mean['exactly-once'] / mean['at-least-once']:.2f} (goal: at least 0.8)"
    )
    print(f"ratio exactly-once / Parquet: {mean['exactly-once'] / mean['parquet']:.3f} (goal: at least 0.25)")


if __name__ == "__main__":
    main()
