"""Conversion between ``halfmq.v1`` protobuf messages and the core's domain objects."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from itertools import accumulate, pairwise
from typing import TYPE_CHECKING

from broker.columns import MessageColumns
from broker.errors import InvalidArgument
from broker.model import (
    Appended,
    EndResult,
    Message,
    Packed,
    Placement,
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

if TYPE_CHECKING:
    import pyarrow as pa


def message_from_pb(message: pb.Message) -> Message:
    return Message(
        topic=message.topic,
        body=message.body,
        message_id=message.message_id,
        keys=tuple(message.keys),
        tags=message.tags,
        properties=dict(message.properties),
        born_timestamp=message.born_timestamp,
        deliver_at=message.deliver_at or None,
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


# The PullColumnsResponse columns packed as PackedColumn (named as QueueColumns' fields), and
# the value of every message of a column sent empty.
_PACKED_DEFAULTS = {
    "message_ids": b"", "transaction_ids": b"", "keys": b"[]", "tags": b"", "properties": b"{}", "bodies": b"",
}  # fmt: skip


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
    for name, default in _PACKED_DEFAULTS.items():
        column, values = getattr(reply, name), getattr(c, name)
        if values.count(default) != len(values):  # all-default columns stay empty
            column.offsets = _little_endian(accumulate(map(len, values), initial=0), "i")
            column.data = b"".join(values)
    return reply


def segment_to_pb(columns: QueueColumns, next_offset: int) -> bytes:
    """A packed segment (``broker.store.segments``): the ``PullColumnsResponse`` a pull starting at
    its first message sends, serialised, with no queue range; ``packed_reply`` appends that."""
    segment: bytes = columns_to_pb(PullBatch(columns, next_offset, 0, 0)).SerializeToString()
    return segment


def segment_from_pb(segment: bytes) -> QueueColumns:
    """The messages of a packed segment, as ``segment_to_pb`` had them: for a front end that
    writes messages its own way (the Kafka port's record batches) reading a segment's instead of
    rows."""
    reply = pb.PullColumnsResponse.FromString(segment)
    return QueueColumns(
        queue_offsets=_ints(reply.queue_offsets, "q"),
        born_timestamps=_ints(reply.born_timestamps, "q"),
        store_timestamps=_ints(reply.store_timestamps, "q"),
        **{name: _values(getattr(reply, name), reply.count, default) for name, default in _PACKED_DEFAULTS.items()},
    )


def _ints(data: bytes, typecode: str) -> array[int]:
    """Little-endian integers, as ``_little_endian`` wrote them."""
    values = array(typecode, data)
    if sys.byteorder == "big":
        values.byteswap()
    return values


def _values(column: pb.PackedColumn, count: int, default: bytes) -> list[bytes]:
    """A PackedColumn's values; left empty, every value is ``default``."""
    if not column.offsets:
        return [default] * count
    data = column.data
    return [data[start:end] for start, end in pairwise(_ints(column.offsets, "i"))]


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


def columns_from_pb(topic: str, columns: pb.MessageColumns) -> MessageColumns:
    """A table of messages as the core takes it; raises InvalidArgument for a column whose
    length or offsets do not match ``count``."""
    import pyarrow as pa  # where used, as broker/columns.py says

    count = columns.count
    if count < 0:
        raise InvalidArgument(f"count must not be negative, got {count}")
    born = columns.born_timestamps
    if born and len(born) != 8 * count:
        raise InvalidArgument(f"born_timestamps holds {len(born)} bytes, not 8 per message ({count} messages)")
    message_ids = _binary(columns.message_ids, count, "message_ids")
    if message_ids is None:
        raise InvalidArgument("message_ids must be given, one per message")
    bodies = _binary(columns.bodies, count, "bodies")
    return MessageColumns(
        topic=topic,
        message_ids=message_ids,
        keys=_binary(columns.keys, count, "keys"),
        tags=_binary(columns.tags, count, "tags"),
        properties=_binary(columns.properties, count, "properties"),
        bodies=pa.repeat(pa.scalar(b""), count) if bodies is None else bodies,
        born_timestamps=pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(born)]) if born else None,
    )


def _binary(column: pb.PackedColumn, count: int, name: str) -> pa.Array | None:
    """A PackedColumn as a binary array; None when it is left empty (every value the default)."""
    import pyarrow as pa

    if not column.offsets and not column.data:
        return None
    if len(column.offsets) != 4 * (count + 1):
        raise InvalidArgument(f"{name} holds {len(column.offsets)} bytes of offsets, not 4 per message plus 4")
    try:
        values = pa.Array.from_buffers(
            pa.binary(), count, [None, pa.py_buffer(column.offsets), pa.py_buffer(column.data)]
        )
        values.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise InvalidArgument(f"{name}: the offsets do not fit the data ({exc})") from None
    return values


def appended_to_pb(appended: Appended) -> pb.SendColumnsResponse:
    queue_ids, offsets = array("i", appended.queue_ids), array("q", appended.queue_offsets)
    if sys.byteorder == "big":
        queue_ids.byteswap()
        offsets.byteswap()
    refused = [
        pb.ItemRefusal(index=index, error=pb.ItemError(code=error.code, message=str(error)))
        for index, error in sorted(appended.refused.items())
    ]
    return pb.SendColumnsResponse(queue_ids=queue_ids.tobytes(), queue_offsets=offsets.tobytes(), refused=refused)


def send_result_to_pb(message: Placement) -> pb.SendResult:
    return pb.SendResult(
        message_id=message.message_id,
        topic=message.topic,
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        recall_handle=message.recall_handle,
    )


def half_to_pb(txn: Transaction) -> pb.SendHalfMessageResponse:
    return pb.SendHalfMessageResponse(
        transaction_id=txn.transaction_id, message_id=txn.message_id, half_offset=txn.half_offset
    )


def end_to_pb(result: EndResult) -> pb.EndTransactionResponse:
    return pb.EndTransactionResponse(state=STATES[result.state], already_resolved=result.already_resolved)


def topic_to_pb(topic: Topic) -> pb.Topic:
    kind = "" if topic.message_type is None else topic.message_type.value
    return pb.Topic(name=topic.name, queues=topic.queues, retention_seconds=topic.retention, message_type=kind)


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
