"""The halfmq Spark source with a real local Spark session against a real broker (issue 3)."""

from __future__ import annotations

import json
import socket
import tempfile
import time

import pyarrow as pa
import pytest

from broker.model import HALF_TOPIC
from producer_sdk import KafkaTransactionProducer, LocalTransactionState, Message, Producer, RocketMQTransactionProducer
from producer_sdk.errors import BrokerUnavailable
from spark_consumer.client import BrokerClient, Connection
from spark_consumer.offsets import DataLoss
from spark_consumer.source import QueueSlice, read_slice
from tests.spark_support import batch_reader, run_available_now, stream_reader
from tests.support import BrokerThread, ScriptedListener, broker_settings, topic_rows, wait_until

pytestmark = pytest.mark.spark


def send_normal(address: str, count: int, prefix: str = "m") -> list[str]:
    with Producer(broker=address) as producer:
        producer.send_batch([Message(topic="orders", body=f"{prefix}{i}".encode()) for i in range(count)])
    return [f"{prefix}{i}" for i in range(count)]


def bodies(rows) -> list[str]:
    return sorted(row.body.decode() for row in rows)


def test_only_committed_transactions_are_ingested(spark, broker, clock):
    # The clock moves past the half messages' maximum age below, which is the broker's retention
    # too: the topic keeps everything, so no retention sweep can race the read.
    broker.run(broker.broker.messaging.create_topic("orders", 4, retention=0))
    listener = ScriptedListener("UNKNOWN")
    outcomes = {
        **{f"commit-{i}": "COMMIT" for i in range(5)},
        **{f"rollback-{i}": "ROLLBACK" for i in range(3)},
        **{f"check-commit-{i}": "UNKNOWN" for i in range(2)},
        **{f"check-rollback-{i}": "UNKNOWN" for i in range(2)},
    }
    with RocketMQTransactionProducer(group="g", broker=broker.address, listener=listener) as producer:
        for key, outcome in outcomes.items():
            listener.outcomes[key] = LocalTransactionState[outcome]
            producer.send_message_in_transaction(Message(topic="orders", body=key.encode(), keys=[key]))
        for key in outcomes:
            if key.startswith("check-"):
                listener.outcomes[key] = LocalTransactionState["COMMIT" if "commit" in key else "ROLLBACK"]
        clock.advance(2)
        assert broker.check_once().checked == 4
        wait_until(lambda: broker.broker.store.pending_count() == 0)
    with RocketMQTransactionProducer(group="orphans", broker=broker.address, listener=ScriptedListener("UNKNOWN")) as p:
        for i in range(2):
            p.send_message_in_transaction(Message(topic="orders", body=f"discarded-{i}".encode(), keys=["d"]))
    clock.advance(broker.broker.settings.max_half_age + 1)
    assert broker.check_once().discarded == 2

    expected = sorted([f"commit-{i}" for i in range(5)] + ["check-commit-0", "check-commit-1"])
    assert bodies(batch_reader(spark, broker.address).collect()) == expected
    streamed = run_available_now(stream_reader(spark, broker.address, startingOffsets="earliest"))
    assert bodies(row for _, rows in streamed for row in rows) == expected
    row = batch_reader(spark, broker.address).collect()[0]
    assert row.transaction_id and row.keys and row.store_timestamp is not None


def test_a_delayed_message_reaches_batch_and_streaming_reads_only_once_due(spark, broker, clock):
    send_normal(broker.address, 2)
    with Producer(broker=broker.address) as producer:
        producer.send(Message(topic="orders", body=b"later", deliver_at=int(clock() * 1000) + 60_000))
    checkpoint = tempfile.mkdtemp()
    assert bodies(batch_reader(spark, broker.address).collect()) == ["m0", "m1"]
    streamed = run_available_now(stream_reader(spark, broker.address, startingOffsets="earliest"), checkpoint)
    assert bodies(row for _, rows in streamed for row in rows) == ["m0", "m1"]
    clock.advance(61)
    broker.run(broker.broker.delays.deliver_due())
    assert bodies(batch_reader(spark, broker.address).collect()) == ["later", "m0", "m1"]
    streamed = run_available_now(stream_reader(spark, broker.address, startingOffsets="earliest"), checkpoint)
    assert bodies(row for _, rows in streamed for row in rows) == ["later"], "the next micro-batch, once"


def test_rows_have_the_documented_schema(spark, broker):
    send_normal(broker.address, 1)
    frame = batch_reader(spark, broker.address)
    assert [(f.name, f.dataType.simpleString()) for f in frame.schema.fields] == [
        ("topic", "string"),
        ("queue_id", "int"),
        ("queue_offset", "bigint"),
        ("message_id", "string"),
        ("transaction_id", "string"),
        ("keys", "array<string>"),
        ("tags", "string"),
        ("properties", "map<string,string>"),
        ("body", "binary"),
        ("born_timestamp", "timestamp"),
        ("store_timestamp", "timestamp"),
    ]


def test_a_topic_with_nothing_committed_reads_as_no_rows(spark, broker):
    assert batch_reader(spark, broker.address).count() == 0
    batches = run_available_now(stream_reader(spark, broker.address, startingOffsets="earliest"))
    assert [rows for _, rows in batches] in ([], [[]])  # Spark may run a first, empty batch


def test_max_offsets_per_trigger_bounds_every_micro_batch(spark, broker):
    expected = send_normal(broker.address, 40)
    batches = run_available_now(
        stream_reader(spark, broker.address, startingOffsets="earliest", maxOffsetsPerTrigger="7")
    )
    sizes = [len(rows) for _, rows in batches]
    assert max(sizes) <= 7
    assert sum(sizes) == 40 and len(sizes) == 6
    assert bodies(row for _, rows in batches for row in rows) == sorted(expected)


def positions(rows) -> set[tuple[int, int]]:
    return {(row.queue_id, row.queue_offset) for row in rows}


def test_json_starting_and_ending_offsets_read_exactly_the_requested_ranges(spark, broker):
    send_normal(broker.address, 40)
    everything = batch_reader(spark, broker.address).collect()
    highs = {q: 1 + max(r.queue_offset for r in everything if r.queue_id == q) for q in range(4)}
    start = {"orders": {"0": 1, "1": 0, "2": -2, "3": -1}}
    end = {"orders": {"0": 3, "1": highs[1], "2": 2, "3": -1}}
    rows = batch_reader(
        spark, broker.address, startingOffsets=json.dumps(start), endingOffsets=json.dumps(end)
    ).collect()
    expected = {(0, 1), (0, 2), (2, 0), (2, 1)} | {(1, o) for o in range(highs[1])}
    assert positions(rows) == expected
    streamed = run_available_now(stream_reader(spark, broker.address, startingOffsets=json.dumps(start)))
    assert positions(r for _, rows in streamed for r in rows) == {
        (q, o) for q in range(4) for o in range({"0": 1, "1": 0, "2": 0, "3": highs[3]}[str(q)], highs[q])
    }


def test_starting_offsets_latest_reads_only_what_is_committed_after_the_query_starts(spark, broker):
    send_normal(broker.address, 10, prefix="before")
    batches: list = []
    query = (
        stream_reader(spark, broker.address, startingOffsets="latest")
        .writeStream.foreachBatch(lambda df, batch_id: batches.append((batch_id, df.collect())))
        .trigger(processingTime="200 milliseconds")
        .option("checkpointLocation", tempfile.mkdtemp(prefix="halfmq-ckpt-"))
        .start()
    )
    try:
        wait_until(lambda: query.lastProgress is not None, 60)
        first = send_normal(broker.address, 5, prefix="during-a")
        wait_until(lambda: len([r for _, rows in batches for r in rows]) >= 5, 60)
        time.sleep(0.5)
        second = send_normal(broker.address, 5, prefix="during-b")
        wait_until(lambda: len([r for _, rows in batches for r in rows]) >= 10, 60)
        progress = query.lastProgress
    finally:
        query.stop()
    assert bodies(r for _, rows in batches for r in rows) == sorted(first + second)
    assert len([b for b, rows in batches if rows]) >= 2, "later commits arrive in later batches"
    assert progress["sources"][0]["latestOffset"] is not None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"startingOffsets": "yesterday"}, "startingOffsets must be"),
        ({"maxOffsetsPerTrigger": "-3"}, "maxOffsetsPerTrigger"),
        ({"fetchSize": "many"}, "fetchSize"),
        ({"startingOfsets": "earliest"}, "unknown option"),
    ],
)
def test_bad_options_fail_when_the_query_is_defined(spark, broker, options, message):
    with pytest.raises(Exception, match=message):
        stream_reader(spark, broker.address, **options)


@pytest.mark.parametrize(("topic", "message"), [(HALF_TOPIC, "hidden system topic"), ("nope", "does not exist")])
def test_hidden_and_unknown_topics_fail_before_any_data_is_read(spark, broker, topic, message):
    send_normal(broker.address, 3)
    with pytest.raises(Exception, match=message):
        spark.read.format("halfmq").option("broker", broker.address).option("topics", topic).load().collect()
    batches: list = []
    query = (
        spark.readStream.format("halfmq")
        .option("broker", broker.address)
        .option("topics", topic)
        .load()
        .writeStream.foreachBatch(lambda df, batch_id: batches.append(batch_id))
        .trigger(availableNow=True)
        .option("checkpointLocation", tempfile.mkdtemp(prefix="halfmq-ckpt-"))
        .start()
    )
    with pytest.raises(Exception, match=message):
        query.awaitTermination(60)
    assert batches == []


def test_offsets_beyond_the_broker_fail_unless_fail_on_data_loss_is_false(spark, broker):
    expected = send_normal(broker.address, 8)
    beyond = json.dumps({"orders": {str(q): 1000 for q in range(4)}})
    with pytest.raises(Exception, match="beyond the newest message"):
        batch_reader(spark, broker.address, startingOffsets=beyond).collect()
    rows = batch_reader(spark, broker.address, startingOffsets=beyond, failOnDataLoss="false").collect()
    assert bodies(rows) == sorted(expected)


def test_messages_deleted_by_retention_fail_the_read_unless_fail_on_data_loss_is_false(spark, broker, clock):
    send_normal(broker.address, 8, prefix="old")
    clock.advance(73 * 3600)  # past the broker's 72 h
    kept = send_normal(broker.address, 8, prefix="new")
    broker.run(broker.broker.retention.sweep())
    from_zero = json.dumps({"orders": {str(q): 0 for q in range(4)}})
    with pytest.raises(Exception, match="no longer stored"):
        batch_reader(spark, broker.address, startingOffsets=from_zero).collect()
    rows = batch_reader(spark, broker.address, startingOffsets=from_zero, failOnDataLoss="false").collect()
    assert bodies(rows) == sorted(kept)
    assert bodies(batch_reader(spark, broker.address).collect()) == sorted(kept), "earliest is the low offset"


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_slice_deleted_after_it_was_planned_fails_or_is_skipped(broker, clock, fail_on_data_loss):
    """Retention may run between planning a micro-batch and reading it: the pull is refused with
    OFFSET_OUT_OF_RANGE, and the task fails or skips to the queue's low offset."""
    send_normal(broker.address, 40, prefix="old")
    clock.advance(73 * 3600)
    send_normal(broker.address, 40, prefix="new")
    (queue, (_, high)) = max(broker.run(broker.broker.messaging.queue_offsets("orders")).items())
    planned = QueueSlice(Connection(broker.address), "orders", queue, 0, high, 4, fail_on_data_loss)
    broker.run(broker.broker.retention.sweep())
    low, _ = broker.run(broker.broker.messaging.queue_offsets("orders"))[queue]
    assert low > 0
    if fail_on_data_loss:
        with pytest.raises(DataLoss, match="below the queue's low offset"):
            list(read_slice(planned))
        return
    read = [body.decode() for batch in read_slice(planned) for body in batch.column("body").to_pylist()]
    assert len(read) == high - low and all(body.startswith("new") for body in read)


def test_a_broker_with_an_auth_token_is_read_with_the_token_option(spark, tmp_path):
    secured = BrokerThread(broker_settings(tmp_path / "data", auth_token="s3cret"))
    try:
        with Producer(broker=secured.address, token="s3cret") as producer:
            producer.send_batch([Message(topic="orders", body=b"t%d" % i) for i in range(6)])
        with pytest.raises(Exception, match="bearer token"):
            batch_reader(spark, secured.address).collect()
        assert bodies(batch_reader(spark, secured.address, token="s3cret").collect()) == [f"t{i}" for i in range(6)]
    finally:
        secured.stop()


@pytest.mark.parametrize(
    "call",
    [
        lambda client: client.ranges(("orders",)),  # the source's driver
        lambda client: client.prepare_table("spark-q", 0, "orders", pa.table({"body": [b"x"]})),  # the sink's tasks
        lambda client: client.send_table("orders", pa.table({"body": [b"x"]})),  # the at-least-once sink
        lambda client: client.end_batch("spark-q", 0, [1], commit=True),  # the sink's commit
    ],
    ids=["source", "sink-prepare", "sink-send", "sink-commit"],
)
def test_a_broker_out_of_reach_is_named_in_the_error(call):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{unused.getsockname()[1]}"
    with BrokerClient(Connection(address), timeout=0.5) as client, pytest.raises(BrokerUnavailable) as refused:
        call(client)
    assert f"no answer from the broker at {address} within 0.5 s" in str(refused.value)


def test_offsets_the_sink_rolled_back_are_stepped_over_slices_ending_in_a_gap_included(spark, broker):
    """An exactly-once batch rolled back leaves a gap in each queue it wrote to; the source reads
    what was committed around the gaps, and a slice reads only its own offsets."""
    with BrokerClient(Connection(broker.address)) as client:

        def prepare(batch: int, prefix: str) -> list[int]:  # one call per queue: the queues take turns
            tables = [pa.table({"body": [f"{prefix}{q}-{i}".encode() for i in range(5)]}) for q in range(4)]
            return [r for table in tables for r in client.prepare_table("spark-q", batch, "orders", table)]

        prepare(0, "gone")  # offsets 0-4 of every queue
        client.end_batch("spark-q", 0, [], commit=False)
        expected = send_normal(broker.address, 20, "plain")
        client.end_batch("spark-q", 1, prepare(1, "kept"), commit=True)
        prepare(2, "gone-too")
        client.end_batch("spark-q", 2, [], commit=False)
        expected += [f"kept{q}-{i}" for q in range(4) for i in range(5)] + send_normal(broker.address, 8, "tail")
    assert bodies(batch_reader(spark, broker.address, fetchSize="3").collect()) == sorted(expected)
    in_gap = QueueSlice(Connection(broker.address), "orders", 0, 0, 3, 4, True)
    assert [batch.num_rows for batch in read_slice(in_gap)] == [0], (
        "the rows a pull found past the gap are the next slice's"
    )
    past_gap = QueueSlice(Connection(broker.address), "orders", 0, 0, 7, 4, True)
    offsets = [o for batch in read_slice(past_gap) for o in batch.column("queue_offset").to_pylist()]
    stored = sorted(o for _, q, o, _ in topic_rows(broker.broker.settings.data_dir, "orders") if q == 0 and o < 7)
    assert offsets == stored and stored and stored[0] >= 5, "the slice's messages after the gap, none past it"


def test_a_kafka_model_transaction_is_read_all_or_none(spark, broker):
    """Spark reads none of an open transaction's messages, on two topics of several queues, all of
    them once it commits, and none of an aborted one."""
    with Producer(broker=broker.address) as producer:
        producer.create_topic("payments", 3)
    plain = send_normal(broker.address, 4, "plain")

    def read() -> list[str]:
        return bodies(batch_reader(spark, broker.address, topics="orders,payments").collect())

    sent = [f"t{i}" for i in range(12)]
    with KafkaTransactionProducer(transactional_id="spark-reader", broker=broker.address) as producer:
        producer.begin_transaction()
        for body in sent:
            producer.send(Message(topic=("orders", "payments")[int(body[1:]) % 2], body=body.encode()))
        assert read() == sorted(plain)
        producer.commit_transaction()
        assert read() == sorted(plain + sent)
        with pytest.raises(RuntimeError), producer.transaction():
            for i in range(6):
                producer.send(Message(topic=("orders", "payments")[i % 2], body=f"aborted{i}".encode()))
            raise RuntimeError("abort it")
    assert read() == sorted(plain + sent)
