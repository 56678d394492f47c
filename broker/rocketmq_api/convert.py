"""Translation between the core's values and ``apache.rocketmq.v2`` messages."""

from __future__ import annotations

import hashlib
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from broker.model import DELIVER_AT, MESSAGE_GROUP, StoredMessage
from broker.retry import DELIVERY_ATTEMPTS, ORIGIN_MESSAGE_ID, ORIGIN_TOPIC
from broker.rocketmq.filters import SQL92, TAG, Filter, compile_filter
from broker.rocketmq.properties import added_by_broker
from broker.rocketmq_api.protocol import load

definition, _, _ = load()
# Properties RocketMQ's proxy keeps from clients (its system keys), and halfmq's count of a dead
# letter's deliveries, which RocketMQ shows as the dead letter's delivery attempt instead.
HIDDEN = (ORIGIN_TOPIC, ORIGIN_MESSAGE_ID, DELIVERY_ATTEMPTS)


def group_of(topic: str) -> str:
    """The producer group of RocketMQ 5 transactional producers of ``topic``."""
    return f"RMQ5%{topic}"


def timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def to_rocketmq(message: StoredMessage, message_type: int | None = None, **system: Any) -> Any:
    """A stored message as RocketMQ 5's proxy hands it out: a FIFO message's group and a delayed
    one's delivery timestamp in its system properties, a dead letter without its origin, a committed
    transactional message's id among its properties, an MD5 body digest (the official clients
    write a CRC32 each their own way, the Python client in hex and the Node.js one in decimal,
    and drop a message whose digest they read as wrong; they agree on MD5)."""
    properties = dict(message.properties)
    for hidden in HIDDEN:
        properties.pop(hidden, None)
    message_group = properties.pop(MESSAGE_GROUP, None)
    deliver_at = properties.pop(DELIVER_AT, None)
    properties.update(added_by_broker(message))
    attempts = message.properties.get(DELIVERY_ATTEMPTS)
    if attempts is not None and "delivery_attempt" in system:
        # RocketMQ carries a message's reconsume count into its dead letter: the attempts made,
        # and one more for the receive that found them spent.
        system["delivery_attempt"] += int(attempts) + 1
    if message_type is None:
        message_type = _type_of(message, message_group, deliver_at is not None or attempts is not None)
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
            delivery_timestamp=None if deliver_at is None else timestamp(int(deliver_at)),
            queue_id=message.queue_id,
            queue_offset=message.queue_offset,
            **system,
        ),
        body=message.body,
    )


def _type_of(message: StoredMessage, message_group: str | None, timed: bool) -> int:
    """FIFO with a message group; DELAY when it was delayed, or for a dead letter (RocketMQ's
    keeps its retries' delay level); TRANSACTION when committed from one; else NORMAL."""
    if message_group is not None:
        return int(definition.FIFO)
    if timed:
        return int(definition.DELAY)
    return int(definition.TRANSACTION if message.transaction_id else definition.NORMAL)


def filter_of(expression: Any) -> Filter:
    """A FilterExpression compiled: TAG (``a||b``, ``*``; also when unset) or SQL92."""
    return compile_filter(SQL92 if expression.type == definition.SQL else TAG, expression.expression)
