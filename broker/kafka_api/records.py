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
import json
import re
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka.errors import CorruptRecordException, UnsupportedCodecError
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from aiokafka.record.util import calc_crc32c

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
_BATCH_HEADER = 61  # bytes of a record batch v2 before its records
_MAGIC_AT = 16
_COUNT = struct.Struct(">i")  # a record batch v2's record count, its header's last field
_ATTRIBUTES_AT, _CRC_AT = 21, 17
_CONTROL = 0x20  # a record batch's control attribute bit

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
    batches, position = [], 0
    try:
        while position < len(data):
            if len(data) - position < _BATCH_HEADER:
                raise BadRecords("the records end inside a record batch")
            _, length = _LOG_OVERHEAD.unpack_from(data, position)
            end = position + _LOG_OVERHEAD.size + length
            if length < _BATCH_HEADER - _LOG_OVERHEAD.size or end > len(data):
                raise BadRecords("the records end inside a record batch")
            if data[position + _MAGIC_AT] != 2:
                raise BadRecords("only record batches of magic 2 are accepted")
            batch = DefaultRecordBatch(bytes(data[position:end]))
            if not batch.validate_crc():
                raise BadRecords("a record batch's CRC does not match its contents")
            batches.append(
                Batch(batch.producer_id, batch.producer_epoch, batch.base_sequence, bool(batch.is_transactional),
                      list(batch))
            )  # fmt: skip
            position = end
    except (CorruptRecordException, UnsupportedCodecError, struct.error, ValueError, IndexError) as exc:
        raise BadRecords(f"corrupt record batch: {exc}") from None
    return batches


def record_count(data: bytes) -> int | None:
    """How many records a produce's record batches say they hold, read from their headers alone;
    None if the batches do not add up (``read_batches`` says why)."""
    count, position = 0, 0
    while position < len(data):
        if len(data) - position < _BATCH_HEADER:
            return None
        _, length = _LOG_OVERHEAD.unpack_from(data, position)
        if length < _BATCH_HEADER - _LOG_OVERHEAD.size:
            return None
        count += _COUNT.unpack_from(data, position + _BATCH_HEADER - _COUNT.size)[0]
        position += _LOG_OVERHEAD.size + length
    return count if position == len(data) else None


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


def to_batch(columns: QueueColumns, count: int) -> bytes:
    """One record batch holding the first ``count`` messages of ``columns`` (consecutive offsets
    of one queue, gaps allowed). A message with no tag or properties and no key or one key
    stored as it is (no character JSON escapes), the common cases, is written without parsing
    its JSON; any other is mapped by ``_record``'s rules."""
    base = columns.queue_offsets[0]
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=0, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=2**31 - 1,
    )  # fmt: skip
    for i in range(count):
        keys, tags, properties = columns.keys[i], columns.tags[i], columns.properties[i]
        key: bytes | None
        value: bytes | None
        headers: list[Header]
        if not tags and properties == b"{}" and (keys == b"[]" or _ONE_KEY(keys)):
            key, value, headers = keys[2:-2] or None, columns.bodies[i], []  # "[]": no key
        else:
            key, value, headers = _record(json.loads(keys), tags.decode(), json.loads(properties), columns.bodies[i])
        timestamp = columns.born_timestamps[i] or columns.store_timestamps[i]
        builder.append(columns.queue_offsets[i] - base, timestamp=timestamp, key=key, value=value, headers=headers)
    batch = builder.build()
    struct.pack_into(">q", batch, 0, base)  # the base offset is outside the CRC, as a broker sets it
    return bytes(batch)


def gap_marker(start: int, end: int) -> bytes:
    """A control batch (one abort marker, at ``end - 1``) over offsets ``start`` to ``end`` that
    hold no message (an aborted transaction's), so a consumer's position moves past them, as
    it moves past Kafka's own transaction markers."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=1, producer_id=0, producer_epoch=0,
        base_sequence=-1, batch_size=2**31 - 1,
    )  # fmt: skip
    builder.append(end - 1 - start, timestamp=0, key=struct.pack(">hh", 0, 0), value=b"\0\0\0\0\0\0", headers=[])
    batch = builder.build()
    struct.pack_into(">h", batch, _ATTRIBUTES_AT, struct.unpack_from(">h", batch, _ATTRIBUTES_AT)[0] | _CONTROL)
    struct.pack_into(">I", batch, _CRC_AT, calc_crc32c(bytes(batch[_ATTRIBUTES_AT:])))
    struct.pack_into(">q", batch, 0, start)
    return bytes(batch)
