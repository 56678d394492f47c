"""Rows of the halfmq source: the schema and the conversion of pulled messages to Arrow batches."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from halfmq_proto.v1 import halfmq_pb2 as pb

SCHEMA = (
    "topic string, queue_id int, queue_offset long, message_id string, transaction_id string,"
    " keys array<string>, tags string, properties map<string, string>, body binary,"
    " born_timestamp timestamp, store_timestamp timestamp"
)
_TIMESTAMP = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("queue_id", pa.int32()),
        ("queue_offset", pa.int64()),
        ("message_id", pa.string()),
        ("transaction_id", pa.string()),
        ("keys", pa.list_(pa.string())),
        ("tags", pa.string()),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("body", pa.binary()),
        ("born_timestamp", _TIMESTAMP),
        ("store_timestamp", _TIMESTAMP),
    ]
)


def to_record_batch(messages: Sequence[pb.StoredMessage]) -> pa.RecordBatch:
    """One Arrow record batch of the source's schema (timestamps: broker milliseconds → µs)."""
    return pa.RecordBatch.from_arrays(
        [
            pa.array([m.topic for m in messages], pa.string()),
            pa.array([m.queue_id for m in messages], pa.int32()),
            pa.array([m.queue_offset for m in messages], pa.int64()),
            pa.array([m.message_id for m in messages], pa.string()),
            pa.array([m.transaction_id for m in messages], pa.string()),
            pa.array([list(m.keys) for m in messages], pa.list_(pa.string())),
            pa.array([m.tags for m in messages], pa.string()),
            pa.array([list(m.properties.items()) for m in messages], pa.map_(pa.string(), pa.string())),
            pa.array([m.body for m in messages], pa.binary()),
            pa.array([m.born_timestamp * 1000 for m in messages], _TIMESTAMP),
            pa.array([m.store_timestamp * 1000 for m in messages], _TIMESTAMP),
        ],
        schema=ARROW_SCHEMA,
    )
