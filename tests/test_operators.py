"""An operator's questions, answered by the admin API and the CLI from one implementation: where
is a message (by id, key or time), where did it go (its trace), moving, deleting and resending
for a consumer group, and deleting a topic."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading

import grpc
import httpx
import pyarrow as pa
from confluent_kafka import Consumer
from confluent_kafka import Producer as KafkaProducer

from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import Message, Producer, PullConsumer
from tests.support import send_half, store_snapshot, wait_until


def halfmq(broker, *args: str, code: int = 0) -> str:
    ran = subprocess.run(
        [sys.executable, "-m", "halfmq_cli", "--url", broker.http, *args], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == code, ran.stderr
    return ran.stdout + ran.stderr


def as_json(broker, *args: str):
    return json.loads(halfmq(broker, "--json", *args))


def kafka_send(broker, key: str, body: bytes) -> None:
    producer = KafkaProducer({"bootstrap.servers": f"127.0.0.1:{broker.broker.kafka_port}"})
    producer.produce("orders", body, key=key)
    assert producer.flush(30) == 0


def subscribed(broker, reset: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{broker.broker.kafka_port}", "group.id": "readers",
                         "auto.offset.reset": reset, "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe(["orders"])
    return consumer


def consume(consumer: Consumer, count: int, *, commit: bool) -> list[bytes]:
    values = []
    while len(values) < count:
        record = consumer.poll(1.0)
        if record is not None and record.error() is None:
            values.append(record.value())
            if commit:
                consumer.commit(record, asynchronous=False)
    return values


def test_a_message_sent_through_each_protocol_is_found_by_id_key_and_time(broker, clock):
    with Producer(broker=broker.address) as producer:
        sent = producer.send(Message(topic="orders", body=b"order o-7", keys=("o-7",)))
    kafka_send(broker, "o-7", b"order o-7 again")
    by_key = httpx.get(f"{broker.http}/messages", params={"key": "o-7"}).json()
    assert sorted(f["body"] for f in by_key) == ["order o-7", "order o-7 again"]
    assert {f["state"] for f in by_key} == {"STORED"}
    kafka_id = next(f["message_id"] for f in by_key if f["body"] == "order o-7 again")
    for message_id, body in ((sent.message_id, "order o-7"), (kafka_id, "order o-7 again")):
        (found,) = httpx.get(f"{broker.http}/messages/{message_id}").json()
        assert (found["body"], found["topic"], found["keys"]) == (body, "orders", ["o-7"])
    assert as_json(broker, "messages", "find", "--key", "o-7") == by_key
    assert httpx.get(f"{broker.http}/messages", params={"key": "o-7", "topic": "orders"}).json() == by_key
    assert "order o-7" in halfmq(broker, "messages", "find", "--id", sent.message_id)
    stored_at = by_key[0]["stored_at"]
    in_time = httpx.get(f"{broker.http}/topics/orders/messages", params={"since": stored_at}).json()
    assert [f["body"] for f in in_time] == [f["body"] for f in by_key if f["stored_at"] >= stored_at]
    assert httpx.get(f"{broker.http}/topics/orders/messages", params={"until": 0}).json() == []
    assert as_json(broker, "messages", "find", "--topic", "orders", "--since", "2000-01-01T00:00:00+00:00") == by_key
    assert httpx.get(f"{broker.http}/messages", params={"key": "o-8"}).json() == []


def test_held_messages_are_found_as_held_and_bad_searches_are_refused(broker, clock):
    with Producer(broker=broker.address) as producer:
        due = round((clock.now + 3600) * 1000)
        delayed = producer.send(Message(topic="orders", body=b"later", keys=("d-1",), deliver_at=due))
    (found,) = httpx.get(f"{broker.http}/messages", params={"key": "d-1"}).json()
    assert (found["state"], found["due_at"], found["queue_offset"], found["message_id"]) == (
        "DELAYED", due, -1, delayed.message_id,
    )  # fmt: skip
    for params in ({}, {"key": "y", "limit": 0}):
        refused = httpx.get(f"{broker.http}/messages", params=params)
        assert refused.status_code == 422 and "error" in refused.json(), params
    missing = httpx.get(f"{broker.http}/topics/nope/messages")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "TOPIC_NOT_FOUND")
    unknown = httpx.get(f"{broker.http}/messages/no-such-id")
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "MESSAGE_NOT_FOUND")
    assert "not an ISO 8601 time" in halfmq(broker, "messages", "find", "--topic", "orders", "--since", "x", code=2)
    unknown = httpx.get(f"{broker.http}/messages/no-such-id/trace")
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "MESSAGE_NOT_FOUND")
    assert "MESSAGE_NOT_FOUND" in halfmq(broker, "messages", "trace", "no-such-id", code=1)


def test_a_trace_shows_each_group_s_deliveries_its_retry_acknowledgement_and_dead_letter(broker, clock):
    assert httpx.put(f"{broker.http}/consumers/workers/retry-policy", json={"max_attempts": 2}).status_code == 200
    with Producer(broker=broker.address) as producer:
        sent = producer.send(Message(topic="orders", body=b"job", keys=("j-1",)))
    messaging, queue = broker.broker.messaging, sent.queue_id

    def groups() -> dict[str, tuple[str, int]]:
        trace = httpx.get(f"{broker.http}/messages/{sent.message_id}/trace").json()
        assert [f["state"] for f in trace["found"]] == ["STORED"]
        return {g["group"]: (g["state"], g["attempts"]) for g in trace["groups"]}

    with PullConsumer(group="audit", broker=broker.address) as audit:
        audit.pull("orders", queue_id=queue, offset=0)
        assert groups() == {}
        audit.commit_offset("orders", queue_id=queue, offset=sent.queue_offset)
        assert groups() == {"audit": ("WAITING", 0)}
        audit.commit_offset("orders", queue_id=queue, offset=sent.queue_offset + 1)
    broker.run(messaging.receive("workers", "orders", queue, 1, 30, None))
    assert groups() == {"audit": ("ACKNOWLEDGED", 0), "workers": ("DELIVERED", 1)}
    clock.advance(31)  # not acknowledged: delivered again, the retry
    broker.run(messaging.receive("workers", "orders", queue, 1, 30, None))
    assert groups()["workers"] == ("DELIVERED", 2)
    clock.advance(31)
    assert broker.run(messaging.receive("workers", "orders", queue, 1, 30, None)) == []
    trace = as_json(broker, "messages", "trace", sent.message_id)
    (workers,) = [g for g in trace["groups"] if g["group"] == "workers"]
    assert (workers["state"], workers["attempts"]) == ("DEAD_LETTERED", 2)
    assert [c["topic"] for c in workers["copies"]] == ["%DLQ%workers"]
    human = halfmq(broker, "messages", "trace", sent.message_id)
    assert "DEAD_LETTERED" in human and "%DLQ%workers/0" in human and "ACKNOWLEDGED" in human

    resent = as_json(broker, "consumers", "resend-dead-letters", "workers", "--id", sent.message_id)
    assert [r["topic"] for r in resent] == ["orders"]
    (again,) = broker.run(messaging.receive("workers", "orders", resent[0]["queue_id"], 1, 30, None))
    assert again.message.body == b"job", "the resent dead letter is read again by its group"
    assert "MESSAGE_NOT_FOUND" in halfmq(broker, "consumers", "resend-dead-letters", "workers", "--id", "x", code=1)


def test_a_reset_is_refused_while_the_group_is_live_then_its_consumers_read_from_the_new_offsets(broker, clock):
    with Producer(broker=broker.address) as producer:
        for i in range(4):
            producer.send(Message(topic="orders", body=f"m{i}".encode(), keys=("k",)))
    # a Kafka consumer is a live member of "readers" while it is subscribed
    consumer = subscribed(broker, "earliest")
    read = consume(consumer, 4, commit=True)
    before = store_snapshot(broker.broker.store.path.parent)
    refused = httpx.post(f"{broker.http}/consumers/readers/reset-offsets", json={"topic": "orders", "to": "EARLIEST"})
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "GROUP_NOT_EMPTY")
    assert "GROUP_NOT_EMPTY" in halfmq(broker, "consumers", "delete", "readers", code=1)
    assert store_snapshot(broker.broker.store.path.parent) == before, "nothing changed"
    consumer.close()
    reset = as_json(broker, "consumers", "reset-offsets", "readers", "--topic", "orders", "--to-earliest")
    assert set(reset["offsets"].values()) == {0}
    consumer = subscribed(broker, "latest")  # a committed offset comes first: "latest" is not used
    again = consume(consumer, 4, commit=False)
    consumer.close()
    assert sorted(again) == sorted(read), "read again from the reset offsets"
    latest = as_json(broker, "consumers", "reset-offsets", "readers", "--topic", "orders", "--to-offset", "99")
    highs = {int(q["queue_id"]): q["max_offset"] for q in as_json(broker, "topics", "offsets", "orders")}
    assert {int(q): o for q, o in latest["offsets"].items()} == highs, "an offset is kept within each queue"
    halfmq(broker, "consumers", "delete", "readers")
    assert "readers" not in {row["group"] for row in as_json(broker, "consumers", "offsets")}
    assert "GROUP_NOT_FOUND" in halfmq(broker, "consumers", "delete", "readers", code=1)


def test_dead_letters_are_resent_all_or_none_when_an_original_topic_is_gone(broker):
    messaging = broker.broker.messaging
    assert httpx.post(f"{broker.http}/topics", json={"name": "scratch", "queues": 1}).status_code == 201
    for topic in ("orders", "scratch"):  # the letter of orders first: it would be resent first
        with Producer(broker=broker.address) as producer:
            sent = producer.send(Message(topic=topic, body=topic.encode()))
        (delivery,) = broker.run(messaging.receive("workers", topic, sent.queue_id, 1, 30, None))
        broker.run(messaging.forward_to_dead_letters("workers", topic, delivery.receipt_handle))
    httpx.delete(f"{broker.http}/topics/scratch").raise_for_status()
    data_dir = broker.broker.store.path.parent
    before = store_snapshot(data_dir)
    refused = httpx.post(f"{broker.http}/consumers/workers/dead-letters/resend", json={})
    assert (refused.status_code, refused.json()["error"]["code"]) == (404, "TOPIC_NOT_FOUND")
    assert "TOPIC_NOT_FOUND" in halfmq(broker, "consumers", "resend-dead-letters", "workers", code=1)
    assert store_snapshot(data_dir) == before, "no letter was resent"
    assert httpx.post(f"{broker.http}/topics", json={"name": "scratch", "queues": 1}).status_code == 201
    resent = as_json(broker, "consumers", "resend-dead-letters", "workers")
    assert [r["topic"] for r in resent] == ["orders", "scratch"]


def test_deleting_a_topic_is_refused_while_work_is_pending_then_frees_its_messages_offsets_segments_and_disk(
    broker, clock
):
    assert httpx.post(f"{broker.http}/topics", json={"name": "bulk", "queues": 1}).status_code == 201
    with Producer(broker=broker.address) as producer:
        for first in range(0, 2100, 300):  # a whole segment (1,024 messages) in each queue, 2 MB each
            producer.send_batch([Message(topic="bulk", body=bytes([i % 256]) * 2048, keys=(f"b-{i}",))
                                 for i in range(first, first + 300)])  # fmt: skip
        due = round((clock.now + 3600) * 1000)
        delayed = producer.send(Message(topic="bulk", body=b"later", deliver_at=due))
    with PullConsumer(group="g", broker=broker.address) as consumer:
        consumer.commit_offset("bulk", queue_id=0, offset=5)
    with grpc.insecure_channel(broker.address) as channel:
        pending = send_half(pb_grpc.BrokerStub(channel), pb.Message(topic="bulk", body=b"h", message_id="h-1"), "p")
    store, data_dir = broker.broker.store, broker.broker.store.path.parent
    # the packer has packed both whole segments (2,100 messages): nothing changes in the background after
    wait_until(lambda: len(store_snapshot(data_dir).get("segments.db:segments", [])) == 2, timeout=30)
    before, size_before = store_snapshot(data_dir), store.database_bytes()

    refused = httpx.delete(f"{broker.http}/topics/bulk")
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "TOPIC_IN_USE")
    assert "1 pending transaction(s), 1 delayed message(s)" in refused.json()["error"]["message"]
    assert "TOPIC_IN_USE" in halfmq(broker, "topics", "delete", "bulk", code=1)
    assert store_snapshot(data_dir) == before, "a refused deletion changes nothing"
    httpx.post(f"{broker.http}/transactions/{pending.transaction_id}/rollback").raise_for_status()
    assert (
        httpx.delete(f"{broker.http}/topics/bulk")
        .json()["error"]["message"]
        .endswith("has 1 delayed message(s): end or recall them first")
    )
    with Producer(broker=broker.address) as producer:
        producer.recall("bulk", delayed.recall_handle)

    deleted_half = store.transaction(pending.transaction_id).half_offset  # the half log's newest
    assert "topic bulk deleted" in halfmq(broker, "topics", "delete", "bulk")
    with grpc.insecure_channel(broker.address) as channel:
        later = send_half(pb_grpc.BrokerStub(channel), pb.Message(topic="orders", body=b"h", message_id="h-2"), "p")
    assert store.transaction(later.transaction_id).half_offset > deleted_half, "a half offset is never used twice"
    httpx.post(f"{broker.http}/transactions/{later.transaction_id}/rollback").raise_for_status()
    after = store_snapshot(data_dir)
    for table, rows in after.items():
        assert not [row for row in rows if "bulk" in row], f"{table} still holds the topic's rows"
    assert store.database_bytes() < size_before - 6_000_000, "the freed pages went back to the file system"
    assert httpx.delete(f"{broker.http}/topics/bulk").status_code == 404
    assert httpx.delete(f"{broker.http}/topics/RMQ_SYS_TRANS_HALF_TOPIC").status_code == 403
    for name in ("%00", "a" * 300, "%DLQ%", "😀", "a b"):  # malformed names: refused, never a server error
        for path in (f"/topics/{name}", f"/consumers/{name}"):
            refused = httpx.delete(f"{broker.http}{path}")
            assert refused.status_code in (400, 404, 422) and "error" in refused.json(), (path, refused.text)
    assert httpx.post(f"{broker.http}/topics", json={"name": "bulk", "queues": 3}).status_code == 201
    with Producer(broker=broker.address) as producer:
        again = producer.send(Message(topic="bulk", body=b"new", keys=("k",)))
    assert again.queue_offset == 0, "a topic made again starts from its first offset"


def largest_temporary_file(deleting: threading.Event, largest: list[int]) -> None:
    """The largest of SQLite's temporary files (named ``etilqs_``, unlinked as soon as opened) this
    process holds open while ``deleting`` is set."""
    while deleting.is_set():
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):  # closed since it was listed
                if "etilqs_" in os.readlink(f"/proc/self/fd/{fd}"):
                    largest[0] = max(largest[0], os.stat(f"/proc/self/fd/{fd}").st_size)


def test_deleting_a_topic_needs_no_room_in_sqlite_s_temporary_directory(broker):
    assert httpx.post(f"{broker.http}/topics", json={"name": "bulk", "queues": 2}).status_code == 201
    with Producer(broker=broker.address) as producer:
        producer.send_table("bulk", pa.table({"body": [bytes([i % 256]) * 1024 for i in range(16_384)]}))
    data_dir = broker.broker.store.path.parent
    wait_until(lambda: len(store_snapshot(data_dir).get("segments.db:segments", [])) == 16, timeout=60)
    deleting, largest = threading.Event(), [0]
    deleting.set()
    watcher = threading.Thread(target=largest_temporary_file, args=(deleting, largest))
    watcher.start()
    try:
        assert "topic bulk deleted" in halfmq(broker, "topics", "delete", "bulk")
    finally:
        deleting.clear()
        watcher.join()
    # A savepoint's journal would hold a copy of every page of the topic's 16 MB the deletion changes.
    assert largest[0] < 1 << 20, f"the deletion wrote {largest[0]:,} bytes to a temporary file"
    assert not [row for rows in store_snapshot(data_dir).values() for row in rows if "bulk" in row]


def test_tail_follows_a_topic_with_keys_tags_and_properties_and_send_reads_stdin(broker):
    with Producer(broker=broker.address) as producer:
        producer.send(Message(topic="orders", body=b"first", keys=("o-1",), tags="created", properties={"a": "b"}))
    follow = subprocess.Popen(
        [sys.executable, "-m", "halfmq_cli", "--url", broker.http, "topics", "tail", "orders", "--from-beginning",
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    watchdog = threading.Timer(60, follow.kill)  # a tail that prints nothing fails the test, not hangs it
    watchdog.start()
    try:
        first = json.loads(follow.stdout.readline())
        assert (first["body"], first["keys"], first["tags"], first["properties"]) == ("first", ["o-1"], "created",
                                                                                     {"a": "b"})  # fmt: skip
        sent = subprocess.run(
            [sys.executable, "-m", "halfmq_cli", "--url", broker.http, "send", "orders", "--key", "k"],
            input="line one\nline two\n", capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert sent.returncode == 0 and sent.stdout.count("sent ") == 2, sent.stderr
        followed = sorted(json.loads(follow.stdout.readline())["body"] for _ in range(2))
        assert followed == ["line one", "line two"]
    finally:
        follow.send_signal(signal.SIGINT)
        watchdog.cancel()
        assert follow.wait(30) == 0, follow.stderr.read()
    (line,) = [x for x in halfmq(broker, "messages", "find", "--key", "o-1").splitlines() if "first" in x]
    assert "created" in line
