"""Errors raised by the producer SDK.

Every failure is a ``HalfmqError``; the broker's typed errors arrive as the matching subclass
(the broker sends a stable code in the ``halfmq-error`` trailing metadata).

    HalfmqError
    ├── BrokerUnavailable        the broker could not be reached within the timeout
    ├── Unauthenticated          the broker requires a token and none (or a wrong one) was given
    ├── InvalidArgument          the broker refused a malformed request
    │   ├── MessageTooLarge      the body exceeds the broker's limit
    │   └── InvalidDeliveryTime  a delayed message due beyond the broker's maximum delay
    ├── NotFound
    │   ├── TopicNotFound
    │   ├── DelayedMessageNotFound  a recall of no waiting delayed message
    │   ├── RocketMQTransactionNotFound
    │   ├── RangeNotOpen         a batch's range was rolled back (timed out) or never prepared
    │   └── KafkaTransactionalIdNotFound  no record of the transactional id
    ├── HiddenTopic              a system topic was named
    ├── TopicExists              the topic exists with another queue count or message type
    ├── MessageTypeMismatch      the topic accepts another message type (normal, delayed, ...)
    ├── ProducerGroupMismatch    the transaction belongs to another producer group
    ├── ResolutionConflict       the transaction was already resolved differently
    ├── MessageIdInUse           the message id is taken by another message or transaction
    ├── OffsetOutOfRange         a pull below the queue's low offset (retention deleted those messages)
    ├── ProducerFenced           a newer producer with the same transactional_id started
    ├── InvalidTxnState          a transactional producer's call in the wrong state
    ├── TransactionAborted       the broker aborted a transaction open past its timeout
    └── BrokerError              any other broker failure (status and message kept)
        └── StorageFull          the broker's disk is full: nothing of the request was stored
"""

from __future__ import annotations

from typing import Any

import grpc

ERROR_METADATA_KEY = "halfmq-error"


class HalfmqError(Exception):
    """Root of every SDK error. ``status`` is the gRPC status code name when one was received.
    ``receipts``: raised by ``Producer.send_table`` for a refused row, the table's receipts."""

    receipts: Any = None

    def __init__(self, message: str, *, status: str = "") -> None:
        super().__init__(message)
        self.status = status


class BrokerUnavailable(HalfmqError):
    """Raised when the broker cannot be reached (after retries) or the client is closed."""


# What a client that cannot reach the broker should check: a TLS broker closes a plaintext
# client's connection during the handshake, and gRPC then only says that time ran out.
UNREACHABLE_HINT = "is it running there, and is the client's TLS setting (tls_ca) the broker's?"


class Unauthenticated(HalfmqError):
    """Raised when the broker requires its auth token and the call did not carry it."""


class InvalidArgument(HalfmqError):
    """Raised when the broker refuses a malformed request."""


class MessageTooLarge(InvalidArgument):
    """Raised when a message body exceeds the broker's limit."""


class InvalidDeliveryTime(InvalidArgument):
    """Raised when a delayed message is due further ahead than the broker's maximum delay."""


class NotFound(HalfmqError):
    """Raised when a named resource does not exist."""


class TopicNotFound(NotFound):
    """Raised when the topic does not exist."""


class DelayedMessageNotFound(NotFound):
    """Raised when a recall names no delayed message still waiting (delivered, recalled, or never sent)."""


class RocketMQTransactionNotFound(NotFound):
    """Raised when the broker has no half message with the transaction id."""


class RangeNotOpen(NotFound):
    """Raised when a batch's commit names a range the broker no longer holds open: rolled back
    after the batch timeout or by a later end of the group, or never prepared in that batch."""


class KafkaTransactionalIdNotFound(NotFound):
    """Raised when the broker has no record of the transactional id (its store was replaced)."""


class HiddenTopic(HalfmqError):
    """Raised when a hidden system topic is named through a data API."""


class TopicExists(HalfmqError):
    """Raised when creating a topic that exists with another queue count or message type."""


class MessageTypeMismatch(HalfmqError):
    """Raised when the topic accepts one message type (normal, delayed, transactional) and the
    message is of another; nothing was stored."""


class ProducerGroupMismatch(HalfmqError):
    """Raised when ending a transaction that another producer group prepared."""


class ResolutionConflict(HalfmqError):
    """Raised when the transaction was already resolved differently (the first resolution wins)."""


class MessageIdInUse(HalfmqError):
    """Raised when the message id is already used in the topic by another message or transaction."""


class OffsetOutOfRange(HalfmqError):
    """Raised when a pull starts below the queue's low offset: retention deleted those messages
    (start again from the queue's ``min_offset``)."""


class ProducerFenced(HalfmqError):
    """Raised by every call of a transactional producer after another producer started with the
    same ``transactional_id``; the broker aborted this one's open transaction. Close it."""


class InvalidTxnState(HalfmqError):
    """Raised for a transactional producer's call made in the wrong state: a send, offsets,
    commit or abort with no transaction open (before ``begin_transaction``, or after its end),
    or a ``begin_transaction`` while one is open (Kafka's INVALID_TXN_STATE)."""


class TransactionAborted(HalfmqError):
    """Raised when the broker aborted the transaction because it stayed open longer than the
    producer's ``transaction_timeout``; nothing of it is visible. Begin a new one."""


class BrokerError(HalfmqError):
    """Raised for any other failure the broker reports."""


class StorageFull(BrokerError):
    """Raised when the broker's disk is full; nothing of the request was stored (retry later)."""


_BY_CODE: dict[str, type[HalfmqError]] = {
    "INVALID_ARGUMENT": InvalidArgument,
    "MESSAGE_TOO_LARGE": MessageTooLarge,
    "INVALID_DELIVERY_TIME": InvalidDeliveryTime,
    "DELAYED_MESSAGE_NOT_FOUND": DelayedMessageNotFound,
    "MESSAGE_TYPE_MISMATCH": MessageTypeMismatch,
    "NOT_FOUND": NotFound,
    "TOPIC_NOT_FOUND": TopicNotFound,
    "TRANSACTION_NOT_FOUND": RocketMQTransactionNotFound,
    "RANGE_NOT_OPEN": RangeNotOpen,
    "HIDDEN_TOPIC": HiddenTopic,
    "TOPIC_EXISTS": TopicExists,
    "PRODUCER_GROUP_MISMATCH": ProducerGroupMismatch,
    "RESOLUTION_CONFLICT": ResolutionConflict,
    "BROKER_CLOSED": BrokerUnavailable,
    "MESSAGE_ID_IN_USE": MessageIdInUse,
    "STORAGE_FULL": StorageFull,
    "OFFSET_OUT_OF_RANGE": OffsetOutOfRange,
    "TRANSACTIONAL_ID_NOT_FOUND": KafkaTransactionalIdNotFound,
    "PRODUCER_FENCED": ProducerFenced,
    "INVALID_TXN_STATE": InvalidTxnState,
    "TRANSACTION_ABORTED": TransactionAborted,
}


def from_item_error(error: Any) -> HalfmqError:
    """The typed SDK error for one refused item of a batch (an ``ItemError``)."""
    return _BY_CODE.get(error.code, BrokerError)(error.message or error.code, status=error.code)


def from_rpc_error(error: grpc.aio.AioRpcError) -> HalfmqError:
    """The typed SDK error for a failed call."""
    code = dict(error.trailing_metadata() or ()).get(ERROR_METADATA_KEY, "")
    status = error.code()
    if code in _BY_CODE:
        kind = _BY_CODE[str(code)]
    elif status in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        kind = BrokerUnavailable
    elif status is grpc.StatusCode.UNAUTHENTICATED:
        kind = Unauthenticated
    elif status is grpc.StatusCode.INVALID_ARGUMENT:
        kind = InvalidArgument
    else:
        kind = BrokerError
    return kind(error.details() or status.name, status=status.name)
