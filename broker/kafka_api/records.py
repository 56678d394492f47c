"""Kafka records to halfmq messages and back, exactly: key, value, headers and timestamp.

A record's value is the message's body; its timestamp the message's born timestamp. Its key is
the message's one key when it is UTF-8 text a RocketMQ key can hold (1-1024 characters), else it
rides in the property ``__KAFKA_KEY`` (base64); a null value is marked by ``__KAFKA_NULL_VALUE``.
Headers with distinct names, in name order and with UTF-8 values, are the message's properties;
any other list of headers rides whole in ``__KAFKA_HEADERS`` (JSON), so order, repeats and
binary or null values come back as sent. Read the other way, a message's keys (joined by spaces)
are the record's key and its tag is a header ``TAGS``, as RocketMQ names the property.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import crc32c
from aiokafka.errors import CorruptRecordException, UnsupportedCodecError
from aiokafka.record.default_records import DefaultRecordBatch

from broker.columns import ONE_KEY, MessageColumns
from broker.errors import InvalidArgument
from broker.model import MESSAGE_GROUP, RESERVED_PROPERTIES, Message, QueueColumns, new_transaction_id

KEY = "__KAFKA_KEY"
NULL_VALUE = "__KAFKA_NULL_VALUE"
HEADERS = "__KAFKA_HEADERS"
TAGS = "TAGS"
HIDDEN = frozenset((*RESERVED_PROPERTIES, MESSAGE_GROUP, KEY, NULL_VALUE, HEADERS))
MAX_KEY_CHARS = 1024
_LOG_OVERHEAD = struct.Struct(">qi")  # a batch's base offset and its length (the bytes after these)
# A record batch v2's header: base offset, length, partition leader epoch, magic, CRC, attributes,
# last offset delta, first and max timestamps, producer id and epoch, base sequence, record count.
_HEADER = struct.Struct(">qiibIhiqqqhii")
_BATCH_HEADER = _HEADER.size  # bytes of a record batch v2 before its records
_MAGIC_AT = 16
_COUNT = struct.Struct(">i")  # a record batch v2's record count, its header's last field
_ATTRIBUTES_AT, _CRC_AT = 21, 17
_TRANSACTIONAL, _CONTROL = 0x10, 0x20  # a record batch's attribute bits
_NULL = b"\1"  # a record's length -1 (zigzag-encoded): no key, no value
_NO_HEADER = bytes(_HEADER.size)  # a batch's header's room, filled once its records are joined

Header = tuple[str, bytes | None]
_ONE_KEY = re.compile(ONE_KEY.encode()).fullmatch  # stored keys that are one key, as they are


class BadRecords(InvalidArgument):
    """A produce's records cannot be read: a corrupt batch, its CRC wrong, or an old format."""


@dataclass(frozen=True)
class Batch:
    """A record batch as produced: its producer's state and its records, decoded."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool
    records: list[Any]  # aiokafka's records: offset, timestamp, key, value, headers


def read_batches(data: bytes) -> list[Batch]:
    """The record batches of a produce, each checked against its CRC and decoded (decompressed).
    Raises BadRecords."""
    batches = []
    try:
        for position, end in _spans(data):
            if data[position + _MAGIC_AT] != 2:
                raise BadRecords("only record batches of magic 2 are accepted")
            chunk = bytes(data[position:end])
            if crc32c.crc32c(memoryview(chunk)[_ATTRIBUTES_AT:]) != struct.unpack_from(">I", chunk, _CRC_AT)[0]:
                raise BadRecords("a record batch's CRC does not match its contents")
            batch = DefaultRecordBatch(chunk)
            batches.append(
                Batch(batch.producer_id, batch.producer_epoch, batch.base_sequence, bool(batch.is_transactional),
                      list(batch))
            )  # fmt: skip
    except (CorruptRecordException, UnsupportedCodecError, struct.error, ValueError, IndexError) as exc:
        raise BadRecords(f"corrupt record batch: {exc}") from None
    return batches


def record_count(data: bytes) -> int | None:
    """How many records a produce's record batches say they hold, read from their headers alone;
    None if the batches do not add up (``read_batches`` says why)."""
    try:
        count: int = sum(_COUNT.unpack_from(data, start + _BATCH_HEADER - _COUNT.size)[0] for start, _ in _spans(data))
    except BadRecords:
        return None
    return count


def _spans(data: bytes) -> Iterator[tuple[int, int]]:
    """Where each record batch of a produce's records starts and ends, from their lengths.
    Raises BadRecords where they do not add up."""
    position = 0
    while position < len(data):
        if len(data) - position < _BATCH_HEADER:
            raise BadRecords("the records end inside a record batch")
        _, length = _LOG_OVERHEAD.unpack_from(data, position)
        end = position + _LOG_OVERHEAD.size + length
        if length < _BATCH_HEADER - _LOG_OVERHEAD.size or end > len(data):
            raise BadRecords("the records end inside a record batch")
        yield position, end
        position = end


def to_messages(topic: str, batches: Sequence[Batch], partition: int) -> list[Message]:
    """The messages of a produce's batches, one object each: for a transaction's send, and for a
    produce of a few records, which costs less checked a message at a time than as columns."""
    return [
        Message(topic=topic, body=body, message_id=message_id, keys=keys, properties=properties, born_timestamp=born)
        for batch in batches
        for message_id, keys, properties, body, born in _fields(batch, partition)
    ]


def to_columns(topic: str, batches: Sequence[Batch], partition: int) -> MessageColumns:
    """The messages of a produce's batches as the columns a table of messages is sent in."""
    import pyarrow as pa  # where used, as broker/columns.py says

    ids, keys, properties, bodies, born = [], [], [], [], []
    for batch in batches:
        for message_id, message_keys, message_properties, body, timestamp in _fields(batch, partition):
            ids.append(message_id)
            keys.append(json.dumps(message_keys) if message_keys else "[]")
            properties.append(json.dumps(message_properties) if message_properties else "{}")
            bodies.append(body)
            born.append(timestamp)
    return MessageColumns(
        topic=topic,
        message_ids=pa.array(ids, pa.string()).cast(pa.binary()),
        keys=pa.array(keys, pa.string()).cast(pa.binary()),
        tags=None,
        properties=pa.array(properties, pa.string()).cast(pa.binary()),
        bodies=pa.array(bodies, pa.binary()),
        born_timestamps=pa.array(born, pa.int64()),
    )


def _fields(batch: Batch, partition: int) -> Iterator[tuple[str, tuple[str, ...], dict[str, str], bytes, int]]:
    """Each record's message id, keys, properties, body and born timestamp. An idempotent
    producer's record gets the message id its producer id, epoch, partition and sequence make,
    so a resent batch is stored once."""
    idempotent = batch.producer_id >= 0 and batch.base_sequence >= 0
    for index, record in enumerate(batch.records):
        if idempotent:
            message_id = f"kafka.{batch.producer_id}.{batch.producer_epoch}.{partition}.{batch.base_sequence + index}"
        else:
            message_id = f"kafka.{new_transaction_id()}"
        keys, properties = _key_of(record.key)
        if record.headers:
            properties.update(_headers_of(list(record.headers)))
        if record.value is None:
            properties[NULL_VALUE] = "1"
        yield message_id, keys, properties, bytes(record.value or b""), record.timestamp


def _key_of(key: bytes | None) -> tuple[tuple[str, ...], dict[str, str]]:
    if key is None:
        return (), {}
    try:
        text = bytes(key).decode()
    except UnicodeDecodeError:
        text = ""
    if 0 < len(text) <= MAX_KEY_CHARS:
        return (text,), {}
    return (), {KEY: base64.b64encode(key).decode()}


def _headers_of(headers: list[Header]) -> dict[str, str]:
    names = [name for name, _ in headers]
    plain = all(value is not None for _, value in headers) and not HIDDEN.intersection(names)
    if plain and all(names) and names == sorted(set(names)):
        try:
            return {name: bytes(value or b"").decode() for name, value in headers}
        except UnicodeDecodeError:
            pass
    listed = [[name, None if value is None else base64.b64encode(value).decode()] for name, value in headers]
    return {HEADERS: json.dumps(listed)}


def _record(
    keys: Sequence[str], tags: str, properties: Mapping[str, str], body: bytes
) -> tuple[bytes | None, bytes | None, list[Header]]:
    """A stored message's key, value and headers as a Kafka consumer reads them."""
    if KEY in properties:
        key: bytes | None = base64.b64decode(properties[KEY])
    else:
        key = " ".join(keys).encode() if keys else None
    value = None if NULL_VALUE in properties else body
    if HEADERS in properties:
        headers: list[Header] = [
            (name, None if value is None else base64.b64decode(value))
            for name, value in json.loads(properties[HEADERS])
        ]
    else:
        headers = [(name, text.encode()) for name, text in sorted(properties.items()) if name not in HIDDEN]
    if tags:
        headers.append((TAGS, tags.encode()))
    return key, value, headers


def to_batch(columns: QueueColumns, count: int) -> bytearray:
    """One record batch holding the first ``count`` messages of ``columns`` (consecutive offsets
    of one queue, gaps allowed). A message with no tag or properties and no key or one key
    stored as it is (no character JSON escapes), the common cases, is written without parsing
    its JSON; any other is mapped by ``_record``'s rules."""
    offsets, bodies = columns.queue_offsets, columns.bodies
    stamps = [
        born or stored
        for born, stored in zip(columns.born_timestamps[:count], columns.store_timestamps[:count], strict=True)
    ]
    base, first = offsets[0], stamps[0]
    parts = [_NO_HEADER]
    for i in range(count):
        keys, tags, properties = columns.keys[i], columns.tags[i], columns.properties[i]
        if not tags and properties == b"{}" and (keys == b"[]" or _ONE_KEY(keys)):
            # ``_append`` written out for this record (no headers, the key as stored): most are.
            key = _NULL if keys == b"[]" else _varint(len(keys) - 4) + keys[2:-2]
            value = bodies[i]
            head = b"\0" + _varint(stamps[i] - first) + _varint(offsets[i] - base) + key + _varint(len(value))
            parts += (_varint(len(head) + len(value) + 1), head, value, b"\0")  # no headers
        else:
            _append(
                parts,
                offsets[i] - base,
                stamps[i] - first,
                *_record(json.loads(keys), tags.decode(), json.loads(properties), bodies[i]),
            )
    return _batch(base, offsets[count - 1] - base, first, max(stamps), count, 0, -1, -1, parts)


def gap_marker(start: int, end: int) -> bytearray:
    """A control batch (one abort marker, at ``end - 1``) over offsets ``start`` to ``end`` that
    hold no message (an aborted transaction's), so a consumer's position moves past them, as
    it moves past Kafka's own transaction markers."""
    parts = [_NO_HEADER]
    _append(parts, end - 1 - start, 0, struct.pack(">hh", 0, 0), b"\0\0\0\0\0\0", [])
    return _batch(start, end - 1 - start, 0, 0, 1, _TRANSACTIONAL | _CONTROL, 0, 0, parts)


def _append(
    parts: list[bytes], offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
    headers: list[Header],
) -> None:  # fmt: skip
    """Add a record (v2: its length, then attributes, deltas, key, value and headers) to ``parts``."""
    body = value or b""
    head = (
        b"\0"
        + _varint(timestamp_delta)
        + _varint(offset_delta)
        + _nullable(key)
        + (_NULL if value is None else _varint(len(body)))
    )
    tail = b"".join([_varint(len(headers))] + [_nullable(name.encode()) + _nullable(data) for name, data in headers])
    parts += (_varint(len(head) + len(body) + len(tail)), head, body, tail)


def _batch(
    base: int, last_delta: int, first: int, latest: int, count: int, attributes: int, producer_id: int,
    producer_epoch: int, parts: list[bytes],
) -> bytearray:  # fmt: skip
    """A record batch of the records in ``parts`` after its first, the header's room: the header
    written there, CRC-32C included. Joined once, into a bytearray: each copy of a fetch's megabyte
    costs a third of a millisecond."""
    batch = bytearray().join(parts)
    _HEADER.pack_into(
        batch, 0, base, len(batch) - _LOG_OVERHEAD.size, -1, 2, 0, attributes, last_delta, first, latest, producer_id,
        producer_epoch, -1, count,
    )  # fmt: skip
    struct.pack_into(">I", batch, _CRC_AT, crc32c.crc32c(memoryview(batch)[_ATTRIBUTES_AT:]))
    return batch


def _nullable(data: bytes | None) -> bytes:
    """Bytes as a record writes a key, a value or a header's: their length, then them."""
    return _NULL if data is None else _varint(len(data)) + data


@functools.lru_cache(maxsize=1 << 16)
def _varint(value: int) -> bytes:
    """A signed number as a record's varint: zigzag-encoded, then 7 bits a byte, lowest first."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag > 0x7F:
        out.append(zigzag & 0x7F | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)
