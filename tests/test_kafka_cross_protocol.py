"""One store, three protocols: what a RocketMQ transactional producer commits is what a Kafka
read_committed consumer reads, and what a Kafka transactional producer commits is what the
Spark source reads; neither ever sees a rolled-back or aborted message."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.kafka_clients import Session, run_client
from tests.processes import official
from tests.spark_support import batch_reader
from tests.support import BrokerThread, broker_settings


@pytest.fixture
def broker(tmp_path) -> Iterator[BrokerThread]:
    running = BrokerThread(broker_settings(tmp_path / "data", check_interval=0.3, check_timeout=1.0))
    yield running
    running.stop()


def test_a_kafka_read_committed_consumer_reads_what_a_rocketmq_transactional_producer_committed(broker, tmp_path):
    pytest.importorskip("rocketmq", reason="the rocketmq extra (official RocketMQ 5 Python client) is not installed")
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    sent = official(f"127.0.0.1:{broker.broker.rocketmq_port}", "send", env).communicate(timeout=120)[0]
    assert "SENT rmq-rollback" in sent
    (line,) = run_client("confluent-kafka", f"127.0.0.1:{broker.broker.kafka_port}", None, "read", "orders")
    assert sorted(line["values"]["orders"]) == ["rmq-commit", "rmq-normal"]
    tags = ["TAGS", b"rmq".hex()]
    assert sorted((r["key"], tags in r["headers"]) for r in line["records"]) == [
        ("rmq-commit", True), ("rmq-normal", True)
    ]  # fmt: skip


def test_the_spark_source_reads_what_a_kafka_transactional_producer_committed(broker, spark):
    session = Session("confluent-kafka", f"127.0.0.1:{broker.broker.kafka_port}", "spark-feed")
    try:
        committed = [f"produce orders {p} committed-{p}" for p in range(4)]
        aborted = [f"produce orders {p} aborted-{p}" for p in range(4)]
        replies = session.do("begin", *committed, "commit", "begin", *aborted, "flush", "abort")
        replies += session.do("begin", "produce orders 1 open-1", "flush")
        assert all("done" in reply for reply in replies), replies
        rows = batch_reader(spark, broker.address).collect()
        assert sorted(bytes(r.body).decode() for r in rows) == [f"committed-{p}" for p in range(4)]
        assert session.do("commit") == [{"done": "commit"}]
        rows = batch_reader(spark, broker.address).collect()
        assert sorted(bytes(r.body).decode() for r in rows) == [*(f"committed-{p}" for p in range(4)), "open-1"]
    finally:
        session.close()
