"""FIFO messages and consumer groups: the messages of one message group go to one queue in send
order, and a FIFO group is handed a message group's next message only once the one before was
acknowledged or dead-lettered; a concurrent group reads the same messages all at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from broker.config import Topic
from broker.errors import InvalidArgument, MessageTypeMismatch
from broker.model import Message as CoreMessage
from broker.model import MessageType
from producer_sdk import Message, Producer, PullConsumer
from producer_sdk.errors import MessageTypeMismatch as SdkTypeMismatch
from tests.support import BrokerThread, broker_settings, store_snapshot

ROOT = Path(__file__).resolve().parent.parent


def send_groups(broker: BrokerThread, groups: dict[str, int]) -> None:
    """Send ``n`` messages per message group to the one-queue topic ``line``, interleaved
    (a1, b1, a2, b2 ...)."""
    with Producer(broker=broker.address) as producer:
        for n in range(max(groups.values())):
            for group, count in groups.items():
                if n < count:
                    producer.send(Message(topic="line", body=f"{group}{n + 1}".encode(), message_group=group))


@pytest.fixture
def line(broker: BrokerThread) -> BrokerThread:
    """The broker with a topic ``line`` of one queue."""
    broker.run(broker.broker.messaging.create_topic("line", 1))
    return broker


def set_fifo(broker: BrokerThread, group: str, **policy: object) -> None:
    answer = httpx.put(f"{broker.http}/consumers/{group}/retry-policy", json={"fifo": True, **policy})
    assert answer.status_code == 200 and answer.json()["fifo"] is True, answer.text


def receive(broker: BrokerThread, group: str, invisible: float = 30) -> list:
    return broker.run(broker.broker.messaging.receive(group, "line", 0, 32, invisible, None))


def ack(broker: BrokerThread, group: str, delivery) -> None:
    broker.run(broker.broker.messaging.ack(group, "line", delivery.receipt_handle))


def bodies(deliveries: list) -> list[str]:
    return [d.message.body.decode() for d in deliveries]


def test_messages_of_one_group_go_to_one_queue_in_send_order(broker):
    with Producer(broker=broker.address) as producer:
        sent = [producer.send(Message(topic="orders", body=f"{i}".encode(), message_group=f"order-{i % 7}"))
                for i in range(70)]  # fmt: skip
    by_group: dict[str, set[int]] = {}
    for i, receipt in enumerate(sent):
        by_group.setdefault(f"order-{i % 7}", set()).add(receipt.queue_id)
    assert all(len(queues) == 1 for queues in by_group.values())
    assert len({q for queues in by_group.values() for q in queues}) > 1, "groups spread over the queues"
    with PullConsumer(group="audit", broker=broker.address) as consumer:
        pulled = [m for q in range(4) for m in consumer.pull("orders", queue_id=q, offset=0, max_messages=100).messages]
    for group in by_group:
        mine = [int(m.body) for m in pulled if m.message_group == group]
        assert mine == sorted(mine) and len(mine) == 10, "in send order"


def test_a_fifo_group_has_one_message_of_a_message_group_in_flight_and_a_concurrent_group_all(line, clock):
    send_groups(line, {"a": 3, "b": 2})
    set_fifo(line, "ordered", max_attempts=5)
    first = receive(line, "ordered")
    assert bodies(first) == ["a1", "b1"]
    assert receive(line, "ordered") == [], "nothing more while the firsts are in flight"
    ack(line, "ordered", first[0])
    assert bodies(receive(line, "ordered")) == ["a2"]
    clock.advance(31)  # b1 and a2 not acknowledged: visible again, redelivered before what follows
    assert [(d.message.body, d.attempt) for d in receive(line, "ordered")] == [(b"b1", 2), (b"a2", 2)]
    assert bodies(receive(line, "concurrent")) == ["a1", "b1", "a2", "b2", "a3"]


def test_interleaved_groups_are_handed_out_side_by_side_each_in_send_order(line):
    send_groups(line, {"a": 3, "b": 3, "c": 1})
    with Producer(broker=line.address) as producer:
        producer.send(Message(topic="line", body=b"loose"))  # no group: not held back by any
    set_fifo(line, "ordered")
    seen: list[list[str]] = []
    while batch := receive(line, "ordered"):
        seen.append(bodies(batch))
        for delivery in batch:
            ack(line, "ordered", delivery)
    assert seen == [["a1", "b1", "c1", "loose"], ["a2", "b2"], ["a3", "b3"]]


def test_a_fifo_message_past_its_attempts_goes_to_the_dlq_and_lets_the_next_of_its_group_through(line, clock):
    send_groups(line, {"a": 2})
    set_fifo(line, "ordered", max_attempts=2)
    assert bodies(receive(line, "ordered", invisible=1)) == ["a1"]
    clock.advance(2)
    assert [(d.message.body, d.attempt) for d in receive(line, "ordered", invisible=1)] == [(b"a1", 2)]
    clock.advance(2)
    assert bodies(receive(line, "ordered")) == ["a2"], "a1 moved to the DLQ in the same receive"
    with PullConsumer(group="audit", broker=line.address) as consumer:
        (letter,) = consumer.pull("%DLQ%ordered", queue_id=0, offset=0).messages
    assert (letter.body, letter.message_group) == (b"a1", "a")


def test_a_client_forwarding_a_fifo_message_to_the_dlq_lets_the_next_through(line):
    send_groups(line, {"a": 2})
    set_fifo(line, "ordered")
    (first,) = receive(line, "ordered")
    line.run(line.broker.messaging.forward_to_dead_letters("ordered", "line", first.receipt_handle))
    assert bodies(receive(line, "ordered")) == ["a2"]


def test_fifo_sends_are_checked_against_the_topic_s_type_and_refused_with_a_delay(broker):
    messaging = broker.broker.messaging
    broker.run(messaging.create_topic("ordered-only", 2, message_type=MessageType.FIFO))
    before = store_snapshot(broker.broker.store.path.parent)
    with Producer(broker=broker.address) as producer, pytest.raises(SdkTypeMismatch):
        producer.send(Message(topic="ordered-only", body=b"plain"))
    with pytest.raises(MessageTypeMismatch):
        broker.run(messaging.send([CoreMessage("ordered-only", b"x", "m1", deliver_at=1)]))
    for bad in ({"__SHARDINGKEY": ""}, {"__SHARDINGKEY": "   "}, {"__SHARDINGKEY": "g" * 129}):
        with pytest.raises(InvalidArgument):
            broker.run(messaging.send([CoreMessage("orders", b"x", "m2", properties=bad)]))
    with pytest.raises(InvalidArgument, match="cannot be delayed"):
        broker.run(messaging.send([CoreMessage("orders", b"x", "m3", properties={"__SHARDINGKEY": "g"}, deliver_at=1)]))
    with pytest.raises(ValueError, match="cannot be delayed"):
        Message(topic="orders", body=b"x", message_group="g", delay=5)
    assert store_snapshot(broker.broker.store.path.parent) == before
    with Producer(broker=broker.address) as producer:
        assert producer.send(Message(topic="ordered-only", body=b"ok", message_group="g")).queue_offset == 0


@pytest.fixture
def official(tmp_path):
    pytest.importorskip("rocketmq", reason="the rocketmq extra (official RocketMQ 5 Python client) is not installed")
    broker = BrokerThread(broker_settings(tmp_path / "data", topics=(Topic("orders", 4), Topic("line", 2))))
    yield broker, f"127.0.0.1:{broker.broker.rocketmq_port}", {**os.environ, "HOME": str(tmp_path / "home")}
    broker.stop()


def fifo_program(endpoint: str, env: dict[str, str], *args: str, timeout: float = 120) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "tests.programs.rmq5_fifo", endpoint, *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


def in_send_order(lines: list[str]) -> None:
    """Groups a, b and c as sent: four each, and a's native message last."""
    got = [line.split()[1] for line in lines if line.startswith("GOT")]
    for group in "abc":
        sent = [f"{group}{n}" for n in range(1, 5)] + (["a-native"] if group == "a" else [])
        assert [body for body in got if body[0] == group] == sent, got


@pytest.mark.e2e
def test_official_fifo_producer_and_consumers_keep_each_message_group_in_order_one_at_a_time(official):
    broker, endpoint, env = official
    sent = fifo_program(endpoint, env, "send", "a,b,c", "4")
    assert len([line for line in sent if line.startswith("SENT")]) == 12
    with PullConsumer(group="audit", broker=broker.address) as consumer:
        stored = [m for q in range(2) for m in consumer.pull("line", queue_id=q, offset=0).messages]
    assert {m.message_group for m in stored} == {"a", "b", "c"}
    for group in "abc":
        assert len({m.queue_id for m in stored if m.message_group == group}) == 1, "one queue per message group"
    with Producer(broker=broker.address) as producer:  # the native protocol puts a group in the same queue
        native = producer.send(Message(topic="line", body=b"a-native", message_group="a"))
    assert native.queue_id == next(m.queue_id for m in stored if m.message_group == "a")
    for group in ("simple-fifo", "push-fifo"):
        set_fifo(broker, group)
    simple = fifo_program(endpoint, env, "simple", "simple-fifo")
    assert not [line for line in simple if line.startswith("OVERLAP")], simple
    in_send_order(simple)
    pushed = fifo_program(endpoint, env, "push", "push-fifo", "ok", "7")
    assert not [line for line in pushed if line.startswith("OVERLAP")], pushed
    in_send_order(pushed)
    concurrent = fifo_program(endpoint, env, "simple", "concurrent")
    assert [line for line in concurrent if line.startswith("OVERLAP")], "a concurrent group reads groups at once"


@pytest.mark.e2e
def test_an_official_fifo_push_consumer_that_always_fails_retries_then_dead_letters_in_order(official):
    broker, endpoint, env = official
    fifo_program(endpoint, env, "send", "a", "2")
    set_fifo(broker, "failing-fifo", max_attempts=3, backoff_seconds=[0.2])
    pushed = fifo_program(endpoint, env, "push", "failing-fifo", "failing", "7")
    # Told the group is FIFO, the client retries each message itself (its delivery attempt stays 1),
    # then forwards it to the dead letters, which lets the next one of its group through.
    assert [line for line in pushed if line.startswith("GOT")] == ["GOT a1 1"] * 3 + ["GOT a2 1"] * 3
    with PullConsumer(group="audit", broker=broker.address) as consumer:
        letters = consumer.pull("%DLQ%failing-fifo", queue_id=0, offset=0).messages
    assert [m.body for m in letters] == [b"a1", b"a2"]
