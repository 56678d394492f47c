"""Kafka scenarios with confluent-kafka, written as its examples are; each prints its observable
outcome as one JSON line, the same against halfmq and against Apache Kafka.

    kafka_confluent.py BOOTSTRAP PREFIX SCENARIO

PREFIX starts every topic, group and transactional id the scenario makes, so runs never meet.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

Outcome = dict[str, Any]
WAIT = 30.0  # seconds a scenario waits for what it expects before it records what it has


def create(bootstrap: str, *topics: tuple[str, int]) -> dict[str, str | None]:
    """Create topics; each one's error name, or None."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions) for name, partitions in topics])
    return {name: _error_name(future) for name, future in futures.items()}


def _error_name(future: Any) -> str | None:
    try:
        future.result(timeout=WAIT)
    except KafkaException as exc:
        return str(exc.args[0].name())
    return None


def record(message: Any) -> list[Any]:
    headers = [[name, value.hex() if value is not None else None] for name, value in message.headers() or []]
    key = message.key().decode() if message.key() is not None else None
    return [message.partition(), message.offset(), key, message.value().decode(), headers]


def consume(consumer: Consumer, count: int, wait: float = WAIT) -> list[Any]:
    """Up to ``count`` messages, or what came within ``wait`` seconds."""
    got: list[Any] = []
    deadline = time.monotonic() + wait
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            got.append(message)
    return got


def consumer(bootstrap: str, group: str, **config: Any) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, **config})  # fmt: skip


def produce(bootstrap: str, topic: str, values: list[str], partitions: int = 1, **config: Any) -> list[list[Any]]:
    """Send values (key k<i>, headers n=<i> and bin=00ff), value i to partition i % partitions;
    the acknowledged partition and offset of each."""
    producer = Producer({"bootstrap.servers": bootstrap, **config})
    acked: list[list[Any]] = []

    def delivered(err: KafkaError | None, msg: Any) -> None:
        acked.append([msg.partition(), msg.offset(), err and err.name()])

    for i, value in enumerate(values):
        headers = [("n", str(i).encode()), ("bin", b"\x00\xff")]
        producer.produce(topic, value.encode(), f"k{i}".encode(), i % partitions, delivered, headers=headers)
    producer.flush(WAIT)
    return sorted(acked)


def produce_consume(bootstrap: str, prefix: str) -> Outcome:
    topic = f"{prefix}-orders"
    created = create(bootstrap, (topic, 3))
    acked = produce(bootstrap, topic, [f"v{i}" for i in range(12)], partitions=3)
    reader = consumer(bootstrap, f"{prefix}-readers")
    reader.subscribe([topic])
    messages = consume(reader, 12)
    reader.close()
    return {"created": created[topic], "acked": acked, "records": sorted(record(m) for m in messages),
            "timestamp_types": sorted({m.timestamp()[0] for m in messages})}  # fmt: skip


def topics(bootstrap: str, prefix: str) -> Outcome:
    dotted = f"{prefix}.orders.created"
    created = create(bootstrap, (f"{prefix}-a", 3), (dotted, 2))
    again = create(bootstrap, (f"{prefix}-a", 3))
    invalid = create(bootstrap, ("bad name!", 1))
    admin, deadline = AdminClient({"bootstrap.servers": bootstrap}), time.monotonic() + WAIT
    # Until the created ones are listed: a broker's metadata may lag a creation it acknowledged
    # (Kafka's does, briefly).
    while True:
        listed = admin.list_topics(timeout=WAIT).topics
        mine = {name: len(t.partitions) for name, t in listed.items() if name.startswith(prefix)}
        if {f"{prefix}-a", dotted} <= mine.keys() or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    acked = produce(bootstrap, dotted, ["d0", "d1"], partitions=2)
    reader = consumer(bootstrap, f"{prefix}-dotted")
    reader.subscribe([dotted])
    values = sorted(m.value().decode() for m in consume(reader, 2))
    reader.close()
    return {"created": created, "again": again, "invalid": invalid, "listed": mine, "dotted_acked": acked,
            "dotted_read": values}  # fmt: skip


def auto_create(bootstrap: str, prefix: str) -> Outcome:
    """A producer and a consumer name topics nobody created."""
    topic = f"{prefix}-auto"
    acked = produce(bootstrap, topic, ["a0"])
    listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=WAIT).topics[topic]
    reader = consumer(bootstrap, f"{prefix}-auto")
    reader.subscribe([topic])
    values = [m.value().decode() for m in consume(reader, 1)]
    reader.close()
    error = listed.error.name() if listed.error else None
    return {"acked": acked, "partitions": len(listed.partitions), "error": error, "read": values}


def _stable(members: list[Consumer], total: int) -> list[int]:
    """Poll every member until their assignments cover ``total`` partitions, none empty."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        for member in members:
            member.poll(0.1)
        sizes = sorted(len(m.assignment()) for m in members)
        if sum(sizes) == total and all(sizes):
            return sizes
    return sorted(len(m.assignment()) for m in members)


def group_together(bootstrap: str, prefix: str) -> Outcome:
    """Two consumers of a new group start together; between them they read every record."""
    topic, group = f"{prefix}-t", f"{prefix}-together"
    create(bootstrap, (topic, 4))
    produce(bootstrap, topic, [f"v{i}" for i in range(40)], partitions=4)
    members = [consumer(bootstrap, group) for _ in range(2)]
    seen: set[str] = set()

    def read(member: Consumer) -> None:
        member.subscribe([topic])
        deadline = time.monotonic() + WAIT
        while len(seen) < 40 and time.monotonic() < deadline:
            message = member.poll(0.2)
            if message is not None and not message.error():
                seen.add(message.value().decode())
                with contextlib.suppress(KafkaException):  # a rebalance under way: a later commit carries it
                    member.commit(message, asynchronous=False)

    threads = [threading.Thread(target=read, args=(m,)) for m in members]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sizes = _stable(members, 4)
    for member in members:
        read_to = [tp for tp in member.position(member.assignment()) if tp.offset >= 0]
        if read_to:
            member.commit(offsets=read_to, asynchronous=False)
        member.close()
    return {"distinct": len(seen), "assignment_sizes": sizes, "committed": committed(bootstrap, group, topic, 4)}


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    reader = consumer(bootstrap, group)
    found = reader.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=WAIT)
    reader.close()
    return [tp.offset for tp in found]


def group_late_and_leaving(bootstrap: str, prefix: str) -> Outcome:
    """One consumer reads and commits; a second joins late and takes half the partitions; records
    sent then are each read once; when the second leaves, the first takes every partition back."""
    topic, group = f"{prefix}-late", f"{prefix}-late"
    create(bootstrap, (topic, 4))
    produce(bootstrap, topic, [f"old{i}" for i in range(8)], partitions=4)
    first = consumer(bootstrap, group)
    first.subscribe([topic])
    old = consume(first, 8)
    first.commit(asynchronous=False)
    second = consumer(bootstrap, group)
    second.subscribe([topic])
    members = [first, second]
    joined = _stable(members, 4)
    produce(bootstrap, topic, [f"new{i}" for i in range(8)], partitions=4)
    new: list[str] = []
    deadline = time.monotonic() + WAIT
    while len(new) < 8 and time.monotonic() < deadline:
        for member in members:
            message = member.poll(0.1)
            if message is not None and not message.error():
                new.append(message.value().decode())
                member.commit(message, asynchronous=False)
    second.close()
    deadline = time.monotonic() + WAIT
    while len(first.assignment()) < 4 and time.monotonic() < deadline:
        first.poll(0.2)
    after = len(first.assignment())
    first.close()
    return {"old": sorted(m.value().decode() for m in old), "assignment_sizes_joined": joined,
            "new": sorted(new), "assignment_after_leave": after,
            "committed": committed(bootstrap, group, topic, 4)}  # fmt: skip


def offsets(bootstrap: str, prefix: str) -> Outcome:
    """Offsets committed by hand, fetched back, and where a new member of the group starts."""
    topic, group = f"{prefix}-off", f"{prefix}-offsets"
    create(bootstrap, (topic, 2))
    produce(bootstrap, topic, [f"v{i}" for i in range(10)], partitions=2)
    first = consumer(bootstrap, group)
    first.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    first.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 5)], asynchronous=False)
    fetched = [tp.offset for tp in first.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=WAIT)]
    marks = [list(first.get_watermark_offsets(TopicPartition(topic, p), timeout=WAIT)) for p in (0, 1)]
    first.close()
    none = consumer(bootstrap, f"{prefix}-nothing").committed([TopicPartition(topic, 0)], timeout=WAIT)[0].offset
    second = consumer(bootstrap, group)
    second.subscribe([topic])
    starts = sorted({m.partition(): m.offset() for m in reversed(consume(second, 2))}.items())
    second.close()
    # an offset past the partition's end is kept as committed; a member then starts where
    # auto.offset.reset says (earliest)
    third = consumer(bootstrap, f"{prefix}-past-end")
    past_end = third.commit(offsets=[TopicPartition(topic, 0, 100)], asynchronous=False)
    kept = third.committed([TopicPartition(topic, 0)], timeout=WAIT)[0].offset
    third.close()
    fourth = consumer(bootstrap, f"{prefix}-past-end")
    fourth.assign([TopicPartition(topic, 0)])  # from the committed offset
    reset = [m.offset() for m in consume(fourth, 1)]
    fourth.close()
    return {"fetched": fetched, "watermarks": marks, "none_committed": none, "starts": starts,
            "past_end": [[tp.offset, tp.error and tp.error.name()] for tp in past_end], "past_end_kept": kept,
            "past_end_reset": reset}  # fmt: skip


def idempotent(bootstrap: str, prefix: str) -> Outcome:
    topic = f"{prefix}-idem"
    create(bootstrap, (topic, 2))
    acked = produce(bootstrap, topic, [f"v{i}" for i in range(50)], partitions=2, **{"enable.idempotence": True})
    reader = consumer(bootstrap, f"{prefix}-idem")
    reader.subscribe([topic])
    read = consume(reader, 60, wait=5)
    reader.close()
    return {"acked": acked, "read": sorted([m.partition(), m.offset(), m.value().decode()] for m in read)}


def transactional(bootstrap: str, transactional_id: str, **config: Any) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **config})
    producer.init_transactions(WAIT)
    return producer


def read_all(bootstrap: str, group: str, topic: str, isolation: str, expect: int, wait: float) -> list[list[Any]]:
    reader = consumer(bootstrap, group, **{"isolation.level": isolation})
    reader.subscribe([topic])
    read = [[m.offset(), m.value().decode()] for m in consume(reader, expect, wait)]
    reader.close()
    return read


def transactions(bootstrap: str, prefix: str) -> Outcome:
    """Committed, aborted and open transactions, read with read_committed and read_uncommitted."""
    topic = f"{prefix}-txn"
    create(bootstrap, (topic, 1))
    producer = transactional(bootstrap, f"{prefix}-t1")
    for values, commit in ((["c1", "c2"], True), (["a1"], False), (["c3"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value=value.encode(), partition=0)
        producer.commit_transaction(WAIT) if commit else producer.abort_transaction(WAIT)
    opened = transactional(bootstrap, f"{prefix}-t2")
    opened.begin_transaction()
    opened.produce(topic, value=b"o1", partition=0)
    opened.flush(WAIT)
    producer.begin_transaction()
    producer.produce(topic, value=b"c4", partition=0)  # after the open one: held back with it
    producer.commit_transaction(WAIT)
    committed_view = read_all(bootstrap, f"{prefix}-rc1", topic, "read_committed", 5, 5)
    uncommitted_view = read_all(bootstrap, f"{prefix}-ru", topic, "read_uncommitted", 6, 5)
    reader = consumer(bootstrap, f"{prefix}-marks")
    high = reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT)[1]
    reader.close()
    opened.commit_transaction(WAIT)
    after = read_all(bootstrap, f"{prefix}-rc2", topic, "read_committed", 5, 10)
    return {
        "read_committed_while_open": [value for _, value in committed_view],
        "read_committed_while_open_offsets": [offset for offset, _ in committed_view],
        "read_uncommitted_while_open": [value for _, value in uncommitted_view],
        "high_watermark_while_open": high,
        "read_committed_after": [value for _, value in after],
        "read_committed_after_offsets": [offset for offset, _ in after],
    }


def fencing(bootstrap: str, prefix: str) -> Outcome:
    """A second producer with the same transactional.id fences the first."""
    topic, txn_id = f"{prefix}-fence", f"{prefix}-fenced"
    create(bootstrap, (topic, 1))
    first = transactional(bootstrap, txn_id)
    first.begin_transaction()
    first.produce(topic, value=b"x1", partition=0)
    first.flush(WAIT)
    second = transactional(bootstrap, txn_id)
    error = None
    try:
        first.produce(topic, value=b"x1b", partition=0)
        first.commit_transaction(WAIT)
    except KafkaException as exc:
        kafka_error: KafkaError = exc.args[0]
        error = {"name": kafka_error.name(), "fatal": kafka_error.fatal(),
                 "abortable": kafka_error.txn_requires_abort()}  # fmt: skip
    second.begin_transaction()
    second.produce(topic, value=b"x2", partition=0)
    second.commit_transaction(WAIT)
    read = [value for _, value in read_all(bootstrap, f"{prefix}-fence", topic, "read_committed", 3, 5)]
    return {"first_error": error, "read_committed": read}


def send_offsets(bootstrap: str, prefix: str) -> Outcome:
    """Consume-transform-produce: outputs and the input's offsets in one transaction."""
    source, sink, group = f"{prefix}-in", f"{prefix}-out", f"{prefix}-transform"
    create(bootstrap, (source, 1), (sink, 1))
    produce(bootstrap, source, [f"v{i}" for i in range(5)])
    reader = consumer(bootstrap, group, **{"isolation.level": "read_committed"})
    reader.subscribe([source])
    inputs = consume(reader, 5)
    producer = transactional(bootstrap, f"{prefix}-transformer")
    producer.begin_transaction()
    for message in inputs:
        producer.produce(sink, value=b"out-" + message.value(), partition=0)
    producer.send_offsets_to_transaction(reader.position(reader.assignment()), reader.consumer_group_metadata())
    producer.commit_transaction(WAIT)
    reader.close()
    out = [value for _, value in read_all(bootstrap, f"{prefix}-check", sink, "read_committed", 5, 10)]
    # an offset past the input's end, sent by a producer outside the group, is kept as sent
    outside = consumer(bootstrap, f"{prefix}-past-end")
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(source, 0, 100)], outside.consumer_group_metadata())
    producer.commit_transaction(WAIT)
    outside.close()
    return {"outputs": out, "committed": committed(bootstrap, group, source, 1),
            "past_end": committed(bootstrap, f"{prefix}-past-end", source, 1)}  # fmt: skip


def transaction_timeout(bootstrap: str, prefix: str) -> Outcome:
    """A transaction left open past transaction.timeout.ms is aborted by the broker."""
    topic = f"{prefix}-timeout"
    create(bootstrap, (topic, 1))
    producer = transactional(bootstrap, f"{prefix}-slow", **{"transaction.timeout.ms": 3000})
    producer.begin_transaction()
    producer.produce(topic, value=b"late", partition=0)
    producer.flush(WAIT)
    time.sleep(8)  # past the timeout and the broker's next look at open transactions
    error = None
    try:
        producer.commit_transaction(WAIT)
    except KafkaException as exc:
        kafka_error: KafkaError = exc.args[0]
        error = {"name": kafka_error.name(), "fatal": kafka_error.fatal(),
                 "abortable": kafka_error.txn_requires_abort()}  # fmt: skip
    read = [value for _, value in read_all(bootstrap, f"{prefix}-timeout", topic, "read_committed", 2, 5)]
    return {"commit_error": error, "read_committed": read}


SCENARIOS: dict[str, Callable[[str, str], Outcome]] = {
    "produce-consume": produce_consume,
    "topics": topics,
    "auto-create": auto_create,
    "group-together": group_together,
    "group-late-and-leaving": group_late_and_leaving,
    "offsets": offsets,
    "idempotent": idempotent,
    "transactions": transactions,
    "fencing": fencing,
    "send-offsets": send_offsets,
    "transaction-timeout": transaction_timeout,
}

if __name__ == "__main__":
    bootstrap, prefix, scenario = sys.argv[1:4]
    print(json.dumps(SCENARIOS[scenario](bootstrap, prefix)), flush=True)
