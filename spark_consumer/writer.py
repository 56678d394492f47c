"""The ``halfmq`` sink: Spark publishes rows to a topic exactly once, by two-phase commit of
open ranges.

    df.writeStream.format("halfmq").option("broker", "127.0.0.1:10911").option("topic", "events")
        .option("checkpointLocation", "...").start()

Spark's writer protocol maps onto halfmq's batches as Flink's two-phase-commit sink maps onto
Kafka transactions:
- **prepare**: each task sends its rows as columns (``PrepareColumns``: each call's rows to one
  queue, at their final offsets, invisible) in open ranges of the producer group
  ``spark-<query id>`` (the query id lives in the checkpoint) and the micro-batch's id, and
  returns the range ids in its commit message;
- **commit**: the driver ends the batch with one ``EndBatch(COMMIT)``. The broker closes those
  ranges (their messages become visible; nothing is copied) and records the batch as committed,
  in one store transaction. A batch already recorded commits nothing more: a batch Spark
  replays after a crash between the sink's commit and its own commit log is recognised, and the
  replay's ranges are rolled back;
- **abort**: ``EndBatch(ROLLBACK)`` rolls back what is open of the batch.
Every ``EndBatch`` also rolls back what is still open of the group's earlier or same batches
(task attempts that failed, a crashed run's prepared batch), so the restarted query's first
commit recovers what its dead predecessor left, as Flink's sink does when it restores; a batch
never ended is rolled back by the broker after its batch timeout.

With ``deliveryGuarantee=at-least-once``, tasks send plain messages as columns (``SendColumns``:
each call's rows to one queue) and commit does nothing, as Spark's Kafka sink does: a replayed
batch is published twice.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from spark_consumer.client import Connection, shared_client
from spark_consumer.options import BROKER, OptionError, read_ca
from spark_consumer.worker import freeze_once_per_worker

EXACTLY_ONCE, AT_LEAST_ONCE = "exactly-once", "at-least-once"
# Spark sets these local properties for every task of a micro-batch.
QUERY_ID, BATCH_ID = "sql.streaming.queryId", "streaming.sql.batchId"
_OPTIONS = ("broker", "topic", "tlsCaFile", "token", "deliveryGuarantee")
_SPARKS = {"path", "checkpointlocation"}  # options Spark itself passes to a sink
_TOPIC = re.compile(r"[A-Za-z0-9_\-%|]{1,127}")


@dataclass(frozen=True)
class SinkOptions:
    connection: Connection
    topic: str | None  # None: each row's ``topic`` column
    exactly_once: bool

    @classmethod
    def parse(cls, options: Mapping[str, str], schema: StructType) -> SinkOptions:
        """Check the options and the rows' schema; raise OptionError naming what is wrong."""
        given = {k.lower(): v for k, v in options.items()}
        unknown = sorted(set(given) - {o.lower() for o in _OPTIONS} - _SPARKS)
        if unknown:
            raise OptionError(f"unknown option(s) {unknown} for the halfmq sink; known: {list(_OPTIONS)}")
        broker = given.get("broker", "")
        if not BROKER.fullmatch(broker):
            raise OptionError(f"option 'broker' must be host:port, got {broker!r}")
        topic = given.get("topic")
        if topic is not None and not _TOPIC.fullmatch(topic):
            raise OptionError(f"option 'topic' must be a topic name, got {topic!r}")
        guarantee = given.get("deliveryguarantee", EXACTLY_ONCE)
        if guarantee not in (EXACTLY_ONCE, AT_LEAST_ONCE):
            raise OptionError(
                f"option 'deliveryGuarantee' must be {EXACTLY_ONCE} or {AT_LEAST_ONCE}, got {guarantee!r}"
            )
        _check_schema(schema, topic_column=topic is None)
        return cls(Connection(broker, read_ca(given.get("tlscafile")), given.get("token") or None), topic,
                   guarantee == EXACTLY_ONCE)  # fmt: skip


# The columns the sink writes, and the types each may have (nullability aside).
_COLUMNS = {
    "body": ("binary", "string"),
    "topic": ("string",),
    "keys": ("array<string>", "string"),
    "tags": ("string",),
    "properties": ("map<string,string>",),
    "message_id": ("string",),
}


def _check_schema(schema: StructType, *, topic_column: bool) -> None:
    fields = {f.name: f.dataType.simpleString() for f in schema.fields}
    if "body" not in fields:
        raise OptionError(f"the halfmq sink needs a 'body' column (binary or string); the rows have {sorted(fields)}")
    if topic_column and "topic" not in fields:
        raise OptionError("the halfmq sink needs option 'topic' or a 'topic' column")
    for name, kind in fields.items():
        if name not in _COLUMNS:
            raise OptionError(f"the halfmq sink does not know column {name!r}; it writes {sorted(_COLUMNS)}")
        if kind not in _COLUMNS[name]:
            raise OptionError(f"column {name!r} must be {' or '.join(_COLUMNS[name])}, not {kind}")


@dataclass(frozen=True)
class Prepared(WriterCommitMessage):
    """What one task did: the open ranges it stored (none in at-least-once mode)."""

    producer_group: str
    range_ids: tuple[int, ...]


def publish(options: SinkOptions, batches: Iterator[pa.RecordBatch], producer_group: str, batch_id: int) -> Prepared:
    """Write a task's rows: open ranges of ``producer_group``'s batch ``batch_id`` (exactly once)
    or plain messages (at least once). Raises the SDK's error for a refused row, which fails the
    task."""
    freeze_once_per_worker()
    client = shared_client(options.connection)
    ranges: list[int] = []
    for batch in batches:
        for topic, rows in by_topic(batch, options.topic):
            if options.exactly_once:
                ranges += client.prepare_table(producer_group, batch_id, topic, rows)
            else:
                client.send_table(topic, rows)
    return Prepared(producer_group, tuple(ranges))


def by_topic(batch: pa.RecordBatch, topic: str | None) -> Iterator[tuple[str, pa.Table]]:
    """The rows of ``batch`` by the topic they go to (``topic``, else each row's), without the
    topic column."""
    table = pa.Table.from_batches([batch])
    if topic is not None:
        yield topic, table
        return
    topics = table["topic"]
    if topics.null_count:
        raise ValueError("a row's topic is null: each row needs its topic, or the sink option 'topic'")
    for name in pc.unique(topics).to_pylist():
        yield name, table.filter(pc.equal(topics, name)).drop_columns(["topic"])


def end(options: SinkOptions, messages: Sequence[WriterCommitMessage | None], batch_id: int, commit: bool) -> None:
    """Commit or abort a batch on the driver, from its tasks' commit messages."""
    done = [m for m in messages if isinstance(m, Prepared)]
    if not options.exactly_once or not done:
        return  # nothing prepared that this driver knows of: the next EndBatch of the group rolls it back
    ranges = [range_id for m in done for range_id in m.range_ids]
    shared_client(options.connection).end_batch(done[0].producer_group, batch_id, ranges, commit=commit)


class HalfmqStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("halfmq")``: one micro-batch at a time, under the query's group."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Prepared:
        context = TaskContext.get()
        query_id = context.getLocalProperty(QUERY_ID) if context is not None else None
        batch_id = context.getLocalProperty(BATCH_ID) if context is not None else None
        if not query_id or batch_id is None:
            raise RuntimeError(f"Spark did not give this task its query and batch ({QUERY_ID}, {BATCH_ID})")
        return publish(self.options, iterator, f"spark-{query_id}", int(batch_id))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        end(self.options, messages, batchId, commit=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        end(self.options, messages, batchId, commit=False)


class HalfmqBatchWriter(DataSourceArrowWriter):
    """``write.format("halfmq")``: one batch, under a group of its own."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        self.producer_group = f"spark-write-{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Prepared:
        return publish(self.options, iterator, self.producer_group, 0)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        end(self.options, messages, 0, commit=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        end(self.options, messages, 0, commit=False)
