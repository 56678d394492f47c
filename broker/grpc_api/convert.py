"""Conversion between ``halfmq.v1`` protobuf messages and the core's domain objects."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from itertools import accumulate

from broker.errors import InvalidArgument
from broker.model import (
    EndResult,
    Message,
    Packed,
    PullBatch,
    QueueColumns,
    Resolution,
    Source,
    StoredMessage,
    Topic,
    Transaction,
    TransactionState,
)
from halfmq_proto.v1 import halfmq_pb2 as pb

RESOLUTIONS: dict[int, Resolution] = {
    pb.COMMIT: Resolution.COMMIT,
    pb.ROLLBACK: Resolution.ROLLBACK,
    pb.UNKNOWN: Resolution.UNKNOWN,
}
SOURCES: dict[int, Source] = {pb.CLIENT: Source.CLIENT, pb.CHECK: Source.CHECK}
STATES: dict[TransactionState, pb.TransactionState] = {
    TransactionState.PENDING: pb.PENDING,
    TransactionState.COMMITTED: pb.COMMITTED,
    TransactionState.ROLLED_BACK: pb.ROLLED_BACK,
    TransactionState.DISCARDED: pb.DISCARDED,
}


def message_from_pb(message: pb.Message) -> Message:
    return Message(
        topic=message.topic,
        body=message.body,
        message_id=message.message_id,
        keys=tuple(message.keys),
        tags=message.tags,
        properties=dict(message.properties),
        born_timestamp=message.born_timestamp,
    )


def stored_to_pb(message: StoredMessage) -> pb.StoredMessage:
    return pb.StoredMessage(
        topic=message.topic,
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        message_id=message.message_id,
        transaction_id=message.transaction_id,
        keys=message.keys,
        tags=message.tags,
        properties=message.properties,
        body=message.body,
        born_timestamp=message.born_timestamp,
        store_timestamp=message.store_timestamp,
    )


def columns_to_pb(batch: PullBatch[QueueColumns]) -> pb.PullColumnsResponse:
    """A pull as packed columns: joins and packs in C, no Python work per message. Fields are set
    in place: a submessage passed to a constructor is copied through a serialize and a parse."""
    c = batch.messages
    reply = pb.PullColumnsResponse(
        count=len(c),
        queue_offsets=_int64s(c.queue_offsets),
        born_timestamps=_int64s(c.born_timestamps),
        store_timestamps=_int64s(c.store_timestamps),
        next_offset=batch.next_offset,
        min_offset=batch.min_offset,
        max_offset=batch.max_offset,
    )
    for column, values, default in (
        (reply.message_ids, c.message_ids, b""),
        (reply.transaction_ids, c.transaction_ids, b""),
        (reply.keys, c.keys, b"[]"),
        (reply.tags, c.tags, b""),
        (reply.properties, c.properties, b"{}"),
        (reply.bodies, c.bodies, b""),
    ):
        if values.count(default) != len(values):  # all-default columns stay empty
            column.offsets = _little_endian(accumulate(map(len, values), initial=0), "i")
            column.data = b"".join(values)
    return reply


def segment_to_pb(columns: QueueColumns, next_offset: int) -> bytes:
    """A packed segment (``broker.store.segments``): the ``PullColumnsResponse`` a pull starting at
    its first message sends, serialised, with no queue range; ``packed_reply`` appends that."""
    segment: bytes = columns_to_pb(PullBatch(columns, next_offset, 0, 0)).SerializeToString()
    return segment


def packed_reply(segment: Packed, min_offset: int, max_offset: int) -> bytes:
    """A ``PullColumnsResponse`` of a stored segment, serialised: the segment as stored, then the
    queue's range. Protobuf reads a later field over an earlier one, and the segment has none."""
    queue_range: bytes = pb.PullColumnsResponse(min_offset=min_offset, max_offset=max_offset).SerializeToString()
    return segment.data + queue_range


def _little_endian(values: Iterable[int], typecode: str) -> bytes:
    packed = array(typecode, values)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def _int64s(values: Iterable[int]) -> bytes:
    return _little_endian(values, "q")


def send_result_to_pb(message: StoredMessage) -> pb.SendResult:
    return pb.SendResult(
        message_id=message.message_id, topic=message.topic, queue_id=message.queue_id, queue_offset=message.queue_offset
    )


def half_to_pb(txn: Transaction) -> pb.SendHalfMessageResponse:
    return pb.SendHalfMessageResponse(
        transaction_id=txn.transaction_id, message_id=txn.message_id, half_offset=txn.half_offset
    )


def end_to_pb(result: EndResult) -> pb.EndTransactionResponse:
    return pb.EndTransactionResponse(state=STATES[result.state], already_resolved=result.already_resolved)


def topic_to_pb(topic: Topic) -> pb.Topic:
    return pb.Topic(name=topic.name, queues=topic.queues, retention_seconds=topic.retention)


def resolution_from_pb(value: int) -> Resolution:
    if value not in RESOLUTIONS:
        raise InvalidArgument(f"resolution must be COMMIT, ROLLBACK or UNKNOWN, got {value}")
    return RESOLUTIONS[value]


def source_from_pb(value: int) -> Source:
    """An unset source means the client's own call."""
    if value == pb.SOURCE_UNSPECIFIED:
        return Source.CLIENT
    if value not in SOURCES:
        raise InvalidArgument(f"source must be CLIENT or CHECK, got {value}")
    return SOURCES[value]
