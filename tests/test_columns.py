"""The columnar pull (issue 10): PullColumns returns exactly the messages Pull returns, with the
same offsets and the same byte-budget cut, as Arrow without an object per message; ReadColumns
streams exactly the PullColumns replies of a range."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.model import Message
from broker.store import Store
from producer_sdk import Message as SdkMessage
from producer_sdk import Producer, PullConsumer, ReceivedMessage
from producer_sdk.errors import InvalidArgument, TopicNotFound
from spark_consumer.client import BrokerClient, Connection

MiB = 1 << 20
_topic_numbers = itertools.count()
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
names = st.from_regex(r"[A-Za-z0-9_.:-]{1,16}", fullmatch=True)
messages = st.lists(
    st.fixed_dictionaries(
        {
            "body": st.one_of(st.just(b""), st.binary(max_size=2048)),
            # Several keys of any text, or at most one of printable ASCII ('"' and '\\' among it),
            # which the columnar pull cuts out of its JSON as a column.
            "keys": st.one_of(
                st.lists(text.filter(bool), max_size=3),
                st.lists(st.from_regex(r"[ -~]{1,6}", fullmatch=True), max_size=1),
            ),
            "tags": text.filter(lambda t: "|" not in t),
            # Properties the messages often share, which the columnar pull parses once.
            "properties": st.one_of(st.dictionaries(names, text, max_size=3), st.sampled_from([{}, {"k": "v"}])),
        }
    ),
    min_size=1,
    max_size=12,
)


def rows_of(table) -> list[ReceivedMessage]:
    """The table's rows as the row pull gives them (timestamps back to milliseconds)."""
    return [
        ReceivedMessage(
            topic=r["topic"],
            queue_id=r["queue_id"],
            queue_offset=r["queue_offset"],
            message_id=r["message_id"],
            transaction_id=r["transaction_id"],
            keys=tuple(r["keys"]),
            tags=r["tags"],
            properties=dict(r["properties"]),
            body=r["body"],
            born_timestamp=int(r["born_timestamp"].timestamp() * 1000),
            store_timestamp=int(r["store_timestamp"].timestamp() * 1000),
        )
        for r in table.to_pylist()
    ]


def pull_both(consumer: PullConsumer, topic: str, queue_id: int, offset: int, max_messages: int):
    rows = consumer.pull(topic, queue_id=queue_id, offset=offset, max_messages=max_messages)
    columns = consumer.pull_table(topic, queue_id=queue_id, offset=offset, max_messages=max_messages)
    return rows, columns


def assert_same(rows, columns) -> None:
    assert rows_of(columns.messages) == rows.messages
    assert (columns.next_offset, columns.min_offset, columns.max_offset) == (
        rows.next_offset,
        rows.min_offset,
        rows.max_offset,
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sent=messages, data=st.data())
def test_the_columnar_pull_returns_exactly_what_the_row_pull_returns(broker, sent, data):
    topic = f"columns-{next(_topic_numbers)}"
    with Producer(broker=broker.address) as producer, PullConsumer(group="g", broker=broker.address) as consumer:
        producer.create_topic(topic, 2)
        for m in sent:
            producer.send(SdkMessage(topic=topic, body=m["body"], keys=m["keys"], tags=m["tags"],
                                     properties=m["properties"]))  # fmt: skip
        for queue_id in (0, 1):
            offset = data.draw(st.integers(0, 13), label="offset")  # past the end too
            max_messages = data.draw(st.integers(1, 5), label="max_messages")
            while True:
                rows, columns = pull_both(consumer, topic, queue_id, offset, max_messages)
                assert_same(rows, columns)
                if not rows.messages:
                    break
                offset = rows.next_offset


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(0, 40), offset=st.integers(0, 45), length=st.integers(1, 30), most=st.integers(1, 7))
def test_a_streamed_read_is_exactly_the_columnar_pulls_of_its_range(broker, count, offset, length, most):
    """Each reply is the PullColumns reply from where the last one ended; the stream ends with the
    reply that reaches the range's end, or with an empty one at the queue's end."""
    topic = f"streamed-{next(_topic_numbers)}"
    with Producer(broker=broker.address) as producer:
        producer.create_topic(topic, 1)
        if count:
            producer.send_batch([SdkMessage(topic=topic, body=b"m-%d" % i, keys=[f"k{i}"]) for i in range(count)])
    end = offset + length
    with BrokerClient(Connection(broker.address)) as client:
        expected, at = [], offset
        while at < end:
            expected.append(client.pull_columns(topic, 0, at, min(most, end - at)))
            if expected[-1].next_offset <= at:
                break
            at = expected[-1].next_offset
        assert list(client.read_columns(topic, 0, offset, end, most)) == expected
    assert not expected[-1].count or expected[-1].next_offset >= end
    assert sum(reply.count for reply in expected) == max(0, min(end, count) - offset)


def test_tables_and_pulled_columns_cross_to_and_from_arrow_without_importing_pandas(broker, tmp_path: Path):
    """``pa.array``, and a Python value in a compute call, import pandas: 0.75 s of CPU in each
    fresh Spark Python worker. A fresh interpreter sends a table with nulls, no keys, one key,
    several keys and properties, pulls it back as Arrow, and reads it as a Spark task does,
    without importing it."""
    topic = f"no-pandas-{next(_topic_numbers)}"
    table = pa.table({
        "body": pa.array([b"a", b"b", None], pa.binary()),
        "message_id": pa.array([None, "m-1", None], pa.string()),
        "keys": pa.array([[], ["k"], ["k1", "ключ"]], pa.list_(pa.string())),
        "tags": pa.array([None, "t", None], pa.string()),
        "properties": pa.array([[], [("p", "1")], [("p", "2"), ("q", "3")]], pa.map_(pa.string(), pa.string())),
    })  # fmt: skip
    with pa.ipc.new_file(tmp_path / "table.arrow", table.schema) as file:
        file.write_table(table)
    with Producer(broker=broker.address) as producer:
        producer.create_topic(topic, 1)
    script = f"""
import sys
import pyarrow as pa
from producer_sdk import Producer
from producer_sdk.columns import record_batch
from spark_consumer.client import BrokerClient, Connection
from spark_consumer.source import QueueSlice, read_slice
with pa.ipc.open_file({str(tmp_path / "table.arrow")!r}) as file:
    table = file.read_all()
with Producer(broker={broker.address!r}) as producer:
    print(producer.send_table({topic!r}, table).column("queue_offset").to_pylist())
with BrokerClient(Connection({broker.address!r})) as client:
    for count in (1, 2, 3):
        print(record_batch({topic!r}, 0, client.pull_columns({topic!r}, 0, 0, count)).column("keys").to_pylist())
whole = QueueSlice(Connection({broker.address!r}), {topic!r}, 0, 0, 3, 2, True)
print([batch.num_rows for batch in read_slice(whole)])
print("pandas" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "[0, 1, 2]",
        "[[]]",
        "[[], ['k']]",
        "[[], ['k'], ['k1', 'ключ']]",
        "[2, 1]",
        "False",
    ]
    with PullConsumer(group="g", broker=broker.address) as consumer:
        pulled = consumer.pull(topic, queue_id=0, offset=0, max_messages=3).messages
    assert [(m.body, m.tags, m.properties) for m in pulled] == [
        (b"a", "", {}),
        (b"b", "t", {"p": "1"}),
        (b"", "", {"p": "2", "q": "3"}),
    ]


def test_a_streamed_read_refuses_a_bad_range_with_a_typed_error(broker):
    with Producer(broker=broker.address) as producer:
        producer.create_topic("refusals", 1)
    with BrokerClient(Connection(broker.address)) as client:
        for offset, end, most in ((5, 5, 1), (5, 4, 1), (0, 5, 0), (0, 5, 1025), (-1, 5, 1)):
            with pytest.raises(InvalidArgument):
                list(client.read_columns("refusals", 0, offset, end, most))
        with pytest.raises(TopicNotFound):
            list(client.read_columns("missing", 0, 0, 5, 1))


def test_4_mib_bodies_come_through_the_columnar_pull_whole_and_within_the_byte_budget(broker):
    bodies = [os.urandom(4 * MiB - 1024) for _ in range(5)]
    with Producer(broker=broker.address) as producer, PullConsumer(group="g", broker=broker.address) as consumer:
        producer.create_topic("big", 1)
        for body in bodies:
            producer.send(SdkMessage(topic="big", body=body))
        offset, pulled = 0, []
        while offset < len(bodies):
            rows, columns = pull_both(consumer, "big", 0, offset, 1024)
            assert_same(rows, columns)
            assert 1 <= columns.messages.num_rows <= 4  # 16 MiB: four of them at most
            pulled += columns.messages.column("body").to_pylist()
            offset = columns.next_offset
    assert pulled == bodies


def test_the_byte_budget_cuts_both_reads_at_the_same_message(tmp_path: Path):
    """Sizes are stored bytes: body, ids, keys and properties as JSON, tags (text as UTF-8)."""

    async def scenario() -> None:
        store = Store(tmp_path)
        await store.create_topic("t", 1)
        placed = [(Message(topic="t", body=b"x" * 100, message_id=f"m{i}", tags="ü"), 0) for i in range(5)]
        await store.append(placed, 1)
        size = 100 + len("m0") + len("") + len("[]") + len("ü".encode()) + len("{}")
        for max_bytes, limit, offset, expected in [
            (3 * size, 10, 0, 3),  # exactly three fit
            (3 * size - 1, 10, 0, 2),  # one byte short of the third
            (size - 1, 10, 0, 1),  # not even one fits: one anyway
            (10 * size, 2, 0, 2),  # the count limit first
            (10 * size, 10, 3, 2),  # from the middle to the end
            (10 * size, 10, 5, 0),  # at the end
        ]:
            read = store.read("t", 0, offset, limit, max_bytes)
            columns = store.read_columns("t", 0, offset, limit, max_bytes)
            assert [m.queue_offset for m in read] == list(columns.queue_offsets)
            assert len(read) == expected, (max_bytes, limit, offset)
            assert list(columns.bodies) == [m.body for m in read]
        store.close()

    asyncio.run(scenario())
