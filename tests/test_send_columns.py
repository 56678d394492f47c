"""Tables of messages sent as columns (SendColumns, ``Producer.send_table``): stored as single
sends store them, each row checked as a single send is checked, a refused row refused alone."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from itertools import accumulate
from pathlib import Path

import grpc
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker import errors
from broker.columns import MessageColumns, check_columns, check_messages
from broker.errors import HalfmqError
from broker.model import Message, check_message
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import InvalidArgument, MessageTooLarge, Producer, PullConsumer, TopicNotFound
from producer_sdk import Message as SdkMessage
from tests.support import BrokerThread, broker_settings, send_half, store_snapshot

MAX_BODY = 4096
PROPERTIES = pa.map_(pa.string(), pa.string())


@pytest.fixture
def running(tmp_path: Path) -> Iterator[BrokerThread]:
    broker = BrokerThread(broker_settings(tmp_path / "data", max_body_bytes=MAX_BODY))
    yield broker
    broker.stop()


def data_dir(broker: BrokerThread) -> Path:
    return Path(broker.broker.settings.data_dir)


def test_a_table_is_stored_as_its_rows_say_and_each_call_in_one_queue(running):
    table = pa.table(
        {
            "body": pa.array([b"a", None, "é".encode()], pa.binary()),
            "message_id": ["id-1", None, "id-3"],
            "keys": pa.array([["k1", "k 2"], None, ["ü"]], pa.list_(pa.string())),
            "tags": ["t1", None, "t3"],
            "properties": pa.array([[("p", "1")], None, [("q", 'say "hi"')]], PROPERTIES),
        }
    )
    with Producer(broker=running.address) as producer:
        receipts = producer.send_table("orders", table)
    assert receipts.column_names == ["message_id", "queue_id", "queue_offset"]
    rows = receipts.to_pylist()
    assert rows[0]["message_id"] == "id-1" and rows[2]["message_id"] == "id-3" and rows[1]["message_id"]
    (queue,) = {r["queue_id"] for r in rows}
    assert [r["queue_offset"] for r in rows] == [0, 1, 2]
    with PullConsumer(broker=running.address, group="g") as consumer:
        pulled = consumer.pull("orders", queue_id=queue, offset=0).messages
    assert [(m.message_id, m.body, m.keys, m.tags, dict(m.properties)) for m in pulled] == [
        ("id-1", b"a", ("k1", "k 2"), "t1", {"p": "1"}),
        (rows[1]["message_id"], b"", (), "", {}),
        ("id-3", "é".encode(), ("ü",), "t3", {"q": 'say "hi"'}),
    ]
    assert all(m.born_timestamp > 0 for m in pulled)


def test_a_string_key_column_and_string_bodies(running):
    keys = ["plain", 'quo"te', "back\\slash", "ünï", None]
    with Producer(broker=running.address) as producer:
        receipts = producer.send_table("orders", pa.table({"body": ["b0", "b1", "b2", "b3", "b4"], "keys": keys}))
    (queue,) = set(receipts["queue_id"].to_pylist())
    with PullConsumer(broker=running.address, group="g") as consumer:
        pulled = consumer.pull("orders", queue_id=queue, offset=0).messages
    assert [m.keys for m in pulled] == [("plain",), ('quo"te',), ("back\\slash",), ("ünï",), ()]
    assert [m.body for m in pulled] == [b"b0", b"b1", b"b2", b"b3", b"b4"]


def test_a_big_table_goes_in_calls_of_1024_rows_or_4_mib_each_in_the_next_queue(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data", max_body_bytes=2 * 1024 * 1024))
    try:
        big = [b"B" * (1536 * 1024)] * 5  # 1.5 MiB each: two to a call
        table = pa.table({"body": pa.array([b"s"] * 2500 + big, pa.binary())})
        with Producer(broker=broker.address) as producer:
            receipts = producer.send_table("orders", table).to_pylist()
    finally:
        broker.stop()
    calls = [receipts[0:1024], receipts[1024:2048], receipts[2048:2500], *(receipts[i : i + 2] for i in (2500, 2502)),
             receipts[2504:]]  # fmt: skip
    assert sum(map(len, calls)) == len(receipts) == 2505
    queues = [{r["queue_id"] for r in call} for call in calls]
    assert all(len(q) == 1 for q in queues)
    assert {q.pop() for q in queues} == {0, 1, 2, 3}  # the queues take turns
    for call in calls:
        offsets = [r["queue_offset"] for r in call]
        assert offsets == list(range(offsets[0], offsets[0] + len(call)))


def test_a_table_sent_again_with_its_ids_is_stored_once(running):
    table = pa.table({"body": [b"x", b"y"], "message_id": ["again-1", "again-2"]})
    with Producer(broker=running.address) as producer:
        first = producer.send_table("orders", table)
        before = store_snapshot(data_dir(running))
        second = producer.send_table("orders", table)
    assert second.equals(first)
    assert store_snapshot(data_dir(running)) == before


def test_a_table_mixing_stored_and_new_ids_stores_the_new_ones_at_the_next_offsets(running):
    with Producer(broker=running.address) as producer:
        first = producer.send_table("orders", pa.table({"body": [b"x"], "message_id": ["kept"]})).to_pylist()
        mixed = producer.send_table(
            "orders", pa.table({"body": [b"n1", b"x", b"n2"], "message_id": ["new-1", "kept", "new-2"]})
        ).to_pylist()
    assert mixed[1] == first[0]
    (queue,) = {mixed[0]["queue_id"], mixed[2]["queue_id"]}
    assert queue != first[0]["queue_id"]  # the queues take turns
    assert [mixed[0]["queue_offset"], mixed[2]["queue_offset"]] == [0, 1]  # no offset lost to the stored id
    with PullConsumer(broker=running.address, group="g") as consumer:
        pulled = consumer.pull("orders", queue_id=queue, offset=0).messages
    assert [(m.message_id, m.body) for m in pulled] == [("new-1", b"n1"), ("new-2", b"n2")]


def packed(values: list[bytes]) -> pb.PackedColumn:
    return pb.PackedColumn(offsets=array("i", accumulate(map(len, values), initial=0)).tobytes(), data=b"".join(values))


def test_each_bad_row_is_refused_alone_and_the_rest_stored(running):
    with Producer(broker=running.address) as producer:
        producer.send(SdkMessage(topic="orders", body=b"seed", message_id="stored-before"))
        producer.send_table("orders", pa.table({"body": [b"x"], "message_id": ["dup-in-table"]}))
    # rows: (message id, keys JSON, tags, properties JSON, body, the refusal expected or None)
    rows = [
        (b"ok-1", b"[]", b"", b"{}", b"fine", None),
        (b"bad id!", b"[]", b"", b"{}", b"x", "INVALID_ARGUMENT"),
        (b"ok-2", b'["a", "b"]', b"t", b'{"k": "v"}', b"fine", None),
        (b"big", b"[]", b"", b"{}", b"x" * (MAX_BODY + 1), "MESSAGE_TOO_LARGE"),
        (b"big-keys", b'["' + b"k" * 1024 + b'"]', b"", b"{}", b"x" * (MAX_BODY - 1023), "MESSAGE_TOO_LARGE"),
        (b"keys-not-json", b"[oops", b"", b"{}", b"x", "INVALID_ARGUMENT"),
        (b"keys-not-strings", b"[1]", b"", b"{}", b"x", "INVALID_ARGUMENT"),
        (b"empty-key", b'[""]', b"", b"{}", b"x", "INVALID_ARGUMENT"),
        (b"tags-not-utf8", b"[]", b"\xff", b"{}", b"x", "INVALID_ARGUMENT"),
        (b"long-tags", b"[]", b"t" * 1025, b"{}", b"x", "INVALID_ARGUMENT"),
        (b"reserved", b"[]", b"", b'{"REAL_TOPIC": "x"}', b"x", "INVALID_ARGUMENT"),
        (b"props-not-object", b"[]", b"", b'["a"]', b"x", "INVALID_ARGUMENT"),
        (b"stored-before", b"[]", b"", b"{}", b"other", None),  # keeps its position
        (b"ok-3", b"[]", b"", b"{}", b"fine", None),
        (b"ok-3", b"[]", b"", b"{}", b"fine", None),  # twice in one table: stored once
        (b"dup-in-table", b"[]", b"", b"{}", b"x", None),
    ]
    with grpc.insecure_channel(running.address) as channel:
        half = send_half(pb_grpc.BrokerStub(channel), pb.Message(topic="orders", body=b"h", message_id="half"), "g")
        assert half.transaction_id
        rows.append((b"half", b"[]", b"", b"{}", b"x", "MESSAGE_ID_IN_USE"))
        before = store_snapshot(data_dir(running))
        request = pb.SendColumnsRequest(
            topic="orders",
            messages=pb.MessageColumns(
                count=len(rows),
                **{name: packed([row[i] for row in rows]) for i, name in
                   enumerate(("message_ids", "keys", "tags", "properties", "bodies"))},
            ),
        )  # fmt: skip
        reply = pb_grpc.BrokerStub(channel).SendColumns(request)
    refused = {r.index: r.error.code for r in reply.refused}
    assert refused == {i: row[5] for i, row in enumerate(rows) if row[5]}
    assert all(r.error.message for r in reply.refused)
    queue_ids, offsets = array("i", reply.queue_ids), array("q", reply.queue_offsets)
    assert [(queue_ids[i], offsets[i]) for i in refused] == [(-1, -1)] * len(refused)
    assert (queue_ids[14], offsets[14]) == (queue_ids[13], offsets[13])
    after = store_snapshot(data_dir(running))
    new = sorted(set(after["messages"]) - set(before["messages"]), key=lambda row: row[0])
    assert [row[4] for row in new] == ["ok-1", "ok-2", "ok-3"]  # message ids
    assert [(row[6], row[7], row[8]) for row in new] == [("[]", "", "{}"), ('["a", "b"]', "t", '{"k": "v"}'),
                                                         ("[]", "", "{}")]  # fmt: skip
    assert {table: rows for table, rows in after.items() if table not in ("messages", "sqlite_sequence")} == {
        table: rows for table, rows in before.items() if table not in ("messages", "sqlite_sequence")
    }
    assert set(before["messages"]) <= set(after["messages"])


def test_send_table_names_the_first_refused_row_and_keeps_the_receipts(running):
    table = pa.table({"body": [b"a", b"x" * (MAX_BODY + 1), b"c"], "message_id": ["r-1", "r-2", "r-3"]})
    with Producer(broker=running.address) as producer, pytest.raises(MessageTooLarge) as refused:
        producer.send_table("orders", table)
    assert "row 1:" in str(refused.value) and "1 of 3 rows refused" in str(refused.value)
    receipts = refused.value.receipts.to_pylist()
    assert [r["queue_offset"] for r in receipts] == [0, None, 1]


@pytest.mark.parametrize(
    ("table", "named"),
    [
        (pa.table({"keys": ["k"]}), "'body'"),
        (pa.table({"body": [b"x"], "colour": ["red"]}), "'colour'"),
        (pa.table({"body": [1]}), "'body'"),
        (pa.table({"body": [b"x"], "tags": [3]}), "'tags'"),
    ],
)
def test_send_table_refuses_a_column_it_does_not_know_before_sending(running, table, named):
    before = store_snapshot(data_dir(running))
    with Producer(broker=running.address) as producer, pytest.raises(ValueError, match=named):
        producer.send_table("orders", table)
    assert store_snapshot(data_dir(running)) == before


def test_send_table_of_an_unknown_topic_raises_its_error(running):
    with Producer(broker=running.address) as producer, pytest.raises(TopicNotFound):
        producer.send_table("nope", pa.table({"body": [b"x"]}))
    with Producer(broker=running.address) as producer, pytest.raises(InvalidArgument):
        producer.send_table("orders", pa.table({"body": [b"x"], "message_id": ["no spaces"]}))


def test_messages_already_apart_are_stored_as_their_table_would_be_and_refused_whole_across_topics(running):
    messaging = running.broker.messaging
    mixed = [Message("orders", b"a", "m-1"), Message("payments", b"b", "m-2")]
    before = store_snapshot(data_dir(running))
    with pytest.raises(errors.InvalidArgument, match="of one topic"):
        running.run(messaging.send_rows(mixed, queue_id=0))
    assert store_snapshot(data_dir(running)) == before
    rows = running.run(messaging.send_rows([Message("orders", b"a", "m-1"), Message("orders", b"b", "m-2")], 1))
    table = running.run(messaging.send_columns(MessageColumns(
        "orders", pa.array([b"m-3", b"m-4"]), None, None, None, pa.array([b"c", b"d"]), None), 1))  # fmt: skip
    assert (list(rows.queue_offsets), list(table.queue_offsets)) == ([0, 1], [2, 3])


# --- the column checks are check_message's --------------------------------------------------

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
ascii_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=0, max_size=6)
keys = st.one_of(st.lists(st.one_of(text, ascii_text), max_size=3), st.just([]))
properties = st.dictionaries(st.one_of(text, st.sampled_from(["REAL_TOPIC", "k"])), text, max_size=3)
rows = st.lists(
    st.tuples(
        st.one_of(st.from_regex(r"[A-Za-z0-9_.:-]{1,8}", fullmatch=True), text, st.just("x" * 129)),
        keys,
        st.one_of(text, st.just("t" * 1025)),
        properties,
        st.one_of(st.binary(max_size=8), st.binary(min_size=40, max_size=64)),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(rows)
def test_the_column_checks_refuse_what_check_message_refuses_and_store_what_it_stores(table_rows):
    import json

    limit = 48
    columns = MessageColumns(
        topic="orders",
        message_ids=pa.array([r[0].encode() for r in table_rows], pa.binary()),
        keys=pa.array([json.dumps(r[1]).encode() if r[1] else b"[]" for r in table_rows], pa.binary()),
        tags=pa.array([r[2].encode() for r in table_rows], pa.binary()),
        properties=pa.array([json.dumps(r[3]).encode() if r[3] else b"{}" for r in table_rows], pa.binary()),
        bodies=pa.array([r[4] for r in table_rows], pa.binary()),
        born_timestamps=None,
    )
    checked = check_columns(columns, limit)
    for index, (message_id, row_keys, tags, row_properties, body) in enumerate(table_rows):
        message = Message("orders", body, message_id, tuple(row_keys), tags, row_properties)
        try:
            check_message(message, limit)
            expected = None
        except HalfmqError as exc:
            expected = (type(exc), str(exc))
        got = checked.refused.get(index)
        assert (None if got is None else (type(got), str(got))) == expected
    # Checked one at a time, the same messages pass and fail alike.
    apart = check_messages([Message("orders", r[4], r[0], tuple(r[1]), r[2], r[3]) for r in table_rows], limit)
    assert apart.rows == checked.rows
    assert {i: (type(e), str(e)) for i, e in apart.refused.items()} == {
        i: (type(e), str(e)) for i, e in checked.refused.items()
    }
    stored = [i for i in range(len(table_rows)) if i not in checked.refused]
    assert list(checked.rows.message_ids) == [table_rows[i][0] for i in stored]
    assert [json.loads(k) for k in checked.rows.keys] == [table_rows[i][1] for i in stored]
    assert [json.loads(p) for p in checked.rows.properties] == [table_rows[i][3] for i in stored]
    assert list(checked.rows.bodies) == [table_rows[i][4] for i in stored]
