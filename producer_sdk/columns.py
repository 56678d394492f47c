"""Messages as Arrow, both ways, without a Python object per message: tables a producer sends
become the broker's columns (``table_calls``), and pulled columns become record batches
(``record_batch``).

Only keys other than none or one key of printable ASCII are turned into or out of JSON one
message at a time; pulled properties are parsed once for each distinct set.

Neither way calls ``pa.array`` or passes a Python value to a compute function (its arrays and
scalars are built from buffers): either makes pyarrow import pandas, 0.75 s of CPU in each fresh
Spark Python worker, and Spark replaces its workers after a minute idle.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from array import array
from asyncio import FIRST_COMPLETED
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import accumulate, repeat
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from halfmq_proto.v1 import halfmq_pb2 as pb
from producer_sdk._client import BrokerClient
from producer_sdk.errors import from_item_error
from producer_sdk.message import new_message_id

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
        _int32s(repeat(queue_id, count)),
        _int64s(reply.queue_offsets, count),
        _packed(pa.string(), reply.message_ids, count),
        _packed(pa.string(), reply.transaction_ids, count),
        _keys(reply.keys, count),
        _packed(pa.string(), reply.tags, count),
        _properties(reply.properties, count),
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
    return _int64s(data, count).view(pa.timestamp("ms", tz="UTC")).cast(TIMESTAMP)


def _int32s(values: Iterable[int]) -> pa.Array:
    data = array("i", values)
    return pa.Array.from_buffers(pa.int32(), len(data), [None, pa.py_buffer(data)])


def _string_array(values: list[str]) -> pa.Array:
    data = [value.encode() for value in values]
    offsets = pa.py_buffer(array("i", accumulate(map(len, data), initial=0)))
    return pa.Array.from_buffers(pa.string(), len(data), [None, offsets, pa.py_buffer(b"".join(data))])


def _text(value: str) -> pa.Scalar:
    return _string_array([value])[0]


_NO_STRINGS = _string_array([])


def _packed(kind: pa.DataType, column: pb.PackedColumn, count: int) -> pa.Array:
    """A string or binary column; sent empty, every value is empty."""
    offsets = pa.py_buffer(_native(column.offsets, "i") if column.offsets else bytes(4 * (count + 1)))
    return pa.Array.from_buffers(kind, count, [None, offsets, pa.py_buffer(column.data)])


def _repeated(value: bytes, count: int) -> pa.Array:
    offsets = array("i", range(0, (count + 1) * len(value), len(value)) if value else repeat(0, count + 1)).tobytes()
    return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(value * count)])


def _keys(column: pb.PackedColumn, count: int) -> pa.Array:
    """The keys column: sent empty, no message has one (the common case); each message with none
    or one key of printable ASCII, cut out of its JSON as a column; else parsed one at a time."""
    if not column.offsets:
        offsets = pa.py_buffer(bytes(4 * (count + 1)))
        return pa.Array.from_buffers(KEYS, count, [None, offsets], children=[_NO_STRINGS])
    texts = _packed(pa.string(), column, count)
    if not pc.all(pc.match_substring_regex(texts, _NONE_OR_ONE_KEY)).as_py():
        keys = [json.loads(text) for text in texts.to_pylist()]
        offsets = _int32s(accumulate(map(len, keys), initial=0))
        return pa.ListArray.from_arrays(offsets, _string_array([key for each in keys for key in each]))
    one = pc.starts_with(texts, '["')  # else '[]'
    offsets = pa.concat_arrays([_int32s([0]), pc.cumulative_sum(one.cast(pa.int32()))])
    return pa.ListArray.from_arrays(offsets, pc.utf8_slice_codeunits(pc.filter(texts, one), 2, -2))


def _properties(column: pb.PackedColumn, count: int) -> pa.Array:
    """The properties column: sent empty, no message has any; else each distinct set parsed once."""
    if not column.offsets:
        return pa.MapArray.from_arrays(_int32s(repeat(0, count + 1)), _NO_STRINGS, _NO_STRINGS)
    texts = _packed(pa.binary(), column, count).dictionary_encode()
    sets = [json.loads(text) for text in texts.dictionary.to_pylist()]
    offsets = _int32s(accumulate(map(len, sets), initial=0))
    names = _string_array([name for each in sets for name in each])
    values = _string_array([value for each in sets for value in each.values()])
    return pa.MapArray.from_arrays(offsets, names, values).take(texts.indices)


# What a table may hold, and the types each column may have (nullability aside; large_ types too).
TABLE_COLUMNS: dict[str, tuple[str, Callable[[pa.DataType], bool]]] = {
    "body": ("binary or string", lambda t: pa.types.is_binary(t) or pa.types.is_string(t)),
    "keys": ("a string or a list of strings", lambda t: pa.types.is_string(t) or _list_of_strings(t)),
    "tags": ("a string", pa.types.is_string),
    "properties": ("a map of strings", lambda t: pa.types.is_map(t) and _strings(t.key_type, t.item_type)),
    "message_id": ("a string", pa.types.is_string),
}
MAX_CALL_MESSAGES = 1024  # the broker's limit per call
MAX_CALL_BYTES = 4 * 1024 * 1024  # bodies per call (at least one message), far below gRPC's 64 MiB
# The last 4 hex digits of a call's fresh message ids: a fresh id's, replaced by the row's number.
_SUFFIXES = _string_array([f"{i:04x}" for i in range(MAX_CALL_MESSAGES)])
_EMPTY, _NO_KEYS, _OPEN, _CLOSE = (_text(value) for value in ("", "[]", '["', '"]'))
_FALSE = pa.Array.from_buffers(pa.bool_(), 1, [None, pa.py_buffer(b"\0")])[0]
_ONE_KEY = r"^[ !#-\[\]-~]+$"  # a key whose JSON is '["' + key + '"]' (RE2 compiles counted repeats slowly)
_NONE_OR_ONE_KEY = r'^\[("[ !#-\[\]-~]+")?\]$'  # '[]', or one such key's JSON


def check_table(table: pa.Table | pa.RecordBatch) -> None:
    """Raise ValueError naming a column the broker's messages do not have, or of the wrong type."""
    fields = {f.name: _narrow(f.type) for f in table.schema}
    if "body" not in fields:
        raise ValueError(f"a table of messages needs a 'body' column (binary or string); it has {sorted(fields)}")
    for name, kind in fields.items():
        if name not in TABLE_COLUMNS:
            raise ValueError(f"a table of messages has no column {name!r}; it may have {sorted(TABLE_COLUMNS)}")
        what, fits = TABLE_COLUMNS[name]
        if not fits(kind):
            raise ValueError(f"column {name!r} must be {what}, not {kind}")


def _narrow(kind: pa.DataType) -> pa.DataType:
    """``kind`` with 32-bit offsets where it has 64-bit ones (large_string, large_binary, large_list)."""
    if pa.types.is_large_string(kind):
        return pa.string()
    if pa.types.is_large_binary(kind):
        return pa.binary()
    if pa.types.is_large_list(kind):
        return pa.list_(_narrow(kind.value_type))
    return kind


def _strings(*kinds: pa.DataType) -> bool:
    return all(pa.types.is_string(_narrow(kind)) for kind in kinds)


def _list_of_strings(kind: pa.DataType) -> bool:
    return pa.types.is_list(kind) and _strings(kind.value_type)


ColumnsRequest = TypeVar("ColumnsRequest", pb.SendColumnsRequest, pb.PrepareColumnsRequest)


def table_calls(
    table: pa.Table | pa.RecordBatch, request: Callable[[], ColumnsRequest]
) -> Iterator[tuple[ColumnsRequest, pa.Array]]:
    """The rows of ``table`` (see ``check_table``) as calls within the broker's limits: each a
    fresh ``request()`` with the call's columns written into its ``messages`` (in place: a
    message passed to a constructor or ``CopyFrom`` is copied whole, a megabyte of bodies a
    call), and the call's message ids (a fresh one for a row without)."""
    check_table(table)
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    table = table.cast(pa.schema([(f.name, _narrow(f.type)) for f in table.schema]))
    column = table["body"]
    bodies = (column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()).cast(pa.binary())
    if bodies.null_count:
        bodies = pc.fill_null(bodies, _EMPTY.cast(pa.binary()))
    # The bytes of the bodies before each row: a call ends before the first row that would take it
    # past MAX_CALL_BYTES, found by bisection, not by a step per row.
    before = list(accumulate(pc.binary_length(bodies).to_pylist(), initial=0))
    start, rows = 0, len(table)
    while start < rows:
        end = max(start + 1, min(start + MAX_CALL_MESSAGES, bisect_right(before, before[start] + MAX_CALL_BYTES) - 1))
        call = request()
        ids = _fill(call.messages, table.slice(start, end - start), bodies.slice(start, end - start))
        yield call, ids
        start = end


def _fill(columns: pb.MessageColumns, rows: pa.Table, bodies: pa.Array) -> pa.Array:
    """Write ``rows`` into ``columns``; their message ids."""
    count = len(rows)
    names = set(rows.column_names)
    ids = pc.binary_join_element_wise(_text(new_message_id()[:-4]), _SUFFIXES.slice(0, count), _EMPTY)
    if "message_id" in names:
        ids = pc.coalesce(rows["message_id"].combine_chunks(), ids)
    columns.count = count
    _pack(columns.message_ids, ids)
    _pack(columns.bodies, bodies)
    if "tags" in names:
        _pack(columns.tags, pc.fill_null(rows["tags"].combine_chunks(), _EMPTY))
    if "keys" in names:
        _pack(columns.keys, _keys_json(rows["keys"].combine_chunks()))
    if "properties" in names:
        texts = [json.dumps(dict(p), sort_keys=True) if p else "{}" for p in rows["properties"].to_pylist()]
        _pack(columns.properties, _string_array(texts))
    columns.born_timestamps = _native(array("q", repeat(int(time.time() * 1000), count)).tobytes(), "q")
    return ids


def _keys_json(keys: pa.Array) -> pa.Array:
    """Each row's keys as the JSON array the broker stores: a key of printable ASCII is wrapped
    as a column, anything else is written one row at a time."""
    if pa.types.is_string(keys.type):
        simple = pc.fill_null(pc.match_substring_regex(keys, _ONE_KEY), _FALSE)
        if pc.all(pc.or_(simple, pc.is_null(keys))).as_py():
            return pc.if_else(pc.is_null(keys), _NO_KEYS, pc.binary_join_element_wise(_OPEN, keys, _CLOSE, _EMPTY))
        return _string_array([json.dumps([k]) if k is not None else "[]" for k in keys.to_pylist()])
    return _string_array([json.dumps(k) if k else "[]" for k in keys.to_pylist()])


def _pack(column: pb.PackedColumn, values: pa.Array) -> None:
    """Write a string or binary array into ``column``, its offsets from 0."""
    values = values.cast(pa.binary())
    _, offsets, data = values.buffers()
    positions = pa.Array.from_buffers(pa.int32(), len(values) + 1, [None, offsets], offset=values.offset)
    first, last = positions[0].as_py(), positions[-1].as_py()
    if first:
        positions = pc.subtract(positions, _int32s([first])[0])
    column.data = data.slice(first, last - first).to_pybytes() if data is not None else b""
    column.offsets = _native(positions.buffers()[1].slice(positions.offset * 4, 4 * len(positions)).to_pybytes(), "i")


def receipts(ids: pa.Array, reply: pb.SendColumnsResponse) -> pa.Table:
    """A call's receipts: message_id, queue_id and queue_offset per row (null for a refused one)."""
    count = len(ids)
    queue_ids = pa.Array.from_buffers(pa.int32(), count, [None, pa.py_buffer(_native(reply.queue_ids, "i"))])
    refused = pc.equal(queue_ids, _int32s([-1])[0])
    return pa.table({
        "message_id": ids,
        "queue_id": pc.if_else(refused, pa.nulls(count, pa.int32()), queue_ids),
        "queue_offset": pc.if_else(refused, pa.nulls(count, pa.int64()), _int64s(reply.queue_offsets, count)),
    })  # fmt: skip


# Enough for the broker to commit a group of calls while it reads the next ones: from one client,
# 1 KB messages, 8 send 89,000 a second where 4 send 82,000 (16: 92,000).
CALLS_IN_FLIGHT = 8


async def send_table(client: BrokerClient, topic: str, table: pa.Table | pa.RecordBatch) -> pa.Table:
    """``Producer.send_table`` on ``client``'s loop."""
    calls: list[tuple[asyncio.Future[Any], pa.Array]] = []
    try:
        for request, ids in table_calls(table, partial(pb.SendColumnsRequest, topic=topic)):
            while sum(not call.done() for call, _ in calls) >= CALLS_IN_FLIGHT:
                await asyncio.wait([call for call, _ in calls if not call.done()], return_when=FIRST_COMPLETED)
            calls.append((asyncio.ensure_future(client.call("SendColumns", request)), ids))
        replies = await asyncio.gather(*(call for call, _ in calls))
    finally:
        for call, _ in calls:
            call.cancel()
    if not calls:
        return receipts(_NO_STRINGS, pb.SendColumnsResponse())
    result = pa.concat_tables([receipts(ids, reply) for (_, ids), reply in zip(calls, replies, strict=True)])
    refused = [(first + r.index, r.error) for first, reply in zip(_starts(calls), replies, strict=False)
               for r in reply.refused]  # fmt: skip
    if refused:
        row, item = refused[0]
        error = from_item_error(item)
        raised = type(error)(f"row {row}: {error} ({len(refused)} of {len(result)} rows refused, the others stored)",
                             status=error.status)  # fmt: skip
        raised.receipts = result
        raise raised
    return result


def _starts(calls: list[tuple[asyncio.Future[Any], pa.Array]]) -> Iterator[int]:
    """Where each call's rows start in the table."""
    return accumulate((len(ids) for _, ids in calls), initial=0)
