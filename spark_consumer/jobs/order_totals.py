"""Committed order events → per-customer totals in SQLite, exactly once, plus the events as Parquet.

    python -m spark_consumer.jobs.order_totals --broker 127.0.0.1:10911 --topic orders \\
        --checkpoint ./ckpt --sink ./totals.db --parquet ./orders-parquet --once
    spark-submit spark_consumer/jobs/order_totals.py ...   # the same, on a cluster

Each micro-batch writes its events to ``<parquet>/query_id=<query>/batch_id=<id>`` (overwritten on
replay) and adds its per-customer totals to the SQLite sink with the query's id and its batch id,
in one SQLite transaction; a replayed batch (same query, same id, same messages) changes nothing.
The query id lives in the checkpoint: a fresh checkpoint is a new query, whose batch ids start
at 0 again and are applied as new batches.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import spark_consumer
from spark_consumer.sink import TotalsSink

BODY_FORMAT = """\
An order event's body is a JSON object in UTF-8:
  {"order": "o-1", "customer": "alice", "amount": 30}
customer (a string) and amount (a number) are required; order is kept in the Parquet output.
A message whose body is not such an object is left out of the totals and counted: each batch
logs how many it skipped with the place of the first, and the job prints the count at the end."""
EVENT_SCHEMA = "order string, customer string, amount double"
# The streaming query's id (kept in its checkpoint across restarts), set by Spark for the batch's thread.
QUERY_ID = "sql.streaming.queryId"
log = logging.getLogger("order_totals")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="order_totals",
        description=__doc__.split("\n")[0],
        epilog=BODY_FORMAT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--broker", required=True, help="halfmq broker host:port")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--checkpoint", required=True, type=Path, help="Spark checkpoint directory")
    parser.add_argument("--sink", required=True, type=Path, help="SQLite file of the per-customer totals")
    parser.add_argument("--parquet", required=True, type=Path, help="directory of the Parquet output")
    parser.add_argument("--once", action="store_true", help="process what is committed now, then stop")
    parser.add_argument("--interval", default="5 seconds", help="micro-batch interval when not --once")
    parser.add_argument("--max-per-batch", type=int, help="maxOffsetsPerTrigger")
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--no-batch-guard", action="store_true", help="drop the batch-id check (demonstration only)")
    parser.add_argument(
        "--crash-after-batch", type=int, help="fault injection: exit abruptly once the sink has committed this batch"
    )
    return parser.parse_args(argv)


def parsed(frame: DataFrame) -> DataFrame:
    """Message bodies parsed as order events, with ``is_event`` false where a body is not one."""
    event = F.from_json(F.col("body").cast("string"), EVENT_SCHEMA)
    return frame.select(
        event.alias("event"), "topic", "queue_id", "queue_offset", "message_id", "store_timestamp"
    ).select(
        "event.*",
        "topic",
        "queue_id",
        "queue_offset",
        "message_id",
        "store_timestamp",
        (F.col("event.customer").isNotNull() & F.col("event.amount").isNotNull()).alias("is_event"),
    )


def process_batch(args: argparse.Namespace, sink: TotalsSink, skipped: list[int]) -> Any:
    """The foreachBatch function; it adds each batch's count of bodies that are not events to ``skipped``."""

    def process(frame: DataFrame, batch_id: int) -> None:
        query_id = frame.sparkSession.sparkContext.getLocalProperty(QUERY_ID)
        if not query_id:
            raise RuntimeError(f"Spark did not give this batch its query id ({QUERY_ID})")
        everything = parsed(frame).cache()
        others = everything.where(~F.col("is_event"))
        first = others.orderBy("topic", "queue_id", "queue_offset").first()
        if first is not None:
            count = others.count()
            skipped.append(count)
            log.warning(
                "batch %d: %d message(s) whose body is not an order event were left out, the first at %s queue %d"
                " offset %d (see --help for the format)",
                batch_id, count, first.topic, first.queue_id, first.queue_offset,
            )  # fmt: skip
        batch = everything.where(F.col("is_event")).drop("is_event")
        batch.write.mode("overwrite").parquet(str(args.parquet / f"query_id={query_id}" / f"batch_id={batch_id}"))
        totals = batch.groupBy("customer").agg(F.sum("amount").alias("amount"), F.count("*").alias("events"))
        applied = sink.apply(query_id, batch_id, [(r.customer, r.amount, r.events) for r in totals.collect()])
        log.info("query %s batch %d: %s", query_id, batch_id, "applied" if applied else "already applied, skipped")
        everything.unpersist()
        if args.crash_after_batch == batch_id:
            os._exit(3)  # after the sink's commit, before Spark records the batch as done

    return process


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = SparkSession.builder.appName("halfmq-order-totals").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark_consumer.register(spark)
    reader = (
        spark.readStream.format("halfmq")
        .option("broker", args.broker)
        .option("topics", args.topic)
        .option("startingOffsets", args.starting_offsets)
    )
    if args.max_per_batch:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_per_batch))
    sink = TotalsSink(args.sink, guard=not args.no_batch_guard)
    skipped: list[int] = []
    writer = (
        reader.load()
        .writeStream.foreachBatch(process_batch(args, sink, skipped))
        .option("checkpointLocation", str(args.checkpoint))
    )
    writer = writer.trigger(availableNow=True) if args.once else writer.trigger(processingTime=args.interval)
    writer.start().awaitTermination()
    for customer, (amount, count) in sorted(sink.totals().items()):
        print(f"{customer}: {amount:.2f} over {count} orders")
    if skipped:
        print(f"{sum(skipped)} message(s) left out: their body is not an order event (see --help for the format)")
    spark.stop()


if __name__ == "__main__":
    main()
