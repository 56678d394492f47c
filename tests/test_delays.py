"""Delayed (timed) messages and message types per topic: a delayed message is held durably,
invisible to every reader until due, then appended once at a fresh offset; it survives SIGKILL
before and after its due time; a recall cancels it; a topic declared for one type refuses others;
bad input is refused with every table unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest

from broker.clock import to_ms
from broker.model import MessageType, Topic
from producer_sdk import (
    DelayedMessageNotFound,
    InvalidArgument,
    InvalidDeliveryTime,
    Message,
    MessageTypeMismatch,
    Producer,
    PullConsumer,
    RocketMQTransactionProducer,
    TopicExists,
)
from tests.processes import consume, official, started_broker
from tests.support import BrokerThread, ScriptedListener, broker_settings, store_snapshot, wait_until

HOUR_MS = 3_600_000


def bodies(address: str, topic: str = "orders") -> list[bytes]:
    """Every message readable from the topic, by native pulls."""
    with PullConsumer(group="audit", broker=address) as consumer:
        return sorted(
            m.body for q in consumer.queue_offsets(topic) for m in consumer.pull(topic, queue_id=q, offset=0).messages
        )


def test_a_delayed_message_is_invisible_until_due_then_read_once_at_a_fresh_offset(broker, clock):
    due = to_ms(clock()) + HOUR_MS
    with Producer(broker=broker.address) as producer:
        first = producer.send(Message(topic="orders", body=b"before", message_id="m-0"))
        held = producer.send(Message(topic="orders", body=b"later", message_id="m-1", deliver_at=due))
        assert held.queue_offset == -1 and held.recall_handle
        assert producer.send(Message(topic="orders", body=b"later", message_id="m-1", deliver_at=due)) == held
        assert broker.broker.store.delayed_by_topic() == {"orders": (1, due)}, "a retried send is held once"
        clock.advance(3599)
        broker.run(broker.broker.delays.deliver_due())
        assert bodies(broker.address) == [b"before"], "not due yet"
        clock.advance(2)
        wait_until(lambda: bodies(broker.address) == [b"before", b"later"], timeout=5)
        broker.run(broker.broker.delays.deliver_due())
        assert bodies(broker.address) == [b"before", b"later"], "delivered once"
        with PullConsumer(group="audit", broker=broker.address) as consumer:
            (delivered,) = [m for m in consumer.pull("orders", queue_id=held.queue_id, offset=0).messages
                            if m.body == b"later"]  # fmt: skip
        assert delivered.message_id == "m-1"
        assert delivered.store_timestamp >= due, "stored when due, not when sent"
        if held.queue_id == first.queue_id:
            assert delivered.queue_offset > first.queue_offset
        with pytest.raises(DelayedMessageNotFound):
            producer.recall("orders", held.recall_handle)


def test_a_delivery_time_in_the_past_is_delivered_at_once(broker, clock):
    with Producer(broker=broker.address) as producer:
        sent = producer.send(Message(topic="orders", body=b"late", deliver_at=to_ms(clock()) - 60_000))
    assert sent.queue_offset >= 0 and not sent.recall_handle
    assert bodies(broker.address) == [b"late"]


def test_a_recalled_delayed_message_is_never_delivered(broker, clock):
    due = to_ms(clock()) + 60_000
    with Producer(broker=broker.address) as producer:
        kept = producer.send(Message(topic="orders", body=b"kept", deliver_at=due))
        gone = producer.send(Message(topic="orders", body=b"recalled", deliver_at=due))
        assert producer.recall("orders", gone.recall_handle) == gone.message_id
        with pytest.raises(DelayedMessageNotFound):
            producer.recall("orders", gone.recall_handle)
        producer.create_topic("payments", 1)
        with pytest.raises(DelayedMessageNotFound):
            producer.recall("payments", kept.recall_handle)  # another topic's handle
        with pytest.raises(InvalidArgument, match="malformed recall handle"):
            producer.recall("orders", "not-a-handle")
    assert broker.broker.store.delayed_by_topic() == {"orders": (1, due)}
    clock.advance(61)
    broker.run(broker.broker.delays.deliver_due())
    assert bodies(broker.address) == [b"kept"]
    assert broker.broker.store.delayed_by_topic() == {}


def test_bad_delayed_sends_are_refused_and_change_nothing(tmp_path, clock):
    topics = (Topic("orders", 4), Topic("timers", 2, message_type=MessageType.DELAY))
    settings = broker_settings(tmp_path / "data", max_delay=3600.0, topics=topics)
    broker = BrokerThread(settings, clock)
    try:
        with Producer(broker=broker.address) as producer:
            producer.send(Message(topic="orders", body=b"x"))
            before = store_snapshot(tmp_path / "data")
            now = to_ms(clock())
            with pytest.raises(InvalidDeliveryTime, match="maximum delay of 3600 s"):
                producer.send(Message(topic="orders", body=b"far", deliver_at=now + HOUR_MS + 1000))
            with pytest.raises(MessageTypeMismatch, match="accepts DELAY messages only, not NORMAL"):
                producer.send(Message(topic="timers", body=b"plain"))
            with pytest.raises(InvalidArgument, match="delayed messages or immediate ones, not both"):
                producer.send_batch([
                    Message(topic="orders", body=b"a"), Message(topic="orders", body=b"b", deliver_at=now + 1000)
                ])  # fmt: skip
            with pytest.raises(TopicExists, match="exists for DELAY message type"):
                producer.create_topic("timers", 2)
            assert store_snapshot(tmp_path / "data") == before
            listener = ScriptedListener()
            with (
                RocketMQTransactionProducer(group="g", broker=broker.address, listener=listener) as txn,
                pytest.raises(MessageTypeMismatch, match="not TRANSACTION"),
            ):
                txn.send_message_in_transaction(Message(topic="timers", body=b"txn"))
            assert store_snapshot(tmp_path / "data") == before
            assert producer.send(Message(topic="timers", body=b"t", deliver_at=now + 1000)).recall_handle
    finally:
        broker.stop()


def test_the_admin_api_cli_and_metrics_show_topic_types_and_delayed_messages(broker, clock):
    due = to_ms(clock()) + 60_000
    created = httpx.post(f"{broker.http}/topics", json={"name": "timers", "queues": 2, "message_type": "DELAY"})
    assert created.status_code == 201 and created.json()["message_type"] == "DELAY"
    refused = httpx.post(f"{broker.http}/topics", json={"name": "bad", "message_type": "LITE"})
    assert refused.status_code == 422
    with Producer(broker=broker.address) as producer:
        for n in range(3):
            producer.send(Message(topic="timers", body=b"t", deliver_at=due + n))
    topics = {t["name"]: t for t in httpx.get(f"{broker.http}/topics").json()["items"]}
    assert (topics["timers"]["delayed"], topics["timers"]["next_due"]) == (3, due)
    assert [topics["orders"][k] for k in ("delayed", "next_due", "message_type")] == [0, None, None]
    metrics = httpx.get(f"{broker.http}/metrics").text
    assert 'halfmq_delayed_messages{topic="timers"} 3.0' in metrics
    assert f'halfmq_delayed_next_due_seconds{{topic="timers"}} {due / 1000:.8e}' in metrics
    listed = subprocess.run(
        [sys.executable, "-m", "halfmq_cli", "--url", broker.http, "topics", "list"], capture_output=True, text=True
    )
    timers = next(line.split() for line in listed.stdout.splitlines() if line.startswith("timers"))
    assert timers[3:6] == ["DELAY", "3", str(due)]
    made = subprocess.run(
        [sys.executable, "-m", "halfmq_cli", "--url", broker.http, "topics", "create", "fifo", "--type", "FIFO"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0 and broker.broker.messaging.topic("fifo").message_type is MessageType.FIFO


def test_a_message_delayed_an_hour_arrives_when_the_fixture_s_clock_passes_it(halfmq_broker):
    halfmq_broker.create_topic("orders")
    with Producer(broker=halfmq_broker.address) as producer:
        producer.send(Message(topic="orders", body=b"reminder", delay=3600))
    began = time.monotonic()
    assert halfmq_broker.committed("orders") == []
    halfmq_broker.advance_clock(3601)
    assert [m.body for m in halfmq_broker.committed("orders")] == [b"reminder"]
    assert time.monotonic() - began < 1.0


@pytest.mark.e2e
@pytest.mark.slow
def test_delayed_messages_survive_sigkill_before_and_after_their_due_time_and_are_delivered_once(tmp_path):
    broker = started_broker(tmp_path)
    try:
        now = int(time.time() * 1000)
        due = {b"d%02d" % n: now + 6000 + 300 * n for n in range(20)}
        with Producer(broker=broker.address) as producer:
            for body, at in due.items():  # due while the broker runs, while it is down, and after its restart
                producer.send(Message(topic="orders", body=body, message_id=body.decode(), deliver_at=at))
        broker.kill()  # before any is due (on a machine not too busy to send 20 messages in 6 s)
        time.sleep(1)
        broker.start()
        seen = bodies(broker.address)
        assert all(due[body] <= time.time() * 1000 for body in seen), f"none is delivered before its time: {seen}"
        wait_until(lambda: len(bodies(broker.address)) >= 3, timeout=10)
        broker.kill()  # while they come due
        time.sleep(2)  # some come due while it is down
        broker.start()
        wait_until(lambda: len(bodies(broker.address)) == 20, timeout=15)
        broker.kill()  # after every one is due
        broker.start()
        assert bodies(broker.address) == [b"d%02d" % n for n in range(20)], "each delivered once"
    finally:
        broker.stop()


@pytest.mark.e2e
def test_the_official_producer_sends_a_delayed_message_and_recalls_another(tmp_path):
    pytest.importorskip("rocketmq", reason="the rocketmq extra (official RocketMQ 5 Python client) is not installed")
    broker = BrokerThread(broker_settings(tmp_path / "data"))
    endpoint, env = f"127.0.0.1:{broker.broker.rocketmq_port}", {**os.environ, "HOME": str(tmp_path / "home")}
    try:
        producer = official(endpoint, "delay", {**env, "RMQ_DELAY": "4"})
        out, _ = producer.communicate(timeout=120)
        assert producer.returncode == 0, out
        sent = {line.split()[1]: line.split()[2] for line in out.splitlines() if line.startswith("SENT")}
        assert f"RECALLED {sent['rmq-delay-recalled']}" in out.splitlines()
        assert bodies(broker.address) == [], "held until due"
        wait_until(lambda: bodies(broker.address) == [b"rmq-delay-kept"], timeout=15)
        assert consume(endpoint, "delay-readers", "drain", env) == ["GOT rmq-delay-kept 1"]
        time.sleep(1)
        assert bodies(broker.address) == [b"rmq-delay-kept"], "the recalled one never comes"
    finally:
        broker.stop()
