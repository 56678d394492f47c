"""Kafka scenarios with kafka-python, written as its examples are; each prints its observable
outcome as one JSON line, the same against halfmq and against Apache Kafka. The scenarios and the
outcome's keys are kafka_confluent.py's, so the same departures apply.

    kafka_kafkapython.py BOOTSTRAP PREFIX SCENARIO

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

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import KafkaError, for_code

Outcome = dict[str, Any]
WAIT = 30.0  # seconds a scenario waits for what it expects before it records what it has


def error_name(error: BaseException | int) -> str | None:
    """Kafka's name for an error code or a library error: the protocol's name where the class
    carries one (``message``), else the class's own name (a local error such as KafkaTimeoutError)."""
    found = for_code(error) if isinstance(error, int) else type(error)
    if found.__name__ == "NoError":
        return None
    return getattr(found, "message", None) or found.__name__


def create(bootstrap: str, *topics: tuple[str, int]) -> dict[str, str | None]:
    """Create topics; each one's error name, or None."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        response = admin.create_topics({name: {"num_partitions": n} for name, n in topics}, raise_errors=False)
    finally:
        admin.close()
    return {topic["name"]: error_name(topic["error_code"]) for topic in response["topics"]}


def describe(bootstrap: str, *topics: str) -> list[dict[str, Any]]:
    """Topics as the cluster's metadata has them (all when none are named)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        found: list[dict[str, Any]] = admin.describe_topics(list(topics) or None)
    finally:
        admin.close()
    return found


def record(message: ConsumerRecord) -> list[Any]:
    headers = [[name, value.hex() if value is not None else None] for name, value in message.headers]
    key = message.key.decode() if message.key is not None else None
    return [message.partition, message.offset, key, message.value.decode(), headers]


def consume(consumer: KafkaConsumer, count: int, wait: float = WAIT) -> list[ConsumerRecord]:
    """Up to ``count`` messages, or what came within ``wait`` seconds."""
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + wait
    while len(got) < count and time.monotonic() < deadline:
        got += [message for messages in consumer.poll(timeout_ms=200).values() for message in messages]
    return got


def consumer(bootstrap: str, group: str, *topics: str, **config: Any) -> KafkaConsumer:
    """A consumer of ``group``, subscribed to ``topics`` if any are named."""
    made = KafkaConsumer(*topics, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                         enable_auto_commit=False, **config)  # fmt: skip
    known(made, *topics)
    return made


def known(member: KafkaConsumer, *topics: str) -> None:
    """Fetch the topics' partitions before the first poll: kafka-python 3.0.12 may otherwise join
    before it knows them and, when its poll ends during the second join, never apply that join's
    assignment (docs/kafka-clients.md, a kafka-python consumer's first join)."""
    for topic in topics:
        member.partitions_for_topic(topic)


def produce(bootstrap: str, topic: str, values: list[str], partitions: int = 1, **config: Any) -> list[list[Any]]:
    """Send values (key k<i>, headers n=<i> and bin=00ff), value i to partition i % partitions;
    the acknowledged partition and offset of each."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    futures = [
        producer.send(topic, value=value.encode(), key=f"k{i}".encode(), partition=i % partitions,
                      headers=[("n", str(i).encode()), ("bin", b"\x00\xff")])
        for i, value in enumerate(values)
    ]  # fmt: skip
    producer.flush(WAIT)
    acked = []
    for i, future in enumerate(futures):
        try:
            metadata = future.get(timeout=WAIT)
            acked.append([metadata.partition, metadata.offset, None])
        except KafkaError as exc:
            acked.append([i % partitions, -1, error_name(exc)])
    producer.close()
    return sorted(acked)


def produce_consume(bootstrap: str, prefix: str) -> Outcome:
    topic = f"{prefix}-orders"
    created = create(bootstrap, (topic, 3))
    acked = produce(bootstrap, topic, [f"v{i}" for i in range(12)], partitions=3)
    reader = consumer(bootstrap, f"{prefix}-readers", topic)
    messages = consume(reader, 12)
    reader.close()
    return {"created": created[topic], "acked": acked, "records": sorted(record(m) for m in messages),
            "timestamp_types": sorted({m.timestamp_type for m in messages})}  # fmt: skip


def topics(bootstrap: str, prefix: str) -> Outcome:
    dotted = f"{prefix}.orders.created"
    created = create(bootstrap, (f"{prefix}-a", 3), (dotted, 2))
    again = create(bootstrap, (f"{prefix}-a", 3))
    invalid = create(bootstrap, ("bad name!", 1))
    deadline = time.monotonic() + WAIT
    # Until the created ones are listed: a broker's metadata may lag a creation it acknowledged
    # (Kafka's does, briefly).
    while True:
        mine = {t["name"]: len(t["partitions"]) for t in describe(bootstrap) if t["name"].startswith(prefix)}
        if {f"{prefix}-a", dotted} <= mine.keys() or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    acked = produce(bootstrap, dotted, ["d0", "d1"], partitions=2)
    reader = consumer(bootstrap, f"{prefix}-dotted", dotted)
    values = sorted(m.value.decode() for m in consume(reader, 2))
    reader.close()
    return {"created": created, "again": again, "invalid": invalid, "listed": mine, "dotted_acked": acked,
            "dotted_read": values}  # fmt: skip


def auto_create(bootstrap: str, prefix: str) -> Outcome:
    """A producer and a consumer name topics nobody created."""
    topic = f"{prefix}-auto"
    acked = produce(bootstrap, topic, ["a0"])
    [listed] = describe(bootstrap, topic)
    reader = consumer(bootstrap, f"{prefix}-auto", topic)
    values = [m.value.decode() for m in consume(reader, 1)]
    reader.close()
    return {"acked": acked, "partitions": len(listed["partitions"]), "error": error_name(listed["error_code"]),
            "read": values}  # fmt: skip


def _stable(members: list[KafkaConsumer], total: int) -> list[int]:
    """Poll every member, each in a thread of its own, until their assignments cover ``total``
    partitions, none empty. One thread polling them in turn lets each poll end while its member
    joins, and kafka-python 3.0.12 may then drop that join's assignment (as on a first join)."""
    deadline = time.monotonic() + WAIT

    def settled() -> bool:
        sizes = [len(m.assignment()) for m in members]
        return sum(sizes) == total and all(sizes)

    def keep_polling(member: KafkaConsumer) -> None:
        while not settled() and time.monotonic() < deadline:
            member.poll(timeout_ms=1000)

    threads = [threading.Thread(target=keep_polling, args=(member,)) for member in members]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(len(m.assignment()) for m in members)


def group_together(bootstrap: str, prefix: str) -> Outcome:
    """Two consumers of a new group start together; between them they read every record."""
    topic, group = f"{prefix}-t", f"{prefix}-together"
    create(bootstrap, (topic, 4))
    produce(bootstrap, topic, [f"v{i}" for i in range(40)], partitions=4)
    members = [consumer(bootstrap, group) for _ in range(2)]
    seen: set[str] = set()

    def read(member: KafkaConsumer) -> None:
        member.subscribe([topic])
        known(member, topic)
        deadline = time.monotonic() + WAIT
        while len(seen) < 40 and time.monotonic() < deadline:
            for messages in member.poll(timeout_ms=200).values():
                seen.update(m.value.decode() for m in messages)
                last = messages[-1]
                with contextlib.suppress(KafkaError):  # a rebalance under way: a later commit carries it
                    member.commit({TopicPartition(topic, last.partition): OffsetAndMetadata(last.offset + 1)})

    threads = [threading.Thread(target=read, args=(m,)) for m in members]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sizes = _stable(members, 4)
    for member in members:
        read_to = {tp: OffsetAndMetadata(member.position(tp)) for tp in member.assignment()}
        if read_to:
            with contextlib.suppress(KafkaError):  # a rebalance under way: what it read was committed as it read
                member.commit(read_to)
        member.close()
    return {"distinct": len(seen), "assignment_sizes": sizes, "committed": committed(bootstrap, group, topic, 4)}


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int | None]:
    reader = consumer(bootstrap, group)
    found = [reader.committed(TopicPartition(topic, p)) for p in range(partitions)]
    reader.close()
    return found


def group_late_and_leaving(bootstrap: str, prefix: str) -> Outcome:
    """One consumer reads and commits; a second joins late and takes half the partitions; records
    sent then are each read once; when the second leaves, the first takes every partition back."""
    topic, group = f"{prefix}-late", f"{prefix}-late"
    create(bootstrap, (topic, 4))
    produce(bootstrap, topic, [f"old{i}" for i in range(8)], partitions=4)
    first = consumer(bootstrap, group, topic)
    old = consume(first, 8)
    first.commit()
    second = consumer(bootstrap, group, topic)
    members = [first, second]
    joined = _stable(members, 4)
    produce(bootstrap, topic, [f"new{i}" for i in range(8)], partitions=4)
    new: list[str] = []
    deadline = time.monotonic() + WAIT
    while len(new) < 8 and time.monotonic() < deadline:
        for member in members:
            for messages in member.poll(timeout_ms=100).values():
                new += [m.value.decode() for m in messages]
                last = messages[-1]
                member.commit({TopicPartition(topic, last.partition): OffsetAndMetadata(last.offset + 1)})
    second.close()
    deadline = time.monotonic() + WAIT
    while len(first.assignment()) < 4 and time.monotonic() < deadline:
        first.poll(timeout_ms=200)
    after = len(first.assignment())
    first.close()
    return {"old": sorted(m.value.decode() for m in old), "assignment_sizes_joined": joined,
            "new": sorted(new), "assignment_after_leave": after,
            "committed": committed(bootstrap, group, topic, 4)}  # fmt: skip


def offsets(bootstrap: str, prefix: str) -> Outcome:
    """Offsets committed by hand, fetched back, and where a new member of the group starts."""
    topic, group = f"{prefix}-off", f"{prefix}-offsets"
    create(bootstrap, (topic, 2))
    produce(bootstrap, topic, [f"v{i}" for i in range(10)], partitions=2)
    first = consumer(bootstrap, group)
    partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    first.assign(partitions)
    first.commit({partitions[0]: OffsetAndMetadata(3), partitions[1]: OffsetAndMetadata(5)})
    fetched = [first.committed(tp) for tp in partitions]
    low, high = first.beginning_offsets(partitions), first.end_offsets(partitions)
    marks = [[low[tp], high[tp]] for tp in partitions]
    first.close()
    nothing = consumer(bootstrap, f"{prefix}-nothing")
    none = nothing.committed(partitions[0])
    nothing.close()
    second = consumer(bootstrap, group, topic)
    starts = sorted({m.partition: m.offset for m in reversed(consume(second, 2))}.items())
    second.close()
    return {"fetched": fetched, "watermarks": marks, "none_committed": none, "starts": starts}


def idempotent(bootstrap: str, prefix: str) -> Outcome:
    topic = f"{prefix}-idem"
    create(bootstrap, (topic, 2))
    acked = produce(bootstrap, topic, [f"v{i}" for i in range(50)], partitions=2, enable_idempotence=True)
    reader = consumer(bootstrap, f"{prefix}-idem", topic)
    read = consume(reader, 60, wait=5)
    reader.close()
    return {"acked": acked, "read": sorted([m.partition, m.offset, m.value.decode()] for m in read)}


def transactional(bootstrap: str, transactional_id: str, **config: Any) -> KafkaProducer:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, **config)
    producer.init_transactions()
    return producer


def read_all(bootstrap: str, group: str, topic: str, isolation: str, expect: int, wait: float) -> list[list[Any]]:
    reader = consumer(bootstrap, group, topic, isolation_level=isolation)
    read = [[m.offset, m.value.decode()] for m in consume(reader, expect, wait)]
    reader.close()
    return read


def failure(producer: KafkaProducer, exc: KafkaError) -> dict[str, Any]:
    """An error's name, and what the producer can do after it: ask it to abort the transaction
    (abortable), then to begin another (not fatal)."""
    abortable = fatal = False
    try:
        producer.abort_transaction()
        abortable = True
        producer.begin_transaction()
        producer.abort_transaction()
    except KafkaError:
        fatal = not abortable
    return {"name": error_name(exc), "fatal": fatal, "abortable": abortable}


def transactions(bootstrap: str, prefix: str) -> Outcome:
    """Committed, aborted and open transactions, read with read_committed and read_uncommitted."""
    topic = f"{prefix}-txn"
    create(bootstrap, (topic, 1))
    producer = transactional(bootstrap, f"{prefix}-t1")
    for values, commit in ((["c1", "c2"], True), (["a1"], False), (["c3"], True)):
        producer.begin_transaction()
        for value in values:
            producer.send(topic, value=value.encode(), partition=0).get(timeout=WAIT)
        producer.commit_transaction() if commit else producer.abort_transaction()
    opened = transactional(bootstrap, f"{prefix}-t2")
    opened.begin_transaction()
    opened.send(topic, value=b"o1", partition=0).get(timeout=WAIT)
    producer.begin_transaction()
    producer.send(topic, value=b"c4", partition=0)  # after the open one: held back with it
    producer.commit_transaction()
    committed_view = read_all(bootstrap, f"{prefix}-rc1", topic, "read_committed", 5, 5)
    uncommitted_view = read_all(bootstrap, f"{prefix}-ru", topic, "read_uncommitted", 6, 5)
    reader = consumer(bootstrap, f"{prefix}-marks", isolation_level="read_committed")  # librdkafka's default
    tp = TopicPartition(topic, 0)
    high = reader.end_offsets([tp])[tp]
    reader.close()
    opened.commit_transaction()
    after = read_all(bootstrap, f"{prefix}-rc2", topic, "read_committed", 5, 10)
    producer.close()
    opened.close()
    return {
        "read_committed_while_open": [value for _, value in committed_view],
        "read_committed_while_open_offsets": [offset for offset, _ in committed_view],
        "read_uncommitted_while_open": [value for _, value in uncommitted_view],
        "high_watermark_while_open": high,
        "read_committed_after": [value for _, value in after],
        "read_committed_after_offsets": [offset for offset, _ in after],
    }


def fencing(bootstrap: str, prefix: str) -> Outcome:
    """A second producer with the same transactional_id fences the first."""
    topic, txn_id = f"{prefix}-fence", f"{prefix}-fenced"
    create(bootstrap, (topic, 1))
    first = transactional(bootstrap, txn_id)
    first.begin_transaction()
    first.send(topic, value=b"x1", partition=0).get(timeout=WAIT)
    second = transactional(bootstrap, txn_id)
    error = None
    try:
        first.send(topic, value=b"x1b", partition=0)
        first.commit_transaction()
    except KafkaError as exc:
        error = failure(first, exc)
    second.begin_transaction()
    second.send(topic, value=b"x2", partition=0)
    second.commit_transaction()
    read = [value for _, value in read_all(bootstrap, f"{prefix}-fence", topic, "read_committed", 3, 5)]
    first.close()
    second.close()
    return {"first_error": error, "read_committed": read}


def send_offsets(bootstrap: str, prefix: str) -> Outcome:
    """Consume-transform-produce: outputs and the input's offsets in one transaction."""
    source, sink, group = f"{prefix}-in", f"{prefix}-out", f"{prefix}-transform"
    create(bootstrap, (source, 1), (sink, 1))
    produce(bootstrap, source, [f"v{i}" for i in range(5)])
    reader = consumer(bootstrap, group, source, isolation_level="read_committed")
    inputs = consume(reader, 5)
    producer = transactional(bootstrap, f"{prefix}-transformer")
    producer.begin_transaction()
    for message in inputs:
        producer.send(sink, value=b"out-" + message.value, partition=0)
    positions = {tp: OffsetAndMetadata(reader.position(tp)) for tp in reader.assignment()}
    producer.send_offsets_to_transaction(positions, reader.group_metadata())
    producer.commit_transaction()
    reader.close()
    producer.close()
    out = [value for _, value in read_all(bootstrap, f"{prefix}-check", sink, "read_committed", 5, 10)]
    return {"outputs": out, "committed": committed(bootstrap, group, source, 1)}


def transaction_timeout(bootstrap: str, prefix: str) -> Outcome:
    """A transaction left open past transaction_timeout_ms is aborted by the broker."""
    topic = f"{prefix}-timeout"
    create(bootstrap, (topic, 1))
    producer = transactional(bootstrap, f"{prefix}-slow", transaction_timeout_ms=3000)
    producer.begin_transaction()
    producer.send(topic, value=b"late", partition=0).get(timeout=WAIT)
    time.sleep(8)  # past the timeout and the broker's next look at open transactions
    error = None
    try:
        producer.commit_transaction()
    except KafkaError as exc:
        error = failure(producer, exc)
    read = [value for _, value in read_all(bootstrap, f"{prefix}-timeout", topic, "read_committed", 2, 5)]
    producer.close()
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
