"""Helpers for the Spark tests: run a streaming query and keep each micro-batch's rows."""

from __future__ import annotations

import tempfile
from typing import Any


def stream_reader(spark: Any, address: str, **options: str) -> Any:
    reader = spark.readStream.format("halfmq").option("broker", address).option("topics", "orders")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def batch_reader(spark: Any, address: str, **options: str) -> Any:
    reader = spark.read.format("halfmq").option("broker", address).option("topics", "orders")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(frame: Any, checkpoint: str | None = None) -> list[tuple[int, list[Any]]]:
    """Run the query with Trigger.AvailableNow; return ``[(batch_id, rows)]`` in order."""
    batches: list[tuple[int, list[Any]]] = []
    query = (
        frame.writeStream.foreachBatch(lambda df, batch_id: batches.append((batch_id, df.collect())))
        .trigger(availableNow=True)
        .option("checkpointLocation", checkpoint or tempfile.mkdtemp(prefix="halfmq-ckpt-"))
        .start()
    )
    query.awaitTermination(120)
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return batches
