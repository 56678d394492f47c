"""The Kafka port against the native columnar paths, side by side on one broker process (sync
flush, 1 KB distinct bodies), in rounds whose order turns by one each round:

- produce: confluent-kafka's Producer (acks=all, linger.ms=5, its default batching) sending the
  bodies, to flush, beside ``Producer.send_table`` of the same bodies as one Arrow table; and the
  same Producer batching as Java's producer does by default, and Spark's Kafka sink with it (16 KB
  batches, no linger: some 15 records a produce request). Each produce prints the broker's CPU
  time per record too;
- consume: a confluent-kafka Consumer reading them all back (assigned every partition, from
  offset 0), beside ``PullConsumer.pull_table`` over every queue. Each starts once the broker's
  packer has packed what the produce before it wrote (the wait is printed): the packer reads a
  topic's rows back into segments for columnar readers, and a consume started during it shares
  the CPU with it, which measures the produce's leftover work rather than the consume;
- transactions of ten messages: confluent-kafka's transactional producer (begin, ten produces,
  commit) beside the native ``KafkaTransactionProducer``, one after another.

    .venv/bin/python -m bench.kafka --messages 200000 --transactions 500 --rounds 2

Goals: produce and consume at least 0.5 of the native columnar paths, transactions at least 0.8
of the native producer's rate.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka import Producer as KafkaProducer

from bench.delays import cpu_seconds
from bench.fresh_backlog import wait_packed
from bench.produce import bodies_table, distinct_bodies
from bench.spark_kafka import rotated
from bench.txn import start_broker
from halfmq_testing import free_port
from producer_sdk import KafkaTransactionProducer, Message, Producer, PullConsumer

PARTITIONS = 4
WAYS = ("kafka", "native", "kafka 16 KB")
TXN_SIZE = 10


# librdkafka's batching (its default linger.ms), and Java's producer's defaults.
BATCHING = {"kafka": {"linger.ms": 5}, "kafka 16 KB": {"linger.ms": 0, "batch.size": 16384}}


def topic_of(way: str, round_: int) -> str:
    return f"{way.replace(' ', '')}{round_}"


def kafka_produce(bootstrap: str, topic: str, bodies: list[bytes], batching: dict[str, int]) -> float:
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "acks": "all", **batching})
    failed: list[object] = []
    began = time.perf_counter()
    for body in bodies:
        while True:
            try:
                producer.produce(topic, value=body, on_delivery=lambda err, _: err and failed.append(err))
                break
            except BufferError:  # the client's queue is full: let it send
                producer.poll(0.01)
    assert producer.flush(120) == 0 and not failed, failed[:1]
    return len(bodies) / (time.perf_counter() - began)


def native_produce(address: str, topic: str, bodies: list[bytes]) -> float:
    table = bodies_table(bodies)
    with Producer(broker=address) as producer:
        began = time.perf_counter()
        producer.send_table(topic, table)
        return len(bodies) / (time.perf_counter() - began)


def kafka_consume(bootstrap: str, topic: str, count: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    began = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    read = 0
    while read < count:
        read += sum(1 for m in consumer.consume(num_messages=10_000, timeout=1.0) if not m.error())
    elapsed = time.perf_counter() - began
    consumer.close()
    return count / elapsed


def native_consume(address: str, topic: str, count: int) -> float:
    with PullConsumer(group="bench", broker=address) as consumer:
        began, read = time.perf_counter(), 0
        for queue_id in range(PARTITIONS):
            offset, high = 0, consumer.queue_offsets(topic)[queue_id][1]
            while offset < high:
                pulled = consumer.pull_table(topic, queue_id=queue_id, offset=offset, max_messages=1024)
                read += pulled.messages.num_rows
                offset = pulled.next_offset
        assert read == count, (read, count)
        return count / (time.perf_counter() - began)


def kafka_transactions(bootstrap: str, topic: str, count: int, body: bytes, size: int = TXN_SIZE) -> float:
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{time.time_ns()}",
                              "linger.ms": 0})  # fmt: skip
    producer.init_transactions(30)
    began = time.perf_counter()
    for _ in range(count):
        producer.begin_transaction()
        for _ in range(size):
            producer.produce(topic, value=body)
        producer.commit_transaction(30)
    return count / (time.perf_counter() - began)


def native_transactions(address: str, topic: str, count: int, body: bytes) -> float:
    with KafkaTransactionProducer(transactional_id=f"bench-{time.time_ns()}", broker=address) as producer:
        began = time.perf_counter()
        for _ in range(count):
            producer.begin_transaction()
            for _ in range(TXN_SIZE):
                producer.send(Message(topic=topic, body=body))
            producer.commit_transaction()
        return count / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--transactions", type=int, default=500)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    bodies = distinct_bodies(args.messages, args.body)
    rates: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}  # broker CPU us a record, by way of producing
    waits: list[float] = []  # seconds the packer took after a produce, before its consume

    def timed(name: str, run: Callable[..., float], *run_args: object) -> None:
        rates.setdefault(name, []).append(run(*run_args))

    def produced(name: str, pid: int, run: Callable[..., float], *run_args: object) -> None:
        before = cpu_seconds(pid)
        timed(f"produce {name}", run, *run_args)
        cpu.setdefault(name, []).append((cpu_seconds(pid) - before) / len(bodies) * 1e6)

    for round_ in range(args.rounds):
        data = tempfile.mkdtemp(prefix="halfmq-bench-kafka-")
        kafka_port = free_port()
        topics = [arg for way in WAYS for arg in ("--topic", f"{topic_of(way, round_)}:{PARTITIONS}")]
        broker, address = start_broker(Path(data), "--flush", "sync", "--kafka-port", str(kafka_port), *topics)
        bootstrap = f"127.0.0.1:{kafka_port}"
        try:
            for way in rotated(WAYS, round_):
                topic = topic_of(way, round_)
                if way == "native":
                    produced(way, broker.pid, native_produce, address, topic, bodies)
                    waits.append(wait_packed(Path(data), topic, len(bodies), PARTITIONS))
                    timed("consume native", native_consume, address, topic, len(bodies))
                    timed("txn native", native_transactions, address, topic, args.transactions, bodies[0])
                else:
                    produced(way, broker.pid, kafka_produce, bootstrap, topic, bodies, BATCHING[way])
                if way == "kafka":
                    waits.append(wait_packed(Path(data), topic, len(bodies), PARTITIONS))
                    timed("consume kafka", kafka_consume, bootstrap, topic, len(bodies))
                    timed("txn kafka", kafka_transactions, bootstrap, topic, args.transactions, bodies[0])
        finally:
            broker.terminate()
            broker.wait()
            shutil.rmtree(data, ignore_errors=True)
    print(f"config: messages={args.messages} body={args.body}B transactions={args.transactions} of {TXN_SIZE}"
          f" flush=sync cpus={os.cpu_count()} rounds={args.rounds}")  # fmt: skip
    for name, measured in rates.items():
        unit = "txn/s" if name.startswith("txn") else "msg/s"
        print(f"{name}: {' / '.join(f'{r:,.0f}' for r in measured)} {unit}, mean {statistics.mean(measured):,.0f}")
    for name, measured in cpu.items():
        print(f"broker CPU, produce {name}: {' / '.join(f'{c:,.0f}' for c in measured)} us a record")
    print(f"packing after a produce: {' / '.join(f'{w:.1f}' for w in waits)} s before its consume")
    for kind, goal in (("produce", 0.5), ("consume", 0.5), ("txn", 0.8)):
        ratio = statistics.mean(rates[f"{kind} kafka"]) / statistics.mean(rates[f"{kind} native"])
        print(f"ratio {kind}: kafka / native {ratio:.2f} (goal: at least {goal})")


if __name__ == "__main__":
    main()
