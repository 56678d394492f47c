"""Kafka scenarios with aiokafka, written as its examples are; each prints its observable outcome
as one JSON line, the same against halfmq and against Apache Kafka. The scenarios and the
outcome's keys are kafka_confluent.py's, so the same departures apply.

    kafka_aiokafka.py BOOTSTRAP PREFIX SCENARIO

PREFIX starts every topic, group and transactional id the scenario makes, so runs never meet.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, for_code

Outcome = dict[str, Any]
WAIT = 30.0  # seconds a scenario waits for what it expects before it records what it has


def error_name(error: BaseException | int) -> str | None:
    """Kafka's name for an error code or a library error: the protocol's name where the class
    carries one (``message``), else the class's own name (a local error such as ProducerFenced)."""
    found = for_code(error) if isinstance(error, int) else type(error)
    if found.__name__ == "NoError":
        return None
    return getattr(found, "message", None) or found.__name__


async def create(bootstrap: str, *topics: tuple[str, int]) -> dict[str, str | None]:
    """Create topics; each one's error name, or None."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response = await admin.create_topics([NewTopic(name, partitions, 1) for name, partitions in topics])
    finally:
        await admin.close()
    return {topic: error_name(code) for topic, code, *_ in response.topic_errors}


async def describe(bootstrap: str, *topics: str) -> list[dict[str, Any]]:
    """Topics as the cluster's metadata has them (all when none are named)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        found: list[dict[str, Any]] = await admin.describe_topics(list(topics) or None)
    finally:
        await admin.close()
    return found


def record(message: ConsumerRecord) -> list[Any]:
    headers = [[name, value.hex() if value is not None else None] for name, value in message.headers]
    key = message.key.decode() if message.key is not None else None
    return [message.partition, message.offset, key, message.value.decode(), headers]


async def consume(consumer: AIOKafkaConsumer, count: int, wait: float = WAIT) -> list[ConsumerRecord]:
    """Up to ``count`` messages, or what came within ``wait`` seconds."""
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + wait
    while len(got) < count and time.monotonic() < deadline:
        batches = await consumer.getmany(timeout_ms=200)
        got += [message for messages in batches.values() for message in messages]
    return got


async def consumer(bootstrap: str, group: str, *topics: str, **config: Any) -> AIOKafkaConsumer:
    """A started consumer of ``group``, subscribed to ``topics`` if any are named."""
    started = AIOKafkaConsumer(*topics, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                               enable_auto_commit=False, **config)  # fmt: skip
    await started.start()
    return started


async def produce(bootstrap: str, topic: str, values: list[str], partitions: int = 1, **config: Any) -> list[list[Any]]:
    """Send values (key k<i>, headers n=<i> and bin=00ff), value i to partition i % partitions;
    the acknowledged partition and offset of each."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **config)
    await producer.start()
    try:
        sent = [
            await producer.send(topic, value.encode(), f"k{i}".encode(), i % partitions,
                                headers=[("n", str(i).encode()), ("bin", b"\x00\xff")])
            for i, value in enumerate(values)
        ]  # fmt: skip
        acked = []
        for i, future in enumerate(sent):
            try:
                metadata = await future
                acked.append([metadata.partition, metadata.offset, None])
            except KafkaError as exc:
                acked.append([i % partitions, -1, error_name(exc)])
    finally:
        await producer.stop()
    return sorted(acked)


async def produce_consume(bootstrap: str, prefix: str) -> Outcome:
    topic = f"{prefix}-orders"
    created = await create(bootstrap, (topic, 3))
    acked = await produce(bootstrap, topic, [f"v{i}" for i in range(12)], partitions=3)
    reader = await consumer(bootstrap, f"{prefix}-readers", topic)
    messages = await consume(reader, 12)
    await reader.stop()
    return {"created": created[topic], "acked": acked, "records": sorted(record(m) for m in messages),
            "timestamp_types": sorted({m.timestamp_type for m in messages})}  # fmt: skip


async def topics(bootstrap: str, prefix: str) -> Outcome:
    dotted = f"{prefix}.orders.created"
    created = await create(bootstrap, (f"{prefix}-a", 3), (dotted, 2))
    again = await create(bootstrap, (f"{prefix}-a", 3))
    invalid = await create(bootstrap, ("bad name!", 1))
    deadline = time.monotonic() + WAIT
    # Until the created ones are listed: a broker's metadata may lag a creation it acknowledged
    # (Kafka's does, briefly).
    while True:
        mine = {t["topic"]: len(t["partitions"]) for t in await describe(bootstrap) if t["topic"].startswith(prefix)}
        if {f"{prefix}-a", dotted} <= mine.keys() or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    acked = await produce(bootstrap, dotted, ["d0", "d1"], partitions=2)
    reader = await consumer(bootstrap, f"{prefix}-dotted", dotted)
    values = sorted(m.value.decode() for m in await consume(reader, 2))
    await reader.stop()
    return {"created": created, "again": again, "invalid": invalid, "listed": mine, "dotted_acked": acked,
            "dotted_read": values}  # fmt: skip


async def auto_create(bootstrap: str, prefix: str) -> Outcome:
    """A producer and a consumer name topics nobody created."""
    topic = f"{prefix}-auto"
    acked = await produce(bootstrap, topic, ["a0"])
    [listed] = await describe(bootstrap, topic)
    reader = await consumer(bootstrap, f"{prefix}-auto", topic)
    values = [m.value.decode() for m in await consume(reader, 1)]
    await reader.stop()
    return {"acked": acked, "partitions": len(listed["partitions"]), "error": error_name(listed["error_code"]),
            "read": values}  # fmt: skip


async def _stable(members: list[AIOKafkaConsumer], total: int) -> list[int]:
    """Wait until the members' assignments cover ``total`` partitions, none empty (aiokafka
    rebalances in the background)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        sizes = sorted(len(m.assignment()) for m in members)
        if sum(sizes) == total and all(sizes):
            return sizes
        await asyncio.sleep(0.1)
    return sorted(len(m.assignment()) for m in members)


async def group_together(bootstrap: str, prefix: str) -> Outcome:
    """Two consumers of a new group start together; between them they read every record."""
    topic, group = f"{prefix}-t", f"{prefix}-together"
    await create(bootstrap, (topic, 4))
    await produce(bootstrap, topic, [f"v{i}" for i in range(40)], partitions=4)
    members = await asyncio.gather(*(consumer(bootstrap, group, topic) for _ in range(2)))
    seen: set[str] = set()

    async def read(member: AIOKafkaConsumer) -> None:
        deadline = time.monotonic() + WAIT
        while len(seen) < 40 and time.monotonic() < deadline:
            for messages in (await member.getmany(timeout_ms=200)).values():
                seen.update(m.value.decode() for m in messages)
                last = messages[-1]
                with contextlib.suppress(KafkaError):  # a rebalance under way: a later commit carries it
                    await member.commit({TopicPartition(topic, last.partition): last.offset + 1})

    await asyncio.gather(*(read(m) for m in members))
    sizes = await _stable(members, 4)
    for member in members:
        read_to = {tp: await member.position(tp) for tp in member.assignment()}
        if read_to:
            await member.commit(read_to)
        await member.stop()
    return {"distinct": len(seen), "assignment_sizes": sizes,
            "committed": await committed(bootstrap, group, topic, 4)}  # fmt: skip


async def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int | None]:
    reader = await consumer(bootstrap, group)
    found = [await reader.committed(TopicPartition(topic, p)) for p in range(partitions)]
    await reader.stop()
    return found


async def group_late_and_leaving(bootstrap: str, prefix: str) -> Outcome:
    """One consumer reads and commits; a second joins late and takes half the partitions; records
    sent then are each read once; when the second leaves, the first takes every partition back."""
    topic, group = f"{prefix}-late", f"{prefix}-late"
    await create(bootstrap, (topic, 4))
    await produce(bootstrap, topic, [f"old{i}" for i in range(8)], partitions=4)
    first = await consumer(bootstrap, group, topic)
    old = await consume(first, 8)
    await first.commit()
    second = await consumer(bootstrap, group, topic)
    members = [first, second]
    joined = await _stable(members, 4)
    await produce(bootstrap, topic, [f"new{i}" for i in range(8)], partitions=4)
    new: list[str] = []
    deadline = time.monotonic() + WAIT
    while len(new) < 8 and time.monotonic() < deadline:
        for member in members:
            for messages in (await member.getmany(timeout_ms=100)).values():
                new += [m.value.decode() for m in messages]
                await member.commit({TopicPartition(topic, messages[-1].partition): messages[-1].offset + 1})
    await second.stop()
    deadline = time.monotonic() + WAIT
    while len(first.assignment()) < 4 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    after = len(first.assignment())
    await first.stop()
    return {"old": sorted(m.value.decode() for m in old), "assignment_sizes_joined": joined,
            "new": sorted(new), "assignment_after_leave": after,
            "committed": await committed(bootstrap, group, topic, 4)}  # fmt: skip


async def offsets(bootstrap: str, prefix: str) -> Outcome:
    """Offsets committed by hand, fetched back, and where a new member of the group starts."""
    topic, group = f"{prefix}-off", f"{prefix}-offsets"
    await create(bootstrap, (topic, 2))
    await produce(bootstrap, topic, [f"v{i}" for i in range(10)], partitions=2)
    first = await consumer(bootstrap, group)
    partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    first.assign(partitions)
    await first.commit({partitions[0]: 3, partitions[1]: 5})
    fetched = [await first.committed(tp) for tp in partitions]
    low, high = await first.beginning_offsets(partitions), await first.end_offsets(partitions)
    marks = [[low[tp], high[tp]] for tp in partitions]
    await first.stop()
    nothing = await consumer(bootstrap, f"{prefix}-nothing")
    none = await nothing.committed(partitions[0])
    await nothing.stop()
    second = await consumer(bootstrap, group, topic)
    starts = sorted({m.partition: m.offset for m in reversed(await consume(second, 2))}.items())
    await second.stop()
    return {"fetched": fetched, "watermarks": marks, "none_committed": none, "starts": starts}


async def idempotent(bootstrap: str, prefix: str) -> Outcome:
    topic = f"{prefix}-idem"
    await create(bootstrap, (topic, 2))
    acked = await produce(bootstrap, topic, [f"v{i}" for i in range(50)], partitions=2, enable_idempotence=True)
    reader = await consumer(bootstrap, f"{prefix}-idem", topic)
    read = await consume(reader, 60, wait=5)
    await reader.stop()
    return {"acked": acked, "read": sorted([m.partition, m.offset, m.value.decode()] for m in read)}


async def transactional(bootstrap: str, transactional_id: str, **config: Any) -> AIOKafkaProducer:
    """A started transactional producer (starting it initialises its transactions)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, **config)
    await producer.start()
    return producer


async def read_all(bootstrap: str, group: str, topic: str, isolation: str, expect: int, wait: float) -> list[Any]:
    reader = await consumer(bootstrap, group, topic, isolation_level=isolation)
    read = [[m.offset, m.value.decode()] for m in await consume(reader, expect, wait)]
    await reader.stop()
    return read


async def failure(producer: AIOKafkaProducer, exc: KafkaError) -> dict[str, Any]:
    """An error's name, and what the producer can do after it: aiokafka has no fatal or abortable
    flag, so ask it to abort the transaction (abortable), then to begin another (not fatal)."""
    abortable = fatal = False
    try:
        await producer.abort_transaction()
        abortable = True
        await producer.begin_transaction()
        await producer.abort_transaction()
    except (KafkaError, AssertionError):  # aiokafka asserts its transaction state's transitions
        fatal = not abortable
    return {"name": error_name(exc), "fatal": fatal, "abortable": abortable}


async def transactions(bootstrap: str, prefix: str) -> Outcome:
    """Committed, aborted and open transactions, read with read_committed and read_uncommitted."""
    topic = f"{prefix}-txn"
    await create(bootstrap, (topic, 1))
    producer = await transactional(bootstrap, f"{prefix}-t1")
    async with producer.transaction():
        await producer.send_and_wait(topic, b"c1", partition=0)
        await producer.send_and_wait(topic, b"c2", partition=0)
    await producer.begin_transaction()
    await producer.send_and_wait(topic, b"a1", partition=0)
    await producer.abort_transaction()
    async with producer.transaction():
        await producer.send_and_wait(topic, b"c3", partition=0)
    opened = await transactional(bootstrap, f"{prefix}-t2")
    await opened.begin_transaction()
    await opened.send_and_wait(topic, b"o1", partition=0)
    async with producer.transaction():
        await producer.send_and_wait(topic, b"c4", partition=0)  # after the open one: held back with it
    committed_view = await read_all(bootstrap, f"{prefix}-rc1", topic, "read_committed", 5, 5)
    uncommitted_view = await read_all(bootstrap, f"{prefix}-ru", topic, "read_uncommitted", 6, 5)
    reader = await consumer(bootstrap, f"{prefix}-marks", isolation_level="read_committed")  # librdkafka's default
    tp = TopicPartition(topic, 0)
    high = (await reader.end_offsets([tp]))[tp]
    await reader.stop()
    await opened.commit_transaction()
    after = await read_all(bootstrap, f"{prefix}-rc2", topic, "read_committed", 5, 10)
    await producer.stop()
    await opened.stop()
    return {
        "read_committed_while_open": [value for _, value in committed_view],
        "read_committed_while_open_offsets": [offset for offset, _ in committed_view],
        "read_uncommitted_while_open": [value for _, value in uncommitted_view],
        "high_watermark_while_open": high,
        "read_committed_after": [value for _, value in after],
        "read_committed_after_offsets": [offset for offset, _ in after],
    }


async def fencing(bootstrap: str, prefix: str) -> Outcome:
    """A second producer with the same transactional id fences the first."""
    topic, txn_id = f"{prefix}-fence", f"{prefix}-fenced"
    await create(bootstrap, (topic, 1))
    first = await transactional(bootstrap, txn_id)
    await first.begin_transaction()
    await first.send_and_wait(topic, b"x1", partition=0)
    second = await transactional(bootstrap, txn_id)
    error = None
    try:
        await first.send_and_wait(topic, b"x1b", partition=0)
        await first.commit_transaction()
    except KafkaError as exc:
        error = await failure(first, exc)
    async with second.transaction():
        await second.send_and_wait(topic, b"x2", partition=0)
    read = [value for _, value in await read_all(bootstrap, f"{prefix}-fence", topic, "read_committed", 3, 5)]
    await first.stop()
    await second.stop()
    return {"first_error": error, "read_committed": read}


async def send_offsets(bootstrap: str, prefix: str) -> Outcome:
    """Consume-transform-produce: outputs and the input's offsets in one transaction."""
    source, sink, group = f"{prefix}-in", f"{prefix}-out", f"{prefix}-transform"
    await create(bootstrap, (source, 1), (sink, 1))
    await produce(bootstrap, source, [f"v{i}" for i in range(5)])
    reader = await consumer(bootstrap, group, source, isolation_level="read_committed")
    inputs = await consume(reader, 5)
    producer = await transactional(bootstrap, f"{prefix}-transformer")
    async with producer.transaction():
        commit_offsets = {}
        for message in inputs:
            await producer.send(sink, b"out-" + message.value, partition=0)
            commit_offsets[TopicPartition(message.topic, message.partition)] = message.offset + 1
        await producer.send_offsets_to_transaction(commit_offsets, group)
    await producer.stop()
    await reader.stop()
    out = [value for _, value in await read_all(bootstrap, f"{prefix}-check", sink, "read_committed", 5, 10)]
    return {"outputs": out, "committed": await committed(bootstrap, group, source, 1)}


async def transaction_timeout(bootstrap: str, prefix: str) -> Outcome:
    """A transaction left open past transaction_timeout_ms is aborted by the broker."""
    topic = f"{prefix}-timeout"
    await create(bootstrap, (topic, 1))
    producer = await transactional(bootstrap, f"{prefix}-slow", transaction_timeout_ms=3000)
    await producer.begin_transaction()
    await producer.send_and_wait(topic, b"late", partition=0)
    await asyncio.sleep(8)  # past the timeout and the broker's next look at open transactions
    error = None
    try:
        await producer.commit_transaction()
    except KafkaError as exc:
        error = await failure(producer, exc)
    read = [value for _, value in await read_all(bootstrap, f"{prefix}-timeout", topic, "read_committed", 2, 5)]
    await producer.stop()
    return {"commit_error": error, "read_committed": read}


SCENARIOS: dict[str, Callable[[str, str], Coroutine[Any, Any, Outcome]]] = {
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
    print(json.dumps(asyncio.run(SCENARIOS[scenario](bootstrap, prefix))), flush=True)
