"""SIGKILLs with Kafka's clients: the broker under confluent-kafka's idempotent and
transactional producers (no acknowledged record lost, none stored twice, every transaction all
or none), and a consume-transform-produce of confluent-kafka or aiokafka (one output per input)."""

from __future__ import annotations

import collections
import random
import re
import time

import pytest

from producer_sdk import Message, Producer, PullConsumer
from tests.kafka_clients import ClientProcess, run_client, wait_for
from tests.processes import started_broker
from tests.support import topic_rows

KILLS = 3
INPUTS = 3000


def test_a_broker_killed_three_times_under_idempotent_and_transactional_producers_loses_and_doubles_nothing(tmp_path):
    broker = started_broker(tmp_path)
    bootstrap = f"127.0.0.1:{broker.kafka_port}"
    clients = []
    try:
        idempotent = ClientProcess("confluent-kafka", bootstrap, None, "idempotent", "orders")
        transactional = ClientProcess("confluent-kafka", bootstrap, None, "transactions", "killed", "orders")
        clients = [idempotent, transactional]
        for kill in range(KILLS + 1):
            seen = len(idempotent.lines), len(transactional.lines)
            wait_for(
                lambda seen=seen: len(idempotent.lines) >= seen[0] + 300 and len(transactional.lines) >= seen[1] + 10,
                120,
                "the producers to make progress",
            )
            if kill < KILLS:
                broker.kill()
                time.sleep(0.5)
                broker.start()
        idempotent.stop(240)
        transactional.stop(240)
        (sent,) = [line["sent"] for line in idempotent.lines if "sent" in line]
        acked = {line["acked"] for line in idempotent.lines if "acked" in line}
        committed = [line["committed"] for line in transactional.lines]
    finally:
        for client in clients:
            client.kill()
        broker.stop()
    stored = collections.Counter(body.decode() for _, _, _, body in topic_rows(broker.data_dir, "orders"))
    assert len(acked) == sent, "every record sent was acknowledged in the end"
    assert {v for v in stored if v.startswith("i")} == acked
    assert [v for v, n in stored.items() if n > 1] == [], "no record is stored twice"
    attempts = collections.Counter(re.sub(r"-\d$", "", v) for v in stored if v.startswith("t"))
    assert set(attempts.values()) <= {5}, "a transaction's records are all stored or none"
    assert sorted(attempts) == sorted(committed)
    assert len({name.split("a")[0] for name in committed}) == len(committed), "no transaction committed twice"


@pytest.mark.parametrize("client", ["confluent-kafka", "aiokafka"])
def test_a_transform_killed_at_random_points_and_restarted_makes_one_output_per_input(tmp_path, client):
    """Consume-transform-produce with send_offsets_to_transaction: SIGKILLed at random moments
    (mid-transaction among them) and started again, five times."""
    broker = started_broker(tmp_path, "--topic", "inputs:4", "--topic", "outputs:4")
    bootstrap = f"127.0.0.1:{broker.kafka_port}"
    transform = None
    try:
        with Producer(broker=broker.address) as native:
            for start in range(0, INPUTS, 1000):
                native.send_batch([Message(topic="inputs", body=f"v{i}".encode()) for i in range(start, start + 1000)])
        rounds, progress = random.Random(36), []
        for _ in range(5):
            transform = ClientProcess(client, bootstrap, None, "transform", "inputs", "outputs", "billing", "billing-1")
            time.sleep(rounds.uniform(2.0, 6.0))
            transform.kill()
            progress.append(sum(line["committed"] for line in transform.lines))
        assert sum(progress) < INPUTS and len([p for p in progress if p]) >= 2, f"killed mid-stream: {progress}"
        transform = ClientProcess(client, bootstrap, None, "transform", "inputs", "outputs", "billing", "billing-1")
        with PullConsumer(group="billing", broker=broker.address) as consumer:
            ends = {q: high for q, (_, high) in consumer.queue_offsets("inputs").items()}

            def caught_up() -> bool:
                return consumer.committed_offsets("inputs") == ends

            wait_for(caught_up, 120, "the transform to commit the inputs' ends")
        transform.kill()
        (line,) = run_client("confluent-kafka", bootstrap, None, "read", "outputs")
    finally:
        if transform is not None:
            transform.kill()
        broker.stop()
    assert sorted(line["values"]["outputs"]) == sorted(f"out-v{i}" for i in range(INPUTS))
