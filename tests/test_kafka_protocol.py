"""The Kafka port, spoken to frame by frame (requests built with kafka-python's protocol classes):
records round-trip exactly, and bad input gets Kafka's error or a closed connection, changes
nothing stored and never disturbs another connection."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import httpx
import pytest
from kafka import errors as kerr
from kafka.protocol.consumer import FetchRequest, FetchResponse, OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from broker.kafka_api.records import read_batches, to_batch, to_messages
from broker.messaging import MAX_BATCH
from broker.model import MAX_PULL, QueueColumns
from broker.store.base import DB_FILE
from broker.tls import TlsFiles
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import KafkaTransactionProducer, Producer, PullConsumer
from producer_sdk import Message as SdkMessage
from tests.support import BrokerThread, Pki, broker_settings, send_half, store_snapshot, wait_until


class Wire:
    """One raw connection to the Kafka port."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self._correlation = 0

    def call(self, request: Any, response_class: Any) -> Any:
        self._correlation += 1
        request.with_header(correlation_id=self._correlation, client_id="wire")
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        reply = self.receive()
        decoded = response_class.decode(reply, version=request.API_VERSION, header=True)
        assert decoded.header.correlation_id == self._correlation
        return decoded

    def receive(self) -> bytes:
        size = struct.unpack(">i", self._exactly(4))[0]
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def closed(self) -> bool:
        """True once the broker has closed the connection."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionError:
            return True


def batch(records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]], **state: Any) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=state.get("compression", 0), is_transactional=False,
        producer_id=state.get("producer_id", -1), producer_epoch=state.get("epoch", -1),
        base_sequence=state.get("sequence", -1), batch_size=2**24,
    )  # fmt: skip
    for offset, (key, value, headers) in enumerate(records):
        builder.append(offset, timestamp=1_700_000_000_000 + offset, key=key, value=value, headers=headers)
    return bytes(builder.build())


def produce(topic: str, partition: int, records: bytes, version: int = 7) -> Any:
    return ProduceRequest[version](
        transactional_id=None, acks=-1, timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(
            name=topic, partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(index=partition,
                                                                                           records=records)])],
    )  # fmt: skip


def fetch(topic: str, partition: int, offset: int) -> Any:
    return FetchRequest[11](
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=2**20, isolation_level=1,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchTopic.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=2**20)])],
        forgotten_topics_data=[], rack_id="",
    )  # fmt: skip


def partition_result(reply: Any) -> Any:
    return reply.responses[0].partition_responses[0]


ODD_RECORDS = [
    (b"k1", b"v1", [("b", b"2"), ("a", b"1")]),  # headers out of name order
    (None, None, []),  # a null key and a tombstone
    (b"\xff\x00", b"", [("x", None), ("x", b"\x00\xff")]),  # a binary key, a null header, a repeated one
    (b"", b"body", [("plain", "é".encode())]),  # an empty key, a UTF-8 header in name order
    ("k" * 2000).encode(),
]


def test_records_of_every_shape_come_back_exactly_through_the_mapping():
    records = [r for r in ODD_RECORDS if isinstance(r, tuple)] + [(ODD_RECORDS[-1], b"long key", [])]
    (read,) = read_batches(batch(records))  # type: ignore[arg-type]
    messages = to_messages("orders", [read], 0)
    stored = QueueColumns(
        queue_offsets=range(len(messages)), message_ids=[m.message_id.encode() for m in messages],
        transaction_ids=[b""] * len(messages), keys=[json.dumps(m.keys).encode() for m in messages],
        tags=[b""] * len(messages), properties=[json.dumps(m.properties).encode() for m in messages],
        bodies=[m.body for m in messages], born_timestamps=[m.born_timestamp for m in messages],
        store_timestamps=[0] * len(messages),
    )  # fmt: skip
    got = [r for b in MemoryRecords(to_batch(stored, len(messages))) for r in b]
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in got] == [
        (i, 1_700_000_000_000 + i, key, value, headers) for i, (key, value, headers) in enumerate(records)
    ]


def test_a_messages_keys_are_its_records_key_joined_by_spaces_whatever_json_escapes():
    keys = [[], ["o-7"], ["a b"], ["a", "b"], ['q"uote'], ["back\\slash"], ["ключ"], [""], ["", "x"]]
    count = len(keys)
    stored = QueueColumns(
        queue_offsets=range(count), message_ids=[b"m%d" % i for i in range(count)], transaction_ids=[b""] * count,
        keys=[json.dumps(k).encode() for k in keys], tags=[b""] * count, properties=[b"{}"] * count,
        bodies=[b"v"] * count, born_timestamps=[1] * count, store_timestamps=[1] * count,
    )  # fmt: skip
    got = [r.key for b in MemoryRecords(to_batch(stored, count)) for r in b]
    assert got == [None if not k else " ".join(k).encode() for k in keys]


def test_a_fetch_s_record_batch_is_the_one_kafka_python_s_builder_writes_byte_for_byte():
    """halfmq writes record batches itself; kafka-python's builder, another implementation of the
    format, is the reference: offsets with gaps, timestamps going back and a message born at 0
    (its store time stands in), keys, a tag, properties, headers and a null value, CRC included."""
    t = 1_700_000_000_000
    messages = [  # offset, message id, transaction id, keys, tags, properties, body, born, stored
        (5, b"m5", b"", b"[]", b"", b"{}", b"a" * 1000, t, t),
        (6, b"m6", b"", b'["o-7"]', b"", b"{}", b"b", 0, t + 3),
        (9, b"m9", b"", b'["a", "b"]', b"created", b'{"x": "1"}', b"c", t - 200, t),
        (10, b"m10", b"", b"[]", b"", b'{"__KAFKA_NULL_VALUE": "1", "h": "v"}', b"", t + 70_000, t),
    ]
    stored = QueueColumns(*map(list, zip(*messages, strict=True)))
    expected = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        batch_size=2**24,
    )  # fmt: skip
    for offset, key, value, headers, timestamp in [
        (0, None, b"a" * 1000, [], t),
        (1, b"o-7", b"b", [], t + 3),
        (4, b"a b", b"c", [("x", b"1"), ("TAGS", b"created")], t - 200),
        (5, None, None, [("h", b"v")], t + 70_000),
    ]:
        expected.append(offset, timestamp=timestamp, key=key, value=value, headers=headers)
    reference = bytearray(expected.build())
    # The base offset, which a broker sets, and no partition leader epoch (-1, as aiokafka writes;
    # kafka-python writes 0): halfmq has no leader elections. Neither is under the CRC.
    struct.pack_into(">qii", reference, 0, 5, len(reference) - 12, -1)
    assert to_batch(stored, len(messages)) == bytes(reference)


# A produce of a few records is checked a record at a time, of many as columns (beyond 1,024, in
# more than one call): each is stored alike.
@pytest.mark.parametrize("copies", [1, 300], ids=["4 records", "1200 records"])
def test_produced_records_are_fetched_exactly_with_their_offsets_and_timestamps(broker, copies):
    wire = Wire(broker.broker.kafka_port)
    records = [r for r in ODD_RECORDS if isinstance(r, tuple)] * copies
    reply = wire.call(produce("orders", 1, batch(records)), ProduceResponse)  # type: ignore[arg-type]
    assert (partition_result(reply).error_code, partition_result(reply).base_offset) == (0, 0)
    got: list[Any] = []
    while len(got) < len(records):  # a fetch returns at most 1,024 records of a partition
        fetched = wire.call(fetch("orders", 1, len(got)), FetchResponse).responses[0].partitions[0]
        assert (fetched.error_code, fetched.high_watermark, fetched.log_start_offset) == (0, len(records), 0)
        got += [r for b in MemoryRecords(bytes(fetched.records)) for r in b]
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in got] == [
        (i, 1_700_000_000_000 + i, key, value, headers) for i, (key, value, headers) in enumerate(records)
    ]
    exposed = httpx.get(f"{broker.http}/metrics").text
    assert 'halfmq_kafka_requests_total{api="Produce"} 1.0' in exposed
    assert f'halfmq_kafka_requests_total{{api="Fetch"}} {-(-len(records) // 1024)}.0' in exposed


def test_a_fetch_reads_a_packed_segment_s_messages_from_the_segment_exactly(broker):
    """Once the packer has packed a partition's first 1,024 records, a fetch of them reads the
    segment, not their rows (the rows' bodies are overwritten behind the broker's back to tell
    which it read), and gets every record as produced; the rest still come from the rows."""
    wire = Wire(broker.broker.kafka_port)
    records = [r for r in ODD_RECORDS if isinstance(r, tuple)] * 300
    assert partition_result(wire.call(produce("orders", 1, batch(records)), ProduceResponse)).error_code == 0
    data_dir = broker.broker.store.path.parent
    wait_until(lambda: len(store_snapshot(data_dir).get("segments.db:segments", [])) == 1, timeout=30)
    with sqlite3.connect(data_dir / DB_FILE) as conn:
        conn.execute("UPDATE messages SET body = x'2a' WHERE topic = 'orders'")
    got: list[Any] = []
    while len(got) < len(records):
        fetched = wire.call(fetch("orders", 1, len(got)), FetchResponse).responses[0].partitions[0]
        got += [r for b in MemoryRecords(bytes(fetched.records)) for r in b]
    packed = MAX_PULL
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in got[:packed]] == [
        (i, 1_700_000_000_000 + i, key, value, headers) for i, (key, value, headers) in enumerate(records[:packed])
    ]
    assert {r.value for r in got[packed:]} <= {b"*", None}, "the rows after the segment are read as they are now"


def pipelined(wire: Wire, requests: list[Any], response_classes: list[Any]) -> list[Any]:
    """Send every request at once, as a producer with requests in flight does, then take the
    replies, which come in the order of the requests."""
    frames = b""
    for number, request in enumerate(requests, start=1000):
        request.with_header(correlation_id=number, client_id="wire")
        frames += bytes(request.encode(header=True, framed=True))
    wire.sock.sendall(frames)
    replies = []
    for number, (request, response_class) in enumerate(zip(requests, response_classes, strict=True), start=1000):
        reply = response_class.decode(wire.receive(), version=request.API_VERSION, header=True)
        assert reply.header.correlation_id == number
        replies.append(reply)
    return replies


def group_commits(broker) -> int:
    exposed = httpx.get(f"{broker.http}/metrics").text
    return int(float(re.search(r"^halfmq_store_group_commit_jobs_count (\S+)$", exposed, re.MULTILINE)[1]))


def settled_group_commits(broker) -> int:
    """``group_commits`` once it has stopped moving, so that no write begun before (the broker's
    start-up, the test's first produce) is counted with what follows."""
    last, now = -1, group_commits(broker)
    while now != last:
        time.sleep(0.5)
        last, now = now, group_commits(broker)
    return now


def values(wire: Wire, partition: int) -> list[bytes]:
    fetched = wire.call(fetch("orders", partition, 0), FetchResponse).responses[0].partitions[0]
    return [r.value for b in MemoryRecords(bytes(fetched.records)) for r in b]


def test_produces_in_flight_on_a_connection_are_stored_in_their_order_in_one_group_commit(broker, tmp_path):
    wire = Wire(broker.broker.kafka_port)
    wire.call(produce("orders", 0, batch([(None, b"first", [])])), ProduceResponse)
    held = sqlite3.connect(tmp_path / "data" / DB_FILE, isolation_level=None)
    before = settled_group_commits(broker)
    held.execute("BEGIN IMMEDIATE")  # the writer waits on the first produce until it is let go
    sent = [produce("orders", n % 2, batch([(None, str(n).encode(), [])])) for n in range(5)]
    with ThreadPoolExecutor(1) as pool:
        replies = pool.submit(pipelined, wire, [*sent, fetch("orders", 0, 0)], [ProduceResponse] * 5 + [FetchResponse])
        # All five produces are being answered at once, the first one's write waiting for the lock.
        listener = broker.broker._kafka
        wait_until(lambda: listener._answering == 5, timeout=10)
        time.sleep(0.2)  # the others' writes, which start on the loop's next turn, queue behind it
        held.execute("COMMIT")
        answered = replies.result(timeout=30)
    assert [(partition_result(r).error_code, partition_result(r).base_offset) for r in answered[:5]] == [
        (0, 1),
        (0, 0),
        (0, 2),
        (0, 1),
        (0, 3),
    ]
    assert answered[5].responses[0].partitions[0].high_watermark == 4  # the fetch came after them all
    assert values(wire, 0) == [b"first", b"0", b"2", b"4"]
    assert values(wire, 1) == [b"1", b"3"]
    assert group_commits(broker) - before <= 2  # the first produce's, then the other four together


def test_a_produce_of_more_records_than_one_store_write_is_not_handled_beside_another(broker):
    wire = Wire(broker.broker.kafka_port)
    big = [(None, b"big", [])] * (MAX_BATCH + 100)
    answered = pipelined(
        wire, [produce("orders", 0, batch(big)), produce("orders", 0, batch([(None, b"after", [])]))],
        [ProduceResponse, ProduceResponse],
    )  # fmt: skip
    assert [partition_result(r).base_offset for r in answered] == [0, MAX_BATCH + 100]
    offsets = wire.call(fetch("orders", 0, MAX_BATCH + 99), FetchResponse).responses[0].partitions[0]
    assert [r.value for b in MemoryRecords(bytes(offsets.records)) for r in b] == [b"big", b"after"]


def test_an_idempotent_producer_s_resent_batch_is_stored_once(broker):
    wire = Wire(broker.broker.kafka_port)
    sent = batch([(b"k", b"once", [])] * 3, producer_id=77, epoch=0, sequence=0)
    first = partition_result(wire.call(produce("orders", 0, sent), ProduceResponse))
    again = partition_result(wire.call(produce("orders", 0, sent), ProduceResponse))
    assert (first.error_code, first.base_offset) == (again.error_code, again.base_offset) == (0, 0)
    next_one = batch([(b"k", b"next", [])], producer_id=77, epoch=0, sequence=3)
    assert partition_result(wire.call(produce("orders", 0, next_one), ProduceResponse)).base_offset == 3
    fetched = wire.call(fetch("orders", 0, 0), FetchResponse).responses[0].partitions[0]
    assert fetched.high_watermark == 4


def corrupt_crc(records: bytes) -> bytes:
    data = bytearray(records)
    data[-1] ^= 0xFF  # the last record's last byte, inside the CRC's span
    return bytes(data)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("truncated frame", "closed"),
        ("2 GiB size prefix", "closed"),
        ("negative size prefix", "closed"),
        ("unknown API key", "closed"),
        ("version out of range", "closed"),
        ("undecodable body", "closed"),
        ("produce to a hidden topic", kerr.TopicAuthorizationFailedError.errno),
        ("produce to an unknown topic", kerr.UnknownTopicOrPartitionError.errno),
        ("produce to an unknown partition", kerr.InvalidRequestError.errno),
        ("corrupt record batch CRC", kerr.CorruptRecordError.errno),
        ("records cut short", kerr.CorruptRecordError.errno),
        ("a record too large among others", kerr.MessageSizeTooLargeError.errno),
        ("a record too large among many others", kerr.MessageSizeTooLargeError.errno),
    ],
)
def test_bad_input_gets_kafka_s_error_or_a_closed_connection_and_changes_nothing(broker, case, expected):
    port = broker.broker.kafka_port
    bystander = Wire(port)
    bystander.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"), ApiVersionsResponse)
    good = batch([(b"k", b"v", [])])
    partition_result(bystander.call(produce("orders", 0, good), ProduceResponse))
    before = store_snapshot(broker.broker.settings.data_dir)
    wire = Wire(port)
    header = struct.pack(">hhih", 3, 8, 1, 4) + b"wire"
    frames = {
        "truncated frame": struct.pack(">i", 100) + header,
        "2 GiB size prefix": struct.pack(">i", 2**31 - 1) + header,
        "negative size prefix": struct.pack(">i", -5),
        "unknown API key": struct.pack(">i", len(header)) + struct.pack(">hhih", 999, 0, 1, 4) + b"wire",
        "version out of range": struct.pack(">i", len(header)) + struct.pack(">hhih", 3, 99, 1, 4) + b"wire",
        "undecodable body": struct.pack(">i", len(header) + 3) + header + b"\xff\xff\xff",
    }
    if expected == "closed":
        wire.sock.sendall(frames[case])
        if case == "truncated frame":
            wire.sock.shutdown(socket.SHUT_WR)
        assert wire.closed()
    else:
        topic, partition, records = {
            "produce to a hidden topic": ("RMQ_SYS_TRANS_HALF_TOPIC", 0, good),
            "produce to an unknown topic": ("nowhere", 0, good),
            "produce to an unknown partition": ("orders", 7, good),
            "corrupt record batch CRC": ("orders", 0, corrupt_crc(good)),
            "records cut short": ("orders", 0, good[:-3]),
            "a record too large among others": (
                "orders",
                0,
                batch([(b"k", b"v", [])] * 3 + [(b"k", bytes(5 << 20), [])]),
            ),
            "a record too large among many others": (
                "orders",
                0,
                batch([(b"k", b"v", [])] * 300 + [(b"k", bytes(5 << 20), [])]),
            ),
        }[case]
        assert partition_result(wire.call(produce(topic, partition, records), ProduceResponse)).error_code == expected
    assert store_snapshot(broker.broker.settings.data_dir) == before
    meta = bystander.call(MetadataRequest[8](topics=None, allow_auto_topic_creation=False), MetadataResponse)
    assert "orders" in [t.name for t in meta.topics]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_record_batches_compressed_by_confluent_kafka_are_read(broker, codec):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.broker.kafka_port}", "compression.type": codec,
                         "linger.ms": 50})  # fmt: skip
    failed: list[object] = []
    for i in range(40):
        producer.produce("orders", partition=2, value=f"{codec} {i} ".encode() * 20,
                         on_delivery=lambda err, _: failed.append(err) if err else None)  # fmt: skip
    assert producer.flush(30) == 0 and failed == []
    fetched = Wire(broker.broker.kafka_port).call(fetch("orders", 2, 0), FetchResponse).responses[0].partitions[0]
    values = [r.value for b in MemoryRecords(bytes(fetched.records)) for r in b]
    assert values == [f"{codec} {i} ".encode() * 20 for i in range(40)]


def test_the_kafka_port_serves_tls_and_wants_the_auth_token_over_sasl_plain(tmp_path):
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient

    pki = Pki(tmp_path / "pki")
    broker = BrokerThread(broker_settings(tmp_path / "data", tls=TlsFiles(pki.server, pki.server), auth_token="s3cret"))
    try:
        secured = {"bootstrap.servers": f"127.0.0.1:{broker.broker.kafka_port}", "security.protocol": "SASL_SSL",
                   "ssl.ca.location": str(pki.ca), "sasl.mechanisms": "PLAIN", "sasl.username": "any"}  # fmt: skip
        producer = Producer({**secured, "sasl.password": "s3cret", "acks": "all"})
        producer.produce("orders", partition=0, value=b"over tls")
        assert producer.flush(30) == 0
        before = store_snapshot(broker.broker.settings.data_dir)
        refused = AdminClient({**secured, "sasl.password": "wrong"})
        with pytest.raises(KafkaException):  # librdkafka logs the broker's "SASL authentication error"
            refused.list_topics(timeout=10)
        plain = Wire(broker.broker.kafka_port)
        plain.sock.sendall(b"\x00\x00\x00\x0a" + bytes(10))  # not TLS: the handshake fails, the socket closes
        assert plain.closed()
        assert store_snapshot(broker.broker.settings.data_dir) == before
        with PullConsumer(group="g", broker=broker.address, tls_ca=pki.ca, token="s3cret") as consumer:
            assert consumer.pull("orders", queue_id=0, offset=0, max_messages=8).messages[0].body == b"over tls"
    finally:
        broker.stop()


def test_offsets_waiting_in_an_open_transaction_are_unstable_to_a_fetch_that_requires_stable(broker):
    wire = Wire(broker.broker.kafka_port)

    def fetched(version: int, require_stable: bool) -> tuple[int, int]:
        request = OffsetFetchRequest[version](
            group_id="etl", require_stable=require_stable,
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="orders", partition_indexes=[1])],
        )  # fmt: skip
        (part,) = wire.call(request, OffsetFetchResponse).topics[0].partitions
        return part.error_code, part.committed_offset

    with Producer(broker=broker.address) as plain:
        plain.send_batch([SdkMessage(topic="orders", body=f"o{i}".encode()) for i in range(8)])
    with PullConsumer(group="etl", broker=broker.address) as consumer:
        end = consumer.queue_offsets("orders")[1][1]
    with KafkaTransactionProducer(transactional_id="etl-1", broker=broker.address) as producer:
        producer.begin_transaction()
        producer.send_offsets_to_transaction({("orders", 1): end}, group="etl")
        assert fetched(7, True) == (kerr.UnstableOffsetCommitError.errno, -1)
        assert fetched(7, False) == fetched(5, False) == (0, -1), "nothing committed yet"
        producer.commit_transaction()
    assert fetched(7, True) == (0, end)


def test_a_kafka_admin_deletes_a_topic_but_not_one_with_a_pending_transaction(broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.broker.kafka_port}"})
    admin.create_topics([NewTopic("scratch", 2)])["scratch"].result(timeout=10)
    with Producer(broker=broker.address) as plain:
        plain.send(SdkMessage(topic="scratch", body=b"gone soon"))
    with grpc.insecure_channel(broker.address) as channel:
        send_half(pb_grpc.BrokerStub(channel), pb.Message(topic="orders", body=b"h", message_id="h-1"), "p")
    with pytest.raises(Exception, match="POLICY_VIOLATION"):
        admin.delete_topics(["orders"])["orders"].result(timeout=10)
    admin.delete_topics(["scratch"])["scratch"].result(timeout=10)
    with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PART"):
        admin.delete_topics(["scratch"])["scratch"].result(timeout=10)
    assert set(admin.list_topics(timeout=10).topics) == {"orders"}


def test_metadata_names_the_advertised_host_with_the_kafka_port(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data", advertised_address=("mq.example.internal", 18081)))
    try:
        wire = Wire(broker.broker.kafka_port)
        meta = wire.call(MetadataRequest[8](topics=None, allow_auto_topic_creation=False), MetadataResponse)
        assert [(b.host, b.port) for b in meta.brokers] == [("mq.example.internal", broker.broker.kafka_port)]
    finally:
        broker.stop()


def test_metadata_and_the_coordinator_name_the_kafka_advertised_address(tmp_path):
    """As Kafka's advertised.listeners: the host and port clients outside a container dial."""
    settings = broker_settings(
        tmp_path / "data", advertised_address=("mq.example.internal", 18081), kafka_advertised_address=("edge", 19092)
    )
    broker = BrokerThread(settings)
    try:
        wire = Wire(broker.broker.kafka_port)
        meta = wire.call(MetadataRequest[8](topics=None, allow_auto_topic_creation=False), MetadataResponse)
        assert [(b.host, b.port) for b in meta.brokers] == [("edge", 19092)]
        found = wire.call(FindCoordinatorRequest[2](key="g", key_type=0), FindCoordinatorResponse)
        assert (found.error_code, found.host, found.port) == (0, "edge", 19092)
    finally:
        broker.stop()


def test_a_topic_named_first_by_a_producer_is_created_with_one_partition_unless_auto_creation_is_off(tmp_path):
    def metadata(port: int, topic: str, allow: bool) -> Any:
        asked = MetadataRequest[8].MetadataRequestTopic(name=topic)
        request = MetadataRequest[8](topics=[asked], allow_auto_topic_creation=allow)
        (answer,) = Wire(port).call(request, MetadataResponse).topics
        return answer

    broker = BrokerThread(broker_settings(tmp_path / "data"))
    off = BrokerThread(broker_settings(tmp_path / "off", auto_create_topics=False))
    try:
        created = metadata(broker.broker.kafka_port, "orders.created", True)
        assert (created.error_code, created.name, len(created.partitions)) == (0, "orders.created", 1)
        assert metadata(broker.broker.kafka_port, "other", False).error_code == kerr.UnknownTopicOrPartitionError.errno
        before = store_snapshot(tmp_path / "off")
        refused = metadata(off.broker.kafka_port, "orders.created", True)
        assert refused.error_code == kerr.UnknownTopicOrPartitionError.errno
        assert store_snapshot(tmp_path / "off") == before
    finally:
        broker.stop()
        off.stop()


def test_topic_names_with_dots_are_created_produced_to_and_read(broker):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = f"127.0.0.1:{broker.broker.kafka_port}"
    name = "dbserver1.inventory.customers"  # Debezium's server.schema.table
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 2)])[name].result(timeout=10)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(name, b"row", partition=1)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cdc.readers", "auto.offset.reset": "earliest"})
    consumer.subscribe([name])
    read = [m.value() for m in consumer.consume(1, 10) if not m.error()]
    consumer.close()
    assert read == [b"row"]


def test_a_transactional_producer_bumps_its_own_epoch_and_a_fenced_one_is_told_so(broker):
    """InitProducerId v3+ (KIP-360): the producer holding the id's epoch bumps it after an error;
    one holding an older epoch is fenced: PRODUCER_FENCED from v4, INVALID_PRODUCER_EPOCH before."""
    from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse

    wire = Wire(broker.broker.kafka_port)

    def init(version: int, producer_id: int = -1, epoch: int = -1) -> Any:
        request = InitProducerIdRequest(transactional_id="bumper", transaction_timeout_ms=60_000,
                                        producer_id=producer_id, producer_epoch=epoch, version=version)  # fmt: skip
        return wire.call(request, InitProducerIdResponse)

    first = init(4)
    assert (first.error_code, first.producer_epoch) == (0, 0)
    bumped = init(4, first.producer_id, 0)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, first.producer_id, 1)
    assert init(4, first.producer_id, 0).error_code == kerr.ProducerFencedError.errno
    assert init(3, first.producer_id, 0).error_code == kerr.InvalidProducerEpochError.errno
    assert init(4, first.producer_id + 1, 1).error_code == kerr.ProducerFencedError.errno
    assert init(4, first.producer_id, 1).producer_epoch == 2


def test_acls_are_described_as_a_kafka_broker_without_an_authorizer_does(broker):
    from kafka.protocol.admin import DescribeAclsRequest, DescribeAclsResponse

    request = DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                  principal_filter=None, host_filter=None, operation=1, permission_type=1,
                                  version=2)  # fmt: skip
    reply = Wire(broker.broker.kafka_port).call(request, DescribeAclsResponse)
    assert (reply.error_code, reply.resources) == (kerr.SecurityDisabledError.errno, [])


def test_a_transactional_offset_commit_from_v3_is_checked_against_the_group_s_membership(broker):
    """TxnOffsetCommit v3 (KIP-447) names the member and generation: a member the group does not
    have is refused as an offset commit is; without a member (generation -1) it is not checked."""
    from kafka.protocol.producer.transaction import (
        AddOffsetsToTxnRequest,
        AddOffsetsToTxnResponse,
        InitProducerIdRequest,
        InitProducerIdResponse,
        TxnOffsetCommitRequest,
        TxnOffsetCommitResponse,
    )

    wire = Wire(broker.broker.kafka_port)
    init = wire.call(InitProducerIdRequest(transactional_id="offsets", transaction_timeout_ms=60_000, version=3),
                     InitProducerIdResponse)  # fmt: skip
    ids = {"transactional_id": "offsets", "producer_id": init.producer_id, "producer_epoch": init.producer_epoch}
    added = wire.call(AddOffsetsToTxnRequest(**ids, group_id="readers", version=2), AddOffsetsToTxnResponse)
    assert added.error_code == 0

    def commit(member_id: str, generation_id: int) -> int:
        part = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata=""
        )
        topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="orders", partitions=[part])
        request = TxnOffsetCommitRequest(**ids, group_id="readers", generation_id=generation_id, member_id=member_id,
                                         group_instance_id=None, topics=[topic], version=3)  # fmt: skip
        return int(wire.call(request, TxnOffsetCommitResponse).topics[0].partitions[0].error_code)

    assert commit("nobody", 1) == kerr.UnknownMemberIdError.errno
    assert commit("", -1) == 0


def member_that_committed(broker, group: str):
    """A Kafka consumer of ``group`` that has read orders' one message and committed its offset,
    still a live member; and an admin client."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    bootstrap = f"127.0.0.1:{broker.broker.kafka_port}"
    with Producer(broker=broker.address) as plain:
        plain.send(SdkMessage(topic="orders", body=b"o"))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe(["orders"])
    while (record := consumer.poll(1.0)) is None or record.error() is not None:
        pass
    consumer.commit(record, asynchronous=False)
    return consumer, AdminClient({"bootstrap.servers": bootstrap})


def listed(admin) -> set[str]:
    return {g.group_id for g in admin.list_consumer_groups().result(timeout=10).valid}


def test_a_kafka_admin_deletes_a_group_once_it_has_no_live_member(broker):
    consumer, admin = member_that_committed(broker, "g1")
    with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
        admin.delete_consumer_groups(["g1"])["g1"].result(timeout=10)
    consumer.close()
    admin.delete_consumer_groups(["g1"])["g1"].result(timeout=10)
    assert "g1" not in listed(admin)
    assert "g1" not in {g for g, *_ in broker.run(broker.broker.messaging.committed_offsets())}
    with pytest.raises(Exception, match="GROUP_ID_NOT_FOUND"):
        admin.delete_consumer_groups(["g1"])["g1"].result(timeout=10)


def test_a_group_deleted_through_the_admin_api_is_gone_from_what_kafka_s_clients_list(broker):
    consumer, admin = member_that_committed(broker, "g2")
    consumer.close()
    assert "g2" in listed(admin)
    httpx.delete(f"{broker.http}/consumers/g2").raise_for_status()
    assert "g2" not in listed(admin)
    with pytest.raises(Exception, match="GROUP_ID_NOT_FOUND"):
        admin.delete_consumer_groups(["g2"])["g2"].result(timeout=10)


def test_a_topic_s_configs_show_its_own_retention_and_otherwise_the_broker_s(broker):
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

    httpx.post(f"{broker.http}/topics", json={"name": "kept", "queues": 1, "retention_seconds": 90}).raise_for_status()
    httpx.post(
        f"{broker.http}/topics", json={"name": "forever", "queues": 1, "retention_seconds": 0}
    ).raise_for_status()
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.broker.kafka_port}"})
    described = {}
    for name in ("kept", "forever", "orders"):
        (future,) = admin.describe_configs([ConfigResource("topic", name)]).values()
        entry = future.result(timeout=10)["retention.ms"]
        described[name] = (entry.value, ConfigSource(entry.source), entry.is_default)
    broker_ms = str(round(broker.broker.settings.retention * 1000))
    assert described == {
        "kept": ("90000", ConfigSource.DYNAMIC_TOPIC_CONFIG, False),
        "forever": ("-1", ConfigSource.DYNAMIC_TOPIC_CONFIG, False),
        "orders": (broker_ms, ConfigSource.DEFAULT_CONFIG, True),
    }


def test_a_broker_that_keeps_everything_reports_a_retention_of_minus_one_as_kafka_does(tmp_path):
    from confluent_kafka.admin import AdminClient, ConfigResource

    broker = BrokerThread(broker_settings(tmp_path / "data", retention=0.0))
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.broker.kafka_port}"})
        wanted = {ConfigResource("topic", "orders"): "retention.ms", ConfigResource("broker", "0"): "log.retention.ms"}
        for resource, future in admin.describe_configs(list(wanted)).items():
            assert future.result(timeout=10)[wanted[resource]].value == "-1", "Kafka reads 0 as 'delete at once'"
    finally:
        broker.stop()
