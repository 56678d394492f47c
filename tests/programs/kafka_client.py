"""An application of one official Kafka client (confluent-kafka, kafka-python or aiokafka) against
halfmq's Kafka port, for the tests: each mode does one thing and prints JSON lines.

    kafka_client.py CLIENT BOOTSTRAP create TOPIC PARTITIONS
    kafka_client.py CLIENT BOOTSTRAP produce TOPIC COUNT FIRST   -> one line per acked record
    kafka_client.py CLIENT BOOTSTRAP consume TOPIC GROUP         -> {"assigned": [...]}, {"record": ...}
    kafka_client.py CLIENT BOOTSTRAP committed TOPIC GROUP PARTITIONS
    kafka_client.py CLIENT BOOTSTRAP transact TRANSACTIONAL_ID   (confluent-kafka, aiokafka)
    kafka_client.py CLIENT BOOTSTRAP read TOPIC[,TOPIC...]       (read_committed, every partition)
    kafka_client.py confluent-kafka BOOTSTRAP idempotent TOPIC
    kafka_client.py confluent-kafka BOOTSTRAP transactions TRANSACTIONAL_ID TOPIC
    kafka_client.py CLIENT BOOTSTRAP transform IN OUT GROUP TRANSACTIONAL_ID   (confluent-kafka, aiokafka)

``consume`` commits each record it prints and runs until a line arrives on its stdin, then
closes (leaving the group). Records carry key k<i>, value v<i> and headers n=<i>, bin=00ff.
``transact`` starts a transactional producer, then does what each line on its stdin says
(``begin``, ``produce TOPIC PARTITION VALUE``, ``flush``, ``commit``, ``abort``), printing
{"done": LINE} or {"error": ...}. ``read`` prints every value readable now, by topic, and
every record.
``idempotent`` sends values i0, i1, ... with an idempotent producer, one per 2.5 ms, until a line
arrives on its stdin, then flushes; it prints {"acked": VALUE} for each one the broker
acknowledged. ``transactions`` commits transactions of five values each (t<n>a<attempt>-<k>,
over the partitions) until a line arrives on its stdin, riding out a broker
that goes away: a retriable error retries the call, an abortable one aborts and tries again
(the next attempt), a fatal one starts a new producer; prints {"committed": "t<n>a<attempt>"}.
``transform`` consumes IN in GROUP (read_committed) and, in one transaction per batch, produces
"out-<value>" to OUT with the batch's offsets (a batch of 10 takes 50 ms of work), until killed;
prints {"committed": COUNT}.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
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
    elif mode == "transact":
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": args[0], "linger.ms": 0})
        producer.init_transactions(30)
        out(ready=True)
        for line in sys.stdin:
            command, *words = line.split()
            try:
                if command == "begin":
                    producer.begin_transaction()
                elif command == "produce":
                    producer.produce(words[0], partition=int(words[1]), value=words[2].encode())
                elif command == "flush":
                    assert producer.flush(30) == 0
                elif command == "commit":
                    producer.commit_transaction(30)
                elif command == "abort":
                    producer.abort_transaction(30)
                out(done=line.strip())
            except Exception as exc:
                out(error=str(exc))
    elif mode == "idempotent":
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})

        def acked(err: Any, msg: Any) -> None:
            if err is None:
                out(acked=msg.value().decode())

        stop, i = stop_requested(), 0
        while not stop.is_set():
            producer.produce(args[0], value=f"i{i}".encode(), on_delivery=acked)
            producer.poll(0)
            time.sleep(0.0025)
            i += 1
        assert producer.flush(120) == 0
        out(sent=i)
    elif mode == "transactions":
        transactions(bootstrap, args[0], args[1])
    elif mode == "transform":
        source, sink, group, transactional_id = args
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
             "enable.auto.commit": False, "isolation.level": "read_committed", "session.timeout.ms": 3000,
             "heartbeat.interval.ms": 300}
        )  # fmt: skip
        consumer.subscribe([source])
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
        producer.init_transactions(30)
        while True:
            batch = [m for m in consumer.consume(num_messages=10, timeout=0.2) if not m.error()]
            if not batch:
                continue
            time.sleep(0.05)  # the transform's own work
            producer.begin_transaction()
            for message in batch:
                producer.produce(sink, key=message.key(), value=b"out-" + message.value())
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            out(committed=len(batch))
    elif mode == "read":
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "reader", "isolation.level": "read_committed",
             "enable.auto.commit": False}
        )  # fmt: skip
        topics = args[0].split(",")
        metadata = consumer.list_topics(timeout=10).topics
        parts = [TopicPartition(t, p, 0) for t in topics for p in metadata[t].partitions]
        consumer.assign(parts)
        values: dict[str, list[str]] = {t: [] for t in topics}
        records: list[dict[str, Any]] = []
        ends = {(t, p.partition): consumer.get_watermark_offsets(p, timeout=10)[1] for t in topics
                for p in parts if p.topic == t}  # fmt: skip
        while any(consumer.position([TopicPartition(t, p)])[0].offset < end for (t, p), end in ends.items() if end):
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                values[msg.topic()].append(msg.value().decode())
                records.append(shown(msg.partition(), msg.offset(), msg.key() or b"", msg.value(), msg.headers()))
        out(values=values, records=records)
        consumer.close()


def transactions(bootstrap: str, transactional_id: str, topic: str) -> None:
    from confluent_kafka import KafkaException, Producer

    def new_producer() -> Any:
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
        retried(producer.init_transactions, 10)
        return producer

    def retried(call: Any, *args: Any) -> None:
        while True:
            try:
                return call(*args)
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise
                time.sleep(0.2)

    producer, attempt, n, stop = new_producer(), 0, 0, stop_requested()
    while not stop.is_set():
        n += 1
        while True:
            attempt += 1
            name = f"t{n}a{attempt}"
            try:
                retried(producer.begin_transaction)
                for k in range(5):
                    producer.produce(topic, partition=k % 4, value=f"{name}-{k}".encode())
                retried(producer.commit_transaction, 10)
                out(committed=name)
                time.sleep(0.05)
                break
            except KafkaException as exc:
                if exc.args[0].txn_requires_abort():
                    retried(producer.abort_transaction, 10)
                else:
                    producer = new_producer()


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
        consumer.partitions_for_topic(args[0])  # before the first join: docs/kafka-clients.md, kafka-python
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
    elif mode == "transform":
        await aiokafka_transform(bootstrap, *args)
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
    elif mode == "transact":
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=args[0])
        await producer.start()
        out(ready=True)
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            command, *words = line.split()
            try:
                if command == "begin":
                    await producer.begin_transaction()
                elif command == "produce":
                    await producer.send(words[0], partition=int(words[1]), value=words[2].encode())
                elif command == "flush":
                    await producer.flush()
                elif command == "commit":
                    await producer.commit_transaction()
                elif command == "abort":
                    await producer.abort_transaction()
                out(done=line.strip())
            except Exception as exc:
                out(error=repr(exc))
        await producer.stop()


async def aiokafka_transform(bootstrap: str, source: str, sink: str, group: str, transactional_id: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    consumer = AIOKafkaConsumer(
        source, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
        isolation_level="read_committed", session_timeout_ms=3000, heartbeat_interval_ms=300,
    )  # fmt: skip
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    await consumer.start()
    await producer.start()
    while True:
        batches = await consumer.getmany(timeout_ms=200, max_records=10)
        if not batches:
            continue
        await asyncio.sleep(0.05)  # the transform's own work
        async with producer.transaction():
            for records in batches.values():
                for record in records:
                    await producer.send(sink, key=record.key, value=b"out-" + record.value)
            offsets = {part: records[-1].offset + 1 for part, records in batches.items()}
            await producer.send_offsets_to_transaction(offsets, group)
        out(committed=sum(len(records) for records in batches.values()))


if __name__ == "__main__":
    client, bootstrap, mode, *rest = sys.argv[1:]
    if client == "aiokafka":
        asyncio.run(aiokafka(bootstrap, mode, rest))
    else:
        {"confluent-kafka": confluent, "kafka-python": kafka_python}[client](bootstrap, mode, rest)
