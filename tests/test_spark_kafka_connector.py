"""Spark's own Kafka connector (spark-sql-kafka, fetched by Spark from Maven Central) reads
halfmq's Kafka port in batch and streaming mode and writes to it, as it does a Kafka broker's."""

from __future__ import annotations

import tempfile
from typing import Any

import pytest
from confluent_kafka import Producer as KafkaProducer

from tests.spark_support import run_available_now

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def kafka(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "orders")
    for name, value in {"kafka.isolation.level": "read_committed", **options}.items():
        reader = reader.option(name, value)
    return reader.load()


def values(rows: list[Any]) -> list[str]:
    return sorted(bytes(row.value).decode() for row in rows)


def test_spark_s_kafka_connector_reads_only_what_committed_and_writes(broker: Any, spark: Any) -> None:
    bootstrap = f"127.0.0.1:{broker.broker.kafka_port}"
    plain = KafkaProducer({"bootstrap.servers": bootstrap})
    txn = KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": "spark-feed"})
    txn.init_transactions()
    for body, end in (("c", txn.commit_transaction), ("a", txn.abort_transaction)):
        txn.begin_transaction()
        for i in range(4):
            txn.produce("orders", key=b"k%d" % i, value=f"{body}{i}".encode(), partition=i % 2)
        end()
    txn.begin_transaction()
    txn.produce("orders", value=b"open", partition=0)  # open while Spark reads: never read
    txn.flush()

    batch = kafka(spark, bootstrap, startingOffsets="earliest", endingOffsets="latest")
    assert values(batch.collect()) == ["c0", "c1", "c2", "c3"], "the committed set, no aborted or open record"
    first_two = kafka(
        spark, bootstrap, startingOffsets="earliest", endingOffsets='{"orders": {"0": 1, "1": 1, "2": -1, "3": -1}}'
    )
    assert values(first_two.collect()) == ["c0", "c1"], "endingOffsets per partition"

    checkpoint = tempfile.mkdtemp(prefix="halfmq-kafka-ckpt-")
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", "orders").option("kafka.isolation.level", "read_committed")
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "2").load())  # fmt: skip
    batches = run_available_now(stream, checkpoint)
    assert all(len(rows) <= 2 for _, rows in batches), f"maxOffsetsPerTrigger: {[len(r) for _, r in batches]}"
    assert values([row for _, rows in batches for row in rows]) == ["c0", "c1", "c2", "c3"]
    txn.abort_transaction()
    for i in range(2):
        plain.produce("orders", value=b"later%d" % i, partition=i)
    plain.flush()
    again = run_available_now(stream, checkpoint)
    assert values([row for _, rows in again for row in rows]) == ["later0", "later1"], "on from the checkpoint"

    written = spark.createDataFrame([("k-w1", "w1"), ("k-w2", "w2")], ["key", "value"])
    written.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", "orders").save()
    after = kafka(spark, bootstrap, startingOffsets="earliest", endingOffsets="latest").collect()
    assert {bytes(r.key).decode(): bytes(r.value).decode() for r in after if r.key and r.key.startswith(b"k-w")} == {
        "k-w1": "w1",
        "k-w2": "w2",
    }
