"""Pulled messages as Arrow: the broker's packed columns become arrays without a Python object
per message (needs pyarrow: ``pip install halfmq[arrow]``).

Only keys and properties other than the empty ``[]`` and ``{}`` are parsed one message at a time.
"""

from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Callable
from itertools import repeat

import pyarrow as pa
import pyarrow.compute as pc

from halfmq_proto.v1 import halfmq_pb2 as pb

TIMESTAMP = pa.timestamp("us", tz="UTC")
KEYS = pa.list_(pa.string())
PROPERTIES = pa.map_(pa.string(), pa.string())
ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("queue_id", pa.int32()),
        ("queue_offset", pa.int64()),
        ("message_id", pa.string()),
        ("transaction_id", pa.string()),
        ("keys", KEYS),
        ("tags", pa.string()),
        ("properties", PROPERTIES),
        ("body", pa.binary()),
        ("born_timestamp", TIMESTAMP),
        ("store_timestamp", TIMESTAMP),
    ]
)


def record_batch(topic: str, queue_id: int, reply: pb.PullColumnsResponse) -> pa.RecordBatch:
    """The messages of a ``PullColumns`` reply, of ``topic``/``queue_id``, in ``ARROW_SCHEMA``
    (timestamps: the broker's milliseconds as microseconds)."""
    count = reply.count
    columns = [
        _repeated(topic.encode(), count),
        pa.Array.from_buffers(pa.int32(), count, [None, pa.py_buffer(array("i", repeat(queue_id, count)).tobytes())]),
        _int64s(reply.queue_offsets, count),
        _packed(pa.string(), reply.message_ids, count),
        _packed(pa.string(), reply.transaction_ids, count),
        _json_column(reply.keys, count, KEYS, lambda text: json.loads(text)),
        _packed(pa.string(), reply.tags, count),
        _json_column(reply.properties, count, PROPERTIES, lambda text: list(json.loads(text).items())),
        _packed(pa.binary(), reply.bodies, count),
        _timestamps(reply.born_timestamps, count),
        _timestamps(reply.store_timestamps, count),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def _native(data: bytes, typecode: str) -> bytes:
    """Little-endian integers from the wire in this machine's order (Arrow's buffers are native)."""
    if sys.byteorder == "little":
        return data
    packed = array(typecode, data)
    packed.byteswap()
    return packed.tobytes()


def _int64s(data: bytes, count: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(_native(data, "q"))])


def _timestamps(data: bytes, count: int) -> pa.Array:
    return pc.multiply(_int64s(data, count), 1000).cast(TIMESTAMP)


def _packed(kind: pa.DataType, column: pb.PackedColumn, count: int) -> pa.Array:
    """A string or binary column; sent empty, every value is empty."""
    offsets = pa.py_buffer(_native(column.offsets, "i") if column.offsets else bytes(4 * (count + 1)))
    return pa.Array.from_buffers(kind, count, [None, offsets, pa.py_buffer(column.data)])


def _repeated(value: bytes, count: int) -> pa.Array:
    offsets = array("i", range(0, (count + 1) * len(value), len(value)) if value else repeat(0, count + 1)).tobytes()
    return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(value * count)])


def _json_column(column: pb.PackedColumn, count: int, kind: pa.DataType, parse: Callable[[bytes], object]) -> pa.Array:
    """A keys or properties column: sent empty, every message has none (the common case); else parsed."""
    if not column.offsets:
        offsets = pa.py_buffer(bytes(4 * (count + 1)))
        if kind == KEYS:
            return pa.Array.from_buffers(kind, count, [None, offsets], children=[pa.array([], pa.string())])
        return pa.MapArray.from_arrays(pa.Array.from_buffers(pa.int32(), count + 1, [None, offsets]),
                                       pa.array([], pa.string()), pa.array([], pa.string()))  # fmt: skip
    texts = _packed(pa.binary(), column, count).to_pylist()
    return pa.array([parse(text) for text in texts], kind)
