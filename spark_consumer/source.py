"""The ``halfmq`` PySpark data source: batch and streaming reads of committed topics.

Planning (offsets, partitions) runs on the driver side; ``read`` runs in Spark's Python workers
on the executors, over one gRPC channel per worker process, so only the picklable ``QueueSlice``
travels. Messages come as columns (``PullColumns``) and become Arrow batches without a Python
object per message.
Half, rolled-back and discarded messages are never in a real topic, so never read.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from producer_sdk.columns import record_batch
from producer_sdk.errors import OffsetOutOfRange
from spark_consumer import offsets as off
from spark_consumer.client import BrokerClient, Connection, shared_client
from spark_consumer.options import SourceOptions
from spark_consumer.worker import freeze_once_per_worker
from spark_consumer.writer import HalfmqBatchWriter, HalfmqStreamWriter, SinkOptions

READ_PART = 16  # pulls per call: a call's timeout bounds the time to read this many

SCHEMA = (
    "topic string, queue_id int, queue_offset long, message_id string, transaction_id string,"
    " keys array<string>, tags string, properties map<string, string>, body binary,"
    " born_timestamp timestamp, store_timestamp timestamp"
)


@dataclass(frozen=True)
class QueueSlice(InputPartition):
    """Messages ``[start, end)`` of one queue: one Spark input partition."""

    connection: Connection
    topic: str
    queue_id: int
    start: int
    end: int
    fetch_size: int
    fail_on_data_loss: bool


def slices(
    options: SourceOptions, start: off.Offsets, end: off.Offsets, readers: tuple[Connection, ...]
) -> list[QueueSlice]:
    """One slice per queue with messages to read, spread in turn over ``readers``."""
    wanted = [
        (topic, queue, start[topic].get(queue, 0), stop)
        for topic, queues in sorted(end.items())
        for queue, stop in sorted(queues.items())
        if stop > start[topic].get(queue, 0)
    ]
    return [
        QueueSlice(readers[i % len(readers)], topic, queue, begin, stop, options.fetch_size, options.fail_on_data_loss)
        for i, (topic, queue, begin, stop) in enumerate(wanted)
    ]


def read_slice(part: QueueSlice) -> Iterator[pa.RecordBatch]:
    """Read ``[start, end)`` of the queue as columns and yield them as Arrow batches; the same
    slice always yields the same messages, so a replayed micro-batch reads exactly what it read
    before. Uses this process's channel to the broker, and streams the slice in parts of
    READ_PART pulls, each on one call, so the broker reads the next pull while Spark takes a
    batch."""
    freeze_once_per_worker()
    broker = shared_client(part.connection)
    where = f"{part.topic}/{part.queue_id}"
    offset = part.start
    while offset < part.end:
        stop = min(part.end, offset + part.fetch_size * READ_PART)
        try:
            for reply in broker.read_columns(part.topic, part.queue_id, offset, stop, part.fetch_size):
                if not reply.count and reply.next_offset <= offset:
                    if part.fail_on_data_loss:
                        raise off.DataLoss(
                            f"{where}: offset {offset} is beyond the newest message (the queue holds"
                            f" [{reply.min_offset}, {reply.max_offset})); was the broker's store replaced?"
                            " Set failOnDataLoss=false to skip it"
                        )
                    return
                offset = reply.next_offset
                if reply.count:  # else only offsets rolled back lay there
                    batch = record_batch(part.topic, part.queue_id, reply)
                    if offset > part.end:  # offsets rolled back are gaps: the reply holds messages past it
                        # Its offsets ascend; a slice spares pc.less, whose Python number imports pandas.
                        batch = batch.slice(0, bisect_left(batch["queue_offset"].to_pylist(), part.end))
                    yield batch
        except OffsetOutOfRange as exc:
            if part.fail_on_data_loss:
                raise off.DataLoss(f"{where}: {exc}. Set failOnDataLoss=false to skip what is gone") from exc
            offset = broker.ranges((part.topic,))[part.topic][part.queue_id][0]


class HalfmqBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        with BrokerClient(options.connection) as broker:
            ranges, self._readers = broker.offsets(options.topics)
        self._start = off.check_available(
            off.resolve("startingOffsets", options.starting, ranges), ranges, options.fail_on_data_loss
        )
        self._end = off.check_available(off.resolve("endingOffsets", options.ending, ranges), ranges, True)

    def partitions(self) -> list[QueueSlice]:
        return slices(self._options, self._start, self._end, self._readers)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueueSlice):  # Spark's one stand-in when there is nothing to read
            return iter(())
        return read_slice(partition)


class HalfmqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Holds only options (it is pickled with the read function); each call asks the broker afresh."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._target: off.Offsets | None = None

    def _ranges(self) -> off.Ranges:
        with BrokerClient(self._options.connection) as broker:
            return broker.ranges(self._options.topics)

    def _latest(self) -> off.Offsets:
        return off.resolve("latest", off.LATEST, self._ranges())

    def initialOffset(self) -> dict[str, Any]:
        ranges = self._ranges()
        start = off.resolve("startingOffsets", self._options.starting, ranges)
        return off.to_json(off.check_available(start, ranges, self._options.fail_on_data_loss))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self._options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        ranges = self._ranges()
        begin = off.check_available(off.from_json(start), ranges, self._options.fail_on_data_loss)
        latest = off.resolve("latest", off.LATEST, ranges)
        if self._target is not None:
            latest = off.cap(latest, self._target)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return off.to_json(off.admit(begin, latest, max_rows))

    def reportLatestOffset(self) -> dict[str, Any]:
        return off.to_json(self._latest())

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[QueueSlice]:
        with BrokerClient(self._options.connection) as broker:
            readers = broker.readers(self._options.topics[0])
        return slices(self._options, off.from_json(start), off.from_json(end), readers)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueueSlice)
        return read_slice(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the broker keeps committed messages for its retention."""

    def stop(self) -> None:
        """Nothing to close: no connection outlives a call."""


class HalfmqDataSource(DataSource):
    """``spark.read[Stream].format("halfmq")``: committed messages of halfmq topics;
    ``df.write[Stream].format("halfmq")``: rows published to a topic (``spark_consumer.writer``)."""

    @classmethod
    def name(cls) -> str:
        return "halfmq"

    def schema(self) -> str:
        """Also checks the options, so a bad one fails ``load()`` before the query starts."""
        SourceOptions.parse(self.options, streaming=None)
        return SCHEMA

    def reader(self, schema: StructType) -> HalfmqBatchReader:
        return HalfmqBatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> HalfmqStreamReader:
        return HalfmqStreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> HalfmqBatchWriter:
        return HalfmqBatchWriter(SinkOptions.parse(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> HalfmqStreamWriter:
        return HalfmqStreamWriter(SinkOptions.parse(self.options, schema))
