"""RocketMQ 5 scenarios with the official Python client (the ``rocketmq`` package), written as its
examples are; each prints its observable outcome as one JSON line, the same against halfmq and
against Apache RocketMQ 5's proxy.

    rmq5_python.py ENDPOINT PREFIX SCENARIO    run SCENARIO, print its outcome
    rmq5_python.py --needs PREFIX SCENARIO     print the topics and consumer groups it uses

A RocketMQ 5 client cannot create topics or groups: the one who runs a scenario creates what
``--needs`` names first ({"topics": [[name, queues, message type]], "groups": [[name, max
attempts or null, fifo]]}). PREFIX starts every one of their names, so runs never meet.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

Outcome = dict[str, Any]
WAIT = 30.0  # seconds a scenario waits for what it expects before it records what it has
# Seconds from a dead letter's last failed attempt to its dead-letter topic's route: 15 s were
# not enough for the real broker on a machine busy with the test run.
DEAD_LETTER_WAIT = 60.0
AWAIT = 1  # seconds a receive long-polls (the peer's proxy is configured to allow it)
EMPTY_ROUNDS = 3  # empty receives in a row that end a drain
DELAY = 5  # seconds ahead a delayed message is due
SQL_FILTER = "TAGS = 'paid' AND n > 1 OR n = 0"  # the normal scenario's SQL92 filter

# What each scenario uses: topics (suffix, queues, message type), groups (suffix, max attempts, fifo).
NEEDS: dict[str, tuple[list[tuple[str, int, str]], list[tuple[str, int | None, bool]]]] = {
    "normal": ([("orders", 2, "NORMAL")], [("readers", None, False), ("tagged", None, False), ("sql", None, False)]),
    "async-send": ([("async", 2, "NORMAL")], [("readers", None, False)]),
    "delay": ([("delayed", 2, "DELAY")], [("readers", None, False)]),
    "fifo": ([("line", 1, "FIFO")], [("fifo", None, True)]),
    "transaction": ([("txn", 2, "TRANSACTION")], [("readers", None, False)]),
    "invisible-duration": ([("work", 1, "NORMAL")], [("workers", None, False)]),
    "dead-letter": ([("jobs", 1, "NORMAL")], [("failing", 3, False), ("dlq-readers", None, False)]),
    "recall": ([("timeouts", 2, "DELAY")], [("readers", None, False)]),
}


def needs(prefix: str, scenario: str) -> dict[str, list[list[Any]]]:
    topics, groups = NEEDS[scenario]
    return {"topics": [[f"{prefix}-{name}", queues, kind] for name, queues, kind in topics],
            "groups": [[f"{prefix}-{name}", attempts, fifo] for name, attempts, fifo in groups]}  # fmt: skip


if __name__ == "__main__" and sys.argv[1] == "--needs":
    print(json.dumps(needs(sys.argv[2], sys.argv[3])))
    sys.exit(0)

# The client configures logging and OpenTelemetry on import: only a run needs it.
from rocketmq import (  # noqa: E402
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)
from rocketmq.grpc_protocol import Code, FilterType  # noqa: E402
from rocketmq.v5.exception import ClientException, InternalErrorException  # noqa: E402


def configuration(endpoint: str) -> ClientConfiguration:
    return ClientConfiguration(endpoint, Credentials())


def message(topic: str, body: str, *, tag: str | None = None, keys: Iterable[str] = (),
            properties: dict[str, str] | None = None) -> Message:  # fmt: skip
    msg = Message()
    msg.topic, msg.body = topic, body.encode()
    if tag is not None:
        msg.tag = tag
    for key in keys:  # the setter adds one key
        msg.keys = key
    for name, value in (properties or {}).items():
        msg.add_property(name, value)
    return msg


def producer(endpoint: str, *topics: str, checker: TransactionChecker | None = None) -> Producer:
    started = Producer(configuration(endpoint), topics, checker)
    started.startup()
    return started


def consumer(endpoint: str, group: str, topic: str, expression: str = "*", kind: int = FilterType.TAG
             ) -> SimpleConsumer:  # fmt: skip
    started = SimpleConsumer(
        configuration(endpoint), group, {topic: FilterExpression(expression, kind)}, await_duration=AWAIT
    )
    started.startup()
    return started


def receive(reader: SimpleConsumer, max_messages: int, invisible: int) -> list[Message]:
    """One receive, as an application retries it: the first ones after startup may find the
    group's settings not yet there (INTERNAL_ERROR), which a later one does."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            return list(reader.receive(max_messages, invisible))
        except InternalErrorException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def drain(reader: SimpleConsumer, count: int, *, wait: float = WAIT, invisible: int = 15) -> list[Message]:
    """Receive and acknowledge until ``count`` messages came, or ``wait`` seconds passed; then
    until EMPTY_ROUNDS receives in a row come back empty (anything more, redeliveries included)."""
    got: list[Message] = []
    deadline, empty = time.monotonic() + wait, 0
    while time.monotonic() < deadline and (len(got) < count or empty < EMPTY_ROUNDS):
        batch = receive(reader, 16, invisible)
        empty = 0 if batch else empty + 1
        for msg in batch:
            got.append(msg)
            reader.ack(msg)
    return got


def drain_routed(reader: SimpleConsumer, wait: float) -> list[Message] | None:
    """``drain`` of a topic that the broker creates, its route asked again each second while it
    has none; None if it has none within ``wait`` seconds. (This client starts without a topic's
    route, and its first receive asks for it.)"""
    deadline = time.monotonic() + wait
    while True:
        try:
            return drain(reader, 1)
        except Exception as exc:  # the client raises a bare Exception for a topic without a route
            if "route" not in str(exc) and not isinstance(exc, ClientException):
                raise
            if time.monotonic() > deadline:
                return None
            time.sleep(1)


def seen(msg: Message) -> Outcome:
    """What a consumer observes of a message but its body, without ids, hosts or times."""
    return {
        "topic": msg.topic,
        "tag": msg.tag,
        "keys": sorted(msg.keys),
        "properties": dict(sorted(msg.properties.items())),
        "message_group": msg.message_group,
        "message_type": Message.message_type_desc(msg.message_type),
        "delivery_attempt": msg.delivery_attempt,
    }


def by_body(messages: Iterable[Message]) -> dict[str, Outcome]:
    """What a consumer observed of each message, by body (a body that came twice counts in ``count``)."""
    return {m.body.decode(): seen(m) for m in sorted(messages, key=lambda m: m.body)}


def named(read: dict[str, Outcome], names: dict[str, str]) -> dict[str, Outcome]:
    """``read`` with property values that are ids this run made (``names``' keys) named instead."""
    for got in read.values():
        got["properties"] = {key: names.get(value, value) for key, value in got["properties"].items()}
    return read


def code_name(exc: ClientException) -> str:
    return str(Code.Name(exc.code)) if exc.code is not None else type(exc).__name__


def normal(endpoint: str, prefix: str) -> Outcome:
    """Messages with keys, a tag and properties, read by one group whole, one filtering by tag and
    one by an SQL92 expression over the properties and the tag."""
    topic = f"{prefix}-orders"
    sender = producer(endpoint, topic)
    receipts = [
        sender.send(message(topic, f"order-{i}", tag=("created", "paid")[i % 2], keys=(f"o-{i}", f"c-{i % 2}"),
                            properties={"n": str(i), "region": "eu-west"}))
        for i in range(4)
    ]  # fmt: skip
    sender.shutdown()
    everyone = consumer(endpoint, f"{prefix}-readers", topic)
    read = drain(everyone, 4)
    everyone.shutdown()
    filtering = consumer(endpoint, f"{prefix}-tagged", topic, "paid")
    tagged = drain(filtering, 2)
    filtering.shutdown()
    selecting = consumer(endpoint, f"{prefix}-sql", topic, SQL_FILTER, FilterType.SQL)
    selected = drain(selecting, 2)
    selecting.shutdown()
    return {"sent": len(receipts), "ids_distinct": len({r.message_id for r in receipts}) == len(receipts),
            "count": len(read), "read": by_body(read),
            "read_by_tag": sorted(m.body.decode() for m in tagged),
            "read_by_sql": sorted(m.body.decode() for m in selected)}  # fmt: skip


def async_send(endpoint: str, prefix: str) -> Outcome:
    topic = f"{prefix}-async"
    sender = producer(endpoint, topic)
    futures = [sender.send_async(message(topic, f"a-{i}", tag="async")) for i in range(5)]
    receipts = [future.result(timeout=WAIT) for future in futures]
    sender.shutdown()
    reader = consumer(endpoint, f"{prefix}-readers", topic)
    read = drain(reader, 5)
    reader.shutdown()
    return {"acked": len(receipts), "ids_distinct": len({r.message_id for r in receipts}) == 5,
            "read": sorted([m.body.decode(), m.tag, m.delivery_attempt] for m in read)}  # fmt: skip


def delay(endpoint: str, prefix: str) -> Outcome:
    """A message due DELAY seconds from now (a whole second: RocketMQ's timer counts whole seconds)."""
    topic = f"{prefix}-delayed"
    reader = consumer(endpoint, f"{prefix}-readers", topic)
    sender = producer(endpoint, topic)
    due = int(time.time()) + DELAY
    delayed = message(topic, "remind", tag="reminder", keys=("r-1",))
    delayed.delivery_timestamp = due
    receipt = sender.send(delayed)
    sender.shutdown()
    arrivals: list[tuple[Message, float]] = []
    deadline, empty = time.monotonic() + DELAY + WAIT, 0
    while time.monotonic() < deadline and (not arrivals or empty < EMPTY_ROUNDS):
        batch = receive(reader, 16, 15)
        empty = 0 if batch else empty + 1
        for msg in batch:
            arrivals.append((msg, time.time()))
            reader.ack(msg)
    reader.shutdown()
    return {"recall_handle_given": bool(receipt.recall_handle), "count": len(arrivals),
            "read": {m.body.decode(): {**seen(m), "arrived_after_due": at >= due,
                                       "delivery_timestamp_is_due": m.delivery_timestamp == due * 1000}
                     for m, at in arrivals}}  # fmt: skip


def fifo(endpoint: str, prefix: str) -> Outcome:
    """Two message groups interleaved on one queue, read by a FIFO consumer group: while what a
    receive gave is unacknowledged nothing more of its message groups comes; each group's
    messages come in send order."""
    topic, groups = f"{prefix}-line", ("a", "b")
    sender = producer(endpoint, topic)
    for n in range(1, 4):
        for group in groups:
            msg = message(topic, f"{group}{n}")
            msg.message_group = group
            sender.send(msg)
    sender.shutdown()
    reader = consumer(endpoint, f"{prefix}-fifo", topic)
    first: list[Message] = []
    deadline = time.monotonic() + WAIT
    while not first and time.monotonic() < deadline:
        first = receive(reader, 16, 20)
    held = [m.body.decode() for _ in range(2) for m in receive(reader, 16, 20)]  # while the first are in flight
    for msg in first:
        reader.ack(msg)
    rest = drain(reader, 6 - len(first))
    reader.shutdown()
    order: dict[str, list[str]] = {}
    for msg in first + rest:
        order.setdefault(msg.message_group, []).append(msg.body.decode())
    return {"first_receive": [m.body.decode() for m in first], "while_in_flight": held, "order": order,
            "attempts": sorted({m.delivery_attempt for m in first + rest}),
            "message_types": sorted({Message.message_type_desc(m.message_type) for m in first + rest})}  # fmt: skip


class Checker(TransactionChecker):
    """Answers a check-back as the service's records say: COMMIT for what it wrote."""

    def __init__(self, written: set[str]) -> None:
        self.written = written
        self.checked: set[str] = set()
        self.lock = threading.Lock()

    def check(self, message: Message) -> TransactionResolution:
        body = message.body.decode()
        with self.lock:
            self.checked.add(body)
        return TransactionResolution.COMMIT if body in self.written else TransactionResolution.ROLLBACK


def transaction(endpoint: str, prefix: str) -> Outcome:
    """A committed, a rolled back and a transaction whose outcome is unknown (the producer ends it
    neither way), which the broker checks back and the checker commits."""
    topic = f"{prefix}-txn"
    checker = Checker({"t-commit", "t-unknown"})
    sender = producer(endpoint, topic, checker=checker)
    transaction_ids = set()
    for body in ("t-commit", "t-rollback", "t-unknown"):
        pending = sender.begin_transaction()
        transaction_ids.add(sender.send(message(topic, body, tag="txn", keys=(body,)), pending).transaction_id)
        if body == "t-commit":
            pending.commit()
        elif body == "t-rollback":
            pending.rollback()
    reader = consumer(endpoint, f"{prefix}-readers", topic)
    read = drain(reader, 2, wait=WAIT + 10)  # the check-back comes after the transaction timeout
    reader.shutdown()
    sender.shutdown()
    with checker.lock:
        checked = sorted(checker.checked)
    # RocketMQ delivers at least once: a check-back's commit may come twice, so bodies, not a count.
    return {"read": named(by_body(read), dict.fromkeys(transaction_ids, "<transaction id>")), "checked": checked}


def invisible_duration(endpoint: str, prefix: str) -> Outcome:
    """A message received for 30 s, its invisible duration changed to 2 s: it comes again, attempt 2."""
    topic = f"{prefix}-work"
    sender = producer(endpoint, topic)
    sender.send(message(topic, "job-1", tag="job"))
    sender.shutdown()
    reader = consumer(endpoint, f"{prefix}-workers", topic)
    first: list[Message] = []
    deadline = time.monotonic() + WAIT
    while not first and time.monotonic() < deadline:
        first = receive(reader, 1, 30)
    reader.change_invisible_duration(first[0], 2)
    again = drain(reader, 1)
    reader.shutdown()
    return {"first": [[m.body.decode(), m.delivery_attempt] for m in first],
            "again": [[m.body.decode(), m.delivery_attempt] for m in again]}  # fmt: skip


class Failing(MessageListener):
    """A listener whose every consumption fails; it notes each delivery attempt it sees."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int]] = []
        self.times: list[float] = []
        self.lock = threading.Lock()

    def consume(self, message: Message) -> ConsumeResult:
        with self.lock:
            self.attempts.append((message.body.decode(), message.delivery_attempt))
            self.times.append(time.monotonic())
        return ConsumeResult.FAILURE


def dead_letter(endpoint: str, prefix: str) -> Outcome:
    """A PushConsumer whose listener always fails, in a group of 3 attempts: the message is
    delivered 3 times, then found in the group's dead-letter topic %DLQ%<group>."""
    topic, group = f"{prefix}-jobs", f"{prefix}-failing"
    sender = producer(endpoint, topic)
    sent = sender.send(message(topic, "poison", tag="job", keys=("p-1",), properties={"kind": "poison"}))
    sender.shutdown()
    listener = Failing()
    pushing = PushConsumer(configuration(endpoint), group, listener, {topic: FilterExpression()})
    pushing.startup()
    deadline = time.monotonic() + WAIT
    while len(listener.attempts) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    # The message goes to the dead-letter topic when it is visible again (after the last
    # failure's backoff) and the group receives again: the reader reads once that topic exists.
    reader = consumer(endpoint, f"{prefix}-dlq-readers", f"%DLQ%{group}")
    try:
        dead = drain_routed(reader, DEAD_LETTER_WAIT)
    finally:
        reader.shutdown()
    pushing.shutdown()
    with listener.lock:
        attempts = list(listener.attempts)
    # The first retry after RocketMQ 5's 1 s backoff, not the 10 s of its broker-side schedule;
    # 9 s leaves a loaded machine's slower redelivery room.
    retried_soon = len(attempts) > 1 and listener.times[1] - listener.times[0] < 9
    if dead is None:
        return {"attempts": attempts, "retried_within_9s": retried_soon, "dead_letters": "no dead-letter topic"}
    return {"attempts": attempts, "retried_within_9s": retried_soon, "dead_letter_count": len(dead),
            "dead_letters": named(by_body(dead), {sent.message_id: "<sent message id>"})}  # fmt: skip


def recall(endpoint: str, prefix: str) -> Outcome:
    """Two order timeouts due DELAY seconds from now; one order is paid, its timeout recalled
    (twice, as a duplicated payment event would); only the other comes, and recalling that one
    after it came fails."""
    topic = f"{prefix}-timeouts"
    reader = consumer(endpoint, f"{prefix}-readers", topic)
    sender = producer(endpoint, topic)
    due = int(time.time()) + DELAY
    receipts = {}
    for order in ("o-paid", "o-unpaid"):
        msg = message(topic, f"expire {order}", tag="timeout", keys=(order,))
        msg.delivery_timestamp = due
        receipts[order] = sender.send(msg)
    recalled = sender.recall_message(topic, receipts["o-paid"].recall_handle)
    again = _recall(sender, topic, receipts["o-paid"].recall_handle)
    read = drain(reader, 1, wait=DELAY + WAIT)
    after = _recall(sender, topic, receipts["o-unpaid"].recall_handle)
    sender.shutdown()
    reader.shutdown()
    return {"recalled_id_is_sent_id": recalled == receipts["o-paid"].message_id, "recall_again": again,
            "read": [m.body.decode() for m in read], "recall_after_delivery": after}  # fmt: skip


def _recall(sender: Producer, topic: str, handle: str) -> str:
    """``OK`` when the recall succeeds, else the status code's name."""
    try:
        sender.recall_message(topic, handle)
    except ClientException as exc:
        return code_name(exc)
    return "OK"


SCENARIOS: dict[str, Callable[[str, str], Outcome]] = {
    "normal": normal,
    "async-send": async_send,
    "delay": delay,
    "fifo": fifo,
    "transaction": transaction,
    "invisible-duration": invisible_duration,
    "dead-letter": dead_letter,
    "recall": recall,
}

if __name__ == "__main__":
    endpoint, prefix, scenario = sys.argv[1:4]
    print(json.dumps(SCENARIOS[scenario](endpoint, prefix)), flush=True)
