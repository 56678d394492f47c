"""Messages as RocketMQ's remoting clients send and read them (``MessageDecoder``).

Properties travel as one string, ``name\\x01value\\x02`` per property; keys, tags and the
client's message id (``UNIQ_KEY``) are properties there, as are the system settings of a send
(``TRAN_MSG``, ``PGROUP``, ``WAIT``, ``DELAY`` ...). A read message is in the store's encoding
(``MessageDecoder.encode``, magic code v1), and its "offset message id" names the broker's
address and the message's place: the store host (4 bytes of IPv4 and 4 of port) and an 8-byte
offset, in hex.
"""

from __future__ import annotations

import ipaddress
import struct
import uuid
import zlib
from collections.abc import Iterator, Mapping

from broker.model import Message, StoredMessage
from broker.retry import DELIVERY_ATTEMPTS, ORIGIN_MESSAGE_ID, ORIGIN_TOPIC, RETRY_PREFIX
from broker.rocketmq.delays import due_at, is_timer

NAME_VALUE = "\x01"
SEPARATOR = "\x02"
KEY_SEPARATOR = " "
KEYS = "KEYS"
TAGS = "TAGS"
UNIQ_KEY = "UNIQ_KEY"
TRANSACTION_PREPARED = "TRAN_MSG"
PRODUCER_GROUP = "PGROUP"
# MessageConst's names that the broker or client sets, never a user's (STRING_HASH_SET, less
# KEYS, TAGS and UNIQ_KEY, which halfmq keeps in the message's own fields).
SYSTEM = frozenset(
    {
        "TRACE_ON", "MSG_REGION", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", TRANSACTION_PREPARED,
        PRODUCER_GROUP, "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
        "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME",
        "TRAN_PREPARED_QUEUE_OFFSET", "TRANSACTION_CHECK_TIMES", "CHECK_IMMUNITY_TIME_IN_SECONDS", "INSTANCE_ID",
        "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE",
        "INNER_MULTI_QUEUE_OFFSET", "INNER_MULTI_DISPATCH", "INNER_NUM", "__BORNHOST", "TIMER_DELIVER_MS",
        "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES", "TIMER_DEL_UNIQKEY", "__STARTDELIVERTIME",
    }
)  # fmt: skip
MAGIC_V1 = -626843481  # MessageDecoder.MESSAGE_MAGIC_CODE
_HEAD = struct.Struct(">iiiiiqqiq")  # size, magic, body CRC, queue, flag, queue offset, physical offset, sysFlag, born
_BATCH_HEAD = struct.Struct(">iiiii")  # size, magic, body CRC, flag, body length
# sysFlag bits (MessageSysFlag)
COMPRESSED = 0x1
PREPARED = 0x4  # TRANSACTION_PREPARED_TYPE
COMPRESSION_TYPE = 0x700
ZLIB = 0x300


def parse_properties(text: str) -> dict[str, str]:
    """The properties string as a mapping (pairs without a separator are skipped, as Java does)."""
    found = {}
    for pair in text.split(SEPARATOR):
        name, sep, value = pair.partition(NAME_VALUE)
        if sep and name:
            found[name] = value
    return found


def format_properties(properties: Mapping[str, str]) -> str:
    return "".join(f"{name}{NAME_VALUE}{value}{SEPARATOR}" for name, value in properties.items())


def to_core(
    topic: str, body: bytes, properties: Mapping[str, str], *, born_timestamp: int, queue_id: int, now_ms: int,
    reconsume_times: int = 0,
) -> Message:  # fmt: skip
    """A sent message in the core's terms: its keys, tags, message id and due time apart, system
    settings dropped. A consumer's own send to its group's retry topic (when the broker would not
    take it back) is a copy as the broker makes one: a new message naming where it came from and
    its ``reconsume_times``. Raises ValueError for a delay that is not a number."""
    # RocketMQ's broker makes an id for a message sent without one (the Go client's batches)
    message_id = properties.get(UNIQ_KEY) or uuid.uuid4().hex.upper()
    kept = {k: v for k, v in properties.items() if k not in SYSTEM and k not in (KEYS, TAGS, UNIQ_KEY)}
    if topic.startswith(RETRY_PREFIX):
        kept[ORIGIN_TOPIC] = properties.get(ORIGIN_TOPIC, "")
        kept[ORIGIN_MESSAGE_ID] = properties.get(ORIGIN_MESSAGE_ID) or message_id
        kept[DELIVERY_ATTEMPTS] = str(reconsume_times)
        message_id = uuid.uuid4().hex.upper()
    return Message(
        topic=topic,
        body=body,
        message_id=message_id,
        keys=tuple(k for k in properties.get(KEYS, "").split(KEY_SEPARATOR) if k),
        tags=properties.get(TAGS, ""),
        properties=kept,
        born_timestamp=born_timestamp,
        deliver_at=due_at(properties, now_ms),
        queue_id=queue_id,
        timer=is_timer(properties),
    )


def uncompressed(body: bytes, sys_flag: int) -> bytes:
    """A sent body as its producer wrote it: the clients compress large bodies (zlib, by default
    over 4 KiB) and say so in the send's sysFlag. Raises ValueError for another compression or a
    body that does not inflate."""
    if not sys_flag & COMPRESSED:
        return body
    kind = sys_flag & COMPRESSION_TYPE
    if kind not in (0, ZLIB):
        raise ValueError(f"halfmq inflates zlib bodies only, not compression type {kind >> 8}")
    try:
        return zlib.decompress(body)
    except zlib.error as exc:
        raise ValueError(f"a compressed body that does not inflate: {exc}") from None


def system_properties(message: StoredMessage) -> dict[str, str]:
    """A message's id, keys and tags as the properties a client reads them from."""
    found = {UNIQ_KEY: message.message_id}
    if message.keys:
        found[KEYS] = KEY_SEPARATOR.join(message.keys)
    if message.tags:
        found[TAGS] = message.tags
    return found


def decode_batch(body: bytes) -> Iterator[tuple[bytes, dict[str, str]]]:
    """The (body, properties) of each message of a SEND_BATCH_MESSAGE body
    (``MessageDecoder.encodeMessages``). Raises ValueError for a body that is not one."""
    at = 0
    while at < len(body):
        try:
            size, _, _, _, length = _BATCH_HEAD.unpack_from(body, at)
            start = at + _BATCH_HEAD.size
            content = body[start : start + length]
            (props_length,) = struct.unpack_from(">h", body, start + length)
            props = body[start + length + 2 : start + length + 2 + props_length]
        except struct.error as exc:
            raise ValueError(f"a batch that ends inside a message: {exc}") from None
        if size <= 0 or len(content) != length or len(props) != props_length:
            raise ValueError("a batch message whose lengths disagree")
        yield content, parse_properties(props.decode())
        at += size


def address_bytes(address: tuple[str, int]) -> bytes:
    """An IPv4 address and port as RocketMQ encodes a host (8 bytes); a name or IPv6 as 0.0.0.0."""
    try:
        ip = ipaddress.ip_address(address[0])
        packed = ip.packed if ip.version == 4 else bytes(4)
    except ValueError:
        packed = bytes(4)
    return packed + struct.pack(">i", address[1])


def message_id(store_host: tuple[str, int], offset: int) -> str:
    """An offset message id (``MessageDecoder.createMessageId``)."""
    return (address_bytes(store_host) + struct.pack(">q", offset)).hex().upper()


_PLACE_BITS = 48
_RETRY_BIT = 1 << 62


def position(topic: str, queue_id: int, queue_offset: int) -> int:
    """The offset a message's ids name: its queue (bits 48 to 61) and its place there, and whether
    it is in a group's retry topic (bit 62). RocketMQ names a place in its commit log; halfmq's
    queues are apart, so it names the queue, and a consumer that sends a retried message back
    names its first topic, so the bit tells the two places apart."""
    return (_RETRY_BIT if topic.startswith(RETRY_PREFIX) else 0) | queue_id << _PLACE_BITS | queue_offset


def place(position: int) -> tuple[bool, int, int]:
    """Whether a ``position`` is in a retry topic, and the queue and queue offset it names."""
    return bool(position & _RETRY_BIT), (position & ~_RETRY_BIT) >> _PLACE_BITS, position & ((1 << _PLACE_BITS) - 1)


def encode(
    message: StoredMessage,
    *,
    store_host: tuple[str, int],
    properties: Mapping[str, str],
    sys_flag: int = 0,
    reconsume_times: int = 0,
) -> bytes:
    """A stored message in RocketMQ's encoding, with ``properties`` as its whole properties
    string. halfmq keeps no producer's address: the born host is the store host."""
    topic = message.topic.encode()
    props = format_properties(properties).encode()
    host = address_bytes(store_host)
    rest = (
        host  # born host
        + struct.pack(">q", message.store_timestamp)
        + host
        + struct.pack(">iqi", reconsume_times, 0, len(message.body))
        + message.body
        + struct.pack(">B", len(topic))
        + topic
        + struct.pack(">h", len(props))
        + props
    )
    head = _HEAD.pack(
        _HEAD.size + len(rest),
        MAGIC_V1,
        zlib.crc32(message.body) & 0x7FFFFFFF,
        message.queue_id,
        0,
        message.queue_offset,
        position(message.topic, message.queue_id, message.queue_offset),
        sys_flag,
        message.born_timestamp,
    )
    return head + rest
