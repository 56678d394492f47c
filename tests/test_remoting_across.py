"""RocketMQ's classic clients among halfmq's other protocols: the transactions of a Java
TransactionMQProducer (RmqClassicCrashJava, from 64 threads, every 5th left unknown at first) are
read by the official RocketMQ 5 SimpleConsumer, a Kafka ``read_committed`` consumer and the Spark
source, each seeing exactly the committed set once. The Java producer is gone before the broker
checks its unknown transactions: a live Go producer of the same group (rmq_classic_go --answer)
answers those checks."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer

from halfmq_peers.java import java_program
from halfmq_peers.rocketmq import CLASSIC_CLIENT
from tests.processes import consume
from tests.spark_support import batch_reader
from tests.support import BrokerThread, broker_settings, wait_until
from tests.test_conformance_rocketmq_classic import go_program
from tests.test_remoting_crashes import PROGRAM, JavaApplication, late, rule

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

COUNT = 40
GROUP = "crash-producer"  # RmqClassicCrashJava's producer group


def pending(broker: BrokerThread) -> int:
    """How many transactions are still pending, through the admin API."""
    page = httpx.get(f"http://127.0.0.1:{broker.broker.http_port}/transactions", params={"state": "PENDING"},
                     timeout=10).json()  # fmt: skip
    return int(page["total"])


def kafka_read_committed(bootstrap: str, expected: int) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-readers", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe(["orders"])
    values: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
        for message in consumer.consume(100, timeout=3):  # anything more shows
            values.append(message.value().decode())
    finally:
        consumer.close()
    return values


def test_a_java_producer_s_commits_are_read_once_by_every_protocol_and_its_checks_answered_by_a_go_producer(
    tmp_path: Path, spark: Any
) -> None:
    broker = BrokerThread(broker_settings(tmp_path / "data"))  # checks run when the test says
    go = None
    try:
        namesrv = f"127.0.0.1:{broker.broker.namesrv_port}"
        java = JavaApplication([*java_program(PROGRAM, [CLASSIC_CLIENT]), namesrv, "orders", str(COUNT)])
        try:
            wait_until(java.done_sending, timeout=180, interval=0.5)
        finally:
            java.kill()  # gone, its late transactions unknown
        unknown = sorted(f"t-{i}" for i in range(COUNT) if late(f"t-{i}"))
        assert pending(broker) == len(unknown)
        go = subprocess.Popen([str(go_program(tmp_path)), "--answer", namesrv, GROUP, "orders"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert go.stdout is not None
        assert json.loads(go.stdout.readline()) == {"started": GROUP}
        time.sleep(1.5)  # the half messages are older than the transaction timeout

        def all_answered() -> bool:
            broker.check_once()  # the Go producer's group is known once its heartbeat came
            return not pending(broker)

        wait_until(all_answered, timeout=90, interval=1.0)
        go.stdin.close()  # type: ignore[union-attr]
        answers = [json.loads(line) for line in go.stdout]
        assert sorted({a["answered"] for a in answers if a["answered"] in unknown}) == unknown
        committed = sorted(f"t-{i}" for i in range(COUNT) if rule(f"t-{i}") == "COMMIT_MESSAGE")

        endpoint = f"127.0.0.1:{broker.broker.rocketmq_port}"
        got = [line.split()[1] for line in consume(endpoint, "rmq5-readers", "drain", dict(os.environ))
               if line.startswith("GOT")]  # fmt: skip
        assert sorted(got) == committed
        assert sorted(kafka_read_committed(f"127.0.0.1:{broker.broker.kafka_port}", len(committed))) == committed
        rows = batch_reader(spark, broker.address).select("body").collect()
        assert sorted(bytes(row.body).decode() for row in rows) == committed
    finally:
        if go is not None and go.poll() is None:
            go.kill()
        broker.stop()
