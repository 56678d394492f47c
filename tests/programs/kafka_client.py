"""An application of one official Kafka client (confluent-kafka, kafka-python or aiokafka) against
halfmq's Kafka port, for the tests: each mode does one thing and prints JSON lines.

    kafka_client.py CLIENT BOOTSTRAP create TOPIC PARTITIONS
    kafka_client.py CLIENT BOOTSTRAP produce TOPIC COUNT FIRST   -> one line per acked record
    kafka_client.py CLIENT BOOTSTRAP consume TOPIC GROUP         -> {"assigned": [...]}, {"record": ...}
    kafka_client.py CLIENT BOOTSTRAP committed TOPIC GROUP PARTITIONS

``consume`` commits each record it prints and runs until a line arrives on its stdin, then
closes (leaving the group). Records carry key k<i>, value v<i> and headers n=<i>, bin=00ff.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any


def out(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def record_fields(i: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    return f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode()), ("bin", b"\x00\xff")]


def shown(partition: int, offset: int, key: bytes, value: bytes, headers: Any) -> dict[str, Any]:
    return {
        "partition": partition,
        "offset": offset,
        "key": key.decode(),
        "value": value.decode(),
        "headers": [[name, value.hex()] for name, value in headers or []],
    }


def stop_requested() -> threading.Event:
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    return stop


def confluent(bootstrap: str, mode: str, args: list[str]) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    if mode == "create":
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(args[0], num_partitions=int(args[1]))]).values():
            future.result()
        out(created=args[0])
    elif mode == "produce":
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        for i in range(int(args[2]), int(args[2]) + int(args[1])):
            key, value, headers = record_fields(i)

            def acked(err: Any, msg: Any, headers: Any = headers) -> None:
                assert err is None, err
                out(**shown(msg.partition(), msg.offset(), msg.key(), msg.value(), headers))

            producer.produce(args[0], key=key, value=value, headers=headers, on_delivery=acked)
        assert producer.flush(30) == 0
    elif mode == "consume":
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": args[1], "auto.offset.reset": "earliest",
             "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
        )  # fmt: skip
        consumer.subscribe(
            [args[0]],
            on_assign=lambda c, parts: out(assigned=sorted(p.partition for p in parts)),
            on_revoke=lambda c, parts: out(revoked=sorted(p.partition for p in parts)),
        )
        stop = stop_requested()
        while not stop.is_set():
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            out(record=shown(msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers()))
            consumer.commit(message=msg, asynchronous=False)
        consumer.close()
        out(closed=True)
    elif mode == "committed":
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": args[1]})
        parts = [TopicPartition(args[0], p) for p in range(int(args[2]))]
        out(committed={p.partition: p.offset for p in consumer.committed(parts, timeout=10)})
        consumer.close()


def kafka_python(bootstrap: str, mode: str, args: list[str]) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.structs import OffsetAndMetadata

    if mode == "create":
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(args[0], int(args[1]), 1)])
        admin.close()
        out(created=args[0])
    elif mode == "produce":
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        futures = []
        for i in range(int(args[2]), int(args[2]) + int(args[1])):
            key, value, headers = record_fields(i)
            futures.append((producer.send(args[0], key=key, value=value, headers=headers), key, value, headers))
        for future, key, value, headers in futures:
            meta = future.get(timeout=30)
            out(**shown(meta.partition, meta.offset, key, value, headers))
        producer.close()
    elif mode == "consume":
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=args[1], auto_offset_reset="earliest", enable_auto_commit=False,
            session_timeout_ms=6000, heartbeat_interval_ms=500,
        )  # fmt: skip

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_assigned(self, assigned: Any) -> None:
                out(assigned=sorted(p.partition for p in assigned))

            def on_partitions_revoked(self, revoked: Any) -> None:
                out(revoked=sorted(p.partition for p in revoked))

        consumer.subscribe([args[0]], listener=Listener())
        stop = stop_requested()
        while not stop.is_set():
            for part, records in consumer.poll(timeout_ms=200).items():
                for r in records:
                    out(record=shown(r.partition, r.offset, r.key, r.value, r.headers))
                    consumer.commit({part: OffsetAndMetadata(r.offset + 1, "", -1)})
        consumer.close()
        out(closed=True)
    elif mode == "committed":
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=args[1], enable_auto_commit=False)
        out(committed={p: consumer.committed(TopicPartition(args[0], p)) for p in range(int(args[2]))})
        consumer.close()


async def aiokafka(bootstrap: str, mode: str, args: list[str]) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.abc import ConsumerRebalanceListener
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    if mode == "create":
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(args[0], int(args[1]), 1)])
        await admin.close()
        out(created=args[0])
    elif mode == "produce":
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        await producer.start()
        sent = []
        for i in range(int(args[2]), int(args[2]) + int(args[1])):
            key, value, headers = record_fields(i)
            sent.append((await producer.send(args[0], key=key, value=value, headers=headers), key, value, headers))
        for future, key, value, headers in sent:
            meta = await future
            out(**shown(meta.partition, meta.offset, key, value, headers))
        await producer.stop()
    elif mode == "consume":
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=args[1], auto_offset_reset="earliest", enable_auto_commit=False,
            session_timeout_ms=6000, heartbeat_interval_ms=500,
        )  # fmt: skip

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_assigned(self, assigned: Any) -> None:
                out(assigned=sorted(p.partition for p in assigned))

            async def on_partitions_revoked(self, revoked: Any) -> None:
                out(revoked=sorted(p.partition for p in revoked))

        await consumer.start()
        consumer.subscribe([args[0]], listener=Listener())
        stop = stop_requested()
        while not stop.is_set():
            for part, records in (await consumer.getmany(timeout_ms=200)).items():
                for r in records:
                    out(record=shown(r.partition, r.offset, r.key, r.value, r.headers))
                    await consumer.commit({part: r.offset + 1})
        await consumer.stop()
        out(closed=True)
    elif mode == "committed":
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=args[1], enable_auto_commit=False)
        await consumer.start()
        out(committed={p: await consumer.committed(TopicPartition(args[0], p)) for p in range(int(args[2]))})
        await consumer.stop()


if __name__ == "__main__":
    client, bootstrap, mode, *rest = sys.argv[1:]
    if client == "aiokafka":
        asyncio.run(aiokafka(bootstrap, mode, rest))
    else:
        {"confluent-kafka": confluent, "kafka-python": kafka_python}[client](bootstrap, mode, rest)
