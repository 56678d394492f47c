"""Retries and dead letters per consumer group: a message is delivered at most the group's
maximum number of times, then moved to ``%DLQ%<group>`` (a real topic, readable like any other,
with its origin in its properties) in the same write that takes it off the group's retry path;
official push consumers are told the group's policy and are redelivered by it."""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import httpx
import pytest

from broker.errors import StaleReceiptHandle
from producer_sdk import Message, Producer, PullConsumer
from tests.processes import started_broker
from tests.support import BrokerThread, broker_settings, store_snapshot

ROOT = Path(__file__).resolve().parent.parent


def send_one(broker: BrokerThread, body: bytes = b"job") -> tuple[int, str]:
    with Producer(broker=broker.address) as producer:
        sent = producer.send(Message(topic="orders", body=body))
    return sent.queue_id, sent.message_id


def dead_letters(broker: BrokerThread, group: str) -> list:
    with PullConsumer(group="audit", broker=broker.address) as consumer:
        return consumer.pull(f"%DLQ%{group}", queue_id=0, offset=0).messages


def test_a_message_never_acknowledged_is_delivered_the_maximum_times_then_moves_to_the_group_s_dlq(broker, clock):
    policy = httpx.put(f"{broker.http}/consumers/workers/retry-policy", json={"max_attempts": 3})
    assert policy.status_code == 200 and policy.json()["dead_letter_topic"] == "%DLQ%workers"
    queue_id, message_id = send_one(broker)
    messaging = broker.broker.messaging
    attempts = []
    for _ in range(3):
        (delivery,) = broker.run(messaging.receive("workers", "orders", queue_id, 1, 30, None))
        attempts.append(delivery.attempt)
        clock.advance(31)  # not acknowledged: visible again
    assert attempts == [1, 2, 3]
    seen = httpx.get(f"{broker.http}/consumers/workers/retry-policy").json()
    assert (seen["retrying"], seen["dead_letters"]) == (1, 0)
    assert 'halfmq_consumer_retrying_messages{group="workers"} 1.0' in httpx.get(f"{broker.http}/metrics").text
    assert broker.run(messaging.receive("workers", "orders", queue_id, 1, 30, None)) == []
    (letter,) = dead_letters(broker, "workers")
    assert letter.body == b"job" and letter.message_id != message_id
    assert {k: letter.properties[k] for k in ("RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "DELIVERY_ATTEMPTS")} == {
        "RETRY_TOPIC": "orders", "ORIGIN_MESSAGE_ID": message_id, "DELIVERY_ATTEMPTS": "3",
    }  # fmt: skip
    assert broker.run(messaging.consumer_offsets("workers", "orders"))[queue_id] == 1, "off the retry path"
    assert store_snapshot(broker.broker.store.path.parent)["deliveries"] == []
    seen = httpx.get(f"{broker.http}/consumers/workers/retry-policy").json()
    assert (seen["retrying"], seen["dead_letters"]) == (0, 1)
    metrics = httpx.get(f"{broker.http}/metrics").text
    assert 'halfmq_dead_letter_messages{group="workers"} 1.0' in metrics
    assert 'halfmq_consumer_retrying_messages{group="workers"} 0.0' in metrics, "nothing left to retry"
    assert "%DLQ%workers" in [t["name"] for t in httpx.get(f"{broker.http}/topics").json()["items"]]
    other = broker.run(messaging.receive("others", "orders", queue_id, 1, 30, None))
    assert [d.attempt for d in other] == [1], "another group's deliveries are its own"


def test_a_client_forwards_a_message_to_the_dlq_and_a_stale_handle_changes_nothing(broker, clock):
    queue_id, message_id = send_one(broker)
    messaging = broker.broker.messaging
    (delivery,) = broker.run(messaging.receive("fifo-group", "orders", queue_id, 1, 30, None))
    broker.run(messaging.forward_to_dead_letters("fifo-group", "orders", delivery.receipt_handle))
    (letter,) = dead_letters(broker, "fifo-group")
    assert (letter.properties["ORIGIN_MESSAGE_ID"], letter.properties["DELIVERY_ATTEMPTS"]) == (message_id, "1")
    before = store_snapshot(broker.broker.store.path.parent)
    with pytest.raises(StaleReceiptHandle):
        broker.run(messaging.forward_to_dead_letters("fifo-group", "orders", delivery.receipt_handle))
    assert store_snapshot(broker.broker.store.path.parent) == before
    clock.advance(60)
    assert broker.run(messaging.receive("fifo-group", "orders", queue_id, 1, 30, None)) == []


def test_a_retry_policy_out_of_range_is_refused_and_the_default_is_the_broker_s(broker):
    default = httpx.get(f"{broker.http}/consumers/g/retry-policy").json()
    assert default["max_attempts"] == 17 and default["backoff_seconds"][:3] == [1, 5, 10]
    before = store_snapshot(broker.broker.store.path.parent)
    for body in ({"max_attempts": 0}, {"backoff_seconds": []}, {"backoff_seconds": [-1]}, {"max_attempts": "x"}):
        refused = httpx.put(f"{broker.http}/consumers/g/retry-policy", json=body)
        assert 400 <= refused.status_code < 500 and refused.json()["error"]["code"] == "INVALID_ARGUMENT", body
    assert store_snapshot(broker.broker.store.path.parent) == before
    cli = [sys.executable, "-m", "halfmq_cli", "--url", broker.http, "consumers", "retry-policy", "g"]
    said = subprocess.run([*cli, "--max-attempts", "5", "--backoff", "1,2.5"], capture_output=True, text=True)
    assert said.stdout.strip() == (
        "g (concurrent): 5 deliveries at most, then %DLQ%g; backoff 1, 2.5 s; retrying 0, dead letters 0"
    ), said.stderr
    assert httpx.get(f"{broker.http}/consumers/g/retry-policy").json()["backoff_seconds"] == [1, 2.5]
    fifo = subprocess.run([*cli, "--fifo"], capture_output=True, text=True)
    assert fifo.stdout.startswith("g (FIFO): 17 deliveries at most, then %DLQ%g; backoff 1 s;"), fifo.stderr
    kept = subprocess.run([*cli, "--max-attempts", "3"], capture_output=True, text=True)
    assert kept.stdout.startswith("g (FIFO): 3 deliveries at most"), "FIFO is kept unless --no-fifo is given"


@pytest.fixture
def official(tmp_path):
    pytest.importorskip("rocketmq", reason="the rocketmq extra (official RocketMQ 5 Python client) is not installed")
    broker = BrokerThread(broker_settings(tmp_path / "data"))
    yield broker, f"127.0.0.1:{broker.broker.rocketmq_port}", {**os.environ, "HOME": str(tmp_path / "home")}
    broker.stop()


def push(endpoint: str, group: str, mode: str, seconds: float, env: dict[str, str]) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "tests.programs.rmq5_push", endpoint, group, mode, str(seconds)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=seconds + 60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return [line for line in result.stdout.splitlines() if line.startswith("GOT")]


@pytest.mark.e2e
def test_official_push_consumers_are_redelivered_by_the_group_s_policy_then_dead_lettered(official):
    broker, endpoint, env = official
    for group in ("flaky", "failing"):
        httpx.put(f"{broker.http}/consumers/{group}/retry-policy", json={"max_attempts": 4, "backoff_seconds": [0.5]})
    send_one(broker, b"task")
    assert push(endpoint, "flaky", "flaky", 8, env) == ["GOT task 1", "GOT task 2", "GOT task 3"]
    assert "%DLQ%flaky" not in [t.name for t in broker.broker.messaging.topics()], "acknowledged at the third"
    assert push(endpoint, "failing", "failing", 8, env) == [f"GOT task {n}" for n in (1, 2, 3, 4)]
    messaging = broker.broker.messaging
    for queue_id in range(4):  # the next receive of the group moves it, once its last backoff is over
        broker.run(messaging.receive("failing", "orders", queue_id, 1, 1, None))
    (letter,) = dead_letters(broker, "failing")
    assert (letter.body, letter.properties["DELIVERY_ATTEMPTS"]) == (b"task", "4")


@pytest.mark.e2e
@pytest.mark.slow
def test_a_broker_killed_while_messages_move_to_the_dlq_loses_none_and_copies_none_twice(tmp_path):
    pytest.importorskip("rocketmq", reason="the rocketmq extra (its protocol modules) is not installed")
    from broker.rocketmq_api.protocol import load

    definition, service, service_grpc = load()
    broker = started_broker(tmp_path, "--max-delivery-attempts", "1")
    try:
        with Producer(broker=broker.address) as producer:
            sent = {producer.send(Message(topic="orders", body=b"m%03d" % n)).message_id for n in range(120)}

        def receive_all(ready: bool = False) -> int:
            """One receive per queue, invisible 0.2 s and never acknowledged; how many came.
            ``ready``: wait for the port (the broker just started) rather than fail."""
            got = 0
            with grpc.insecure_channel(f"127.0.0.1:{broker.rocketmq_port}") as channel:
                stub = service_grpc.MessagingServiceStub(channel)
                for queue_id in range(4):
                    request = service.ReceiveMessageRequest(
                        group=definition.Resource(name="dying"),
                        message_queue=definition.MessageQueue(topic=definition.Resource(name="orders"), id=queue_id),
                        filter_expression=definition.FilterExpression(type=definition.TAG, expression="*"),
                        batch_size=16, invisible_duration={"nanos": 200_000_000},
                        long_polling_timeout={"nanos": 100_000_000},
                    )  # fmt: skip
                    replies = stub.ReceiveMessage(request, timeout=10, wait_for_ready=ready)
                    got += sum(1 for r in replies if r.HasField("message"))
            return got

        rng = random.Random(7)
        for _ in range(6):  # each round: deliver some, let them expire, move some, and kill the broker mid-way
            receive_all(ready=True)
            time.sleep(0.3)
            killer = threading.Timer(rng.uniform(0.0, 0.05), broker.kill)
            killer.start()
            with contextlib.suppress(grpc.RpcError):  # the broker dies under it
                receive_all()
            killer.join()
            broker.start()
        letters: list = []
        deadline = time.monotonic() + 60
        while len(letters) < len(sent) and time.monotonic() < deadline:
            receive_all(ready=True)  # moves what was delivered once and is visible again
            time.sleep(0.3)
            with PullConsumer(group="audit", broker=broker.address) as consumer:
                letters = [
                    m
                    for q in consumer.queue_offsets("%DLQ%dying")
                    for m in consumer.pull("%DLQ%dying", queue_id=q, offset=0, max_messages=1024).messages
                ]
        origins = [m.properties["ORIGIN_MESSAGE_ID"] for m in letters]
        assert sorted(origins) == sorted(sent), "each message moved once: none lost, none copied twice"
    finally:
        broker.stop()


def test_the_dead_letter_topic_of_a_group_with_the_longest_name_is_readable(broker, clock):
    group = "g" * 127
    httpx.put(f"{broker.http}/consumers/{group}/retry-policy", json={"max_attempts": 1}).raise_for_status()
    queue_id, message_id = send_one(broker)
    messaging = broker.broker.messaging
    assert len(broker.run(messaging.receive(group, "orders", queue_id, 1, 1, None))) == 1
    clock.advance(2)
    assert broker.run(messaging.receive(group, "orders", queue_id, 1, 1, None)) == []
    (letter,) = dead_letters(broker, group)
    assert letter.properties["ORIGIN_MESSAGE_ID"] == message_id
    assert httpx.get(f"{broker.http}/consumers/{group}/retry-policy").json()["dead_letters"] == 1


def test_the_cli_lists_the_groups_retrying_messages_and_holding_dead_letters(broker, clock):
    httpx.put(f"{broker.http}/consumers/dying/retry-policy", json={"max_attempts": 1}).raise_for_status()
    messaging = broker.broker.messaging
    queues = {group: send_one(broker)[0] for group in ("dying", "retrying")}
    for group, queue_id in queues.items():
        assert len(broker.run(messaging.receive(group, "orders", queue_id, 1, 1, None))) == 1
    clock.advance(2)
    for group, queue_id in queues.items():  # the first is past its one delivery, the second gets its second
        broker.run(messaging.receive(group, "orders", queue_id, 1, 1, None))
    cli = [sys.executable, "-m", "halfmq_cli", "--url", broker.http, "consumers", "retries"]
    listed = subprocess.run([*cli, "--json"], capture_output=True, text=True, check=True)
    assert json.loads(listed.stdout) == [
        {"group": "dying", "retrying": 0, "dead_letters": 1},
        {"group": "retrying", "retrying": 1, "dead_letters": 0},
    ]
    rows = subprocess.run(cli, capture_output=True, text=True, check=True).stdout.splitlines()
    assert [row.split() for row in rows] == [
        ["GROUP", "RETRYING", "DEAD_LETTERS"],
        ["dying", "0", "1"],
        ["retrying", "1", "0"],
    ]
