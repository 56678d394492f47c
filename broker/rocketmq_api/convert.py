"""Translation between the core's values and ``apache.rocketmq.v2`` messages."""

from __future__ import annotations

import hashlib
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from broker import errors
from broker.model import MESSAGE_GROUP, StoredMessage
from broker.rocketmq_api.protocol import load

definition, _, _ = load()


def group_of(topic: str) -> str:
    """The producer group of RocketMQ 5 transactional producers of ``topic``."""
    return f"RMQ5%{topic}"


def timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def to_rocketmq(message: StoredMessage, message_type: int | None = None, **system: Any) -> Any:
    """A stored message as the RocketMQ 5 clients expect it: a FIFO message's group in its system
    properties, an MD5 body digest (the official clients write a CRC32 each their own way, the
    Python client in hex and the Node.js one in decimal, and drop a message whose digest they
    read as wrong; they agree on MD5)."""
    properties = dict(message.properties)
    message_group = properties.pop(MESSAGE_GROUP, None)
    if message_type is None and message_group is not None:
        message_type = definition.FIFO
    elif message_type is None:
        message_type = definition.TRANSACTION if message.transaction_id else definition.NORMAL
    return definition.Message(
        topic=definition.Resource(name=message.topic),
        user_properties=properties,
        system_properties=definition.SystemProperties(
            message_group=message_group,
            tag=message.tags or None,
            keys=list(message.keys),
            message_id=message.message_id,
            body_digest=definition.Digest(type=definition.MD5, checksum=hashlib.md5(message.body).hexdigest().upper()),
            body_encoding=definition.IDENTITY,
            message_type=message_type,
            born_timestamp=timestamp(message.born_timestamp),
            store_timestamp=timestamp(message.store_timestamp),
            queue_id=message.queue_id,
            queue_offset=message.queue_offset,
            **system,
        ),
        body=message.body,
    )


def tag_filter(expression: Any) -> frozenset[str] | None:
    """The tags a TAG filter expression (``a||b``) admits; None for ``*`` or no filter."""
    if expression.type == definition.SQL:
        raise errors.InvalidArgument("SQL filters are not supported; use TAG expressions")
    text = expression.expression.strip()
    if not text or text == "*":
        return None
    return frozenset(tag.strip() for tag in text.split("||"))
