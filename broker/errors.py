"""Errors raised by the broker core.

Every failure the core reports is one of these; the front ends map them to wire errors
in one table each (``broker.grpc_api.status``). ``code`` is the stable name sent to clients.

    HalfmqError
    ├── InvalidArgument          malformed input: names, ids, sizes, counts
    │   ├── MessageTooLarge      a body over the configured limit
    │   ├── InvalidDeliveryTime  a delayed message due beyond the maximum delay
    │   └── InvalidFilter        a filter expression (TAG or SQL92) that does not parse
    ├── NotFound
    │   ├── TopicNotFound        the topic does not exist
    │   ├── DelayedMessageNotFound  a recall of no waiting delayed message
    │   ├── TransactionNotFound  no half message has this transaction id
    │   ├── TransactionalIdNotFound  a Kafka-model call for a transactional id never initialised
    │   ├── MessageNotFound      no message, held or stored, has this id
    │   └── GroupNotFound        no consumer group of this name has offsets, deliveries or a policy
    ├── HiddenTopic              a system topic named through a data API
    ├── TopicExists              the topic exists with a different queue count or type
    ├── TopicInUse               a topic deleted while a transaction or delayed message of it is pending
    ├── GroupNotEmpty            a consumer group with live members: its offsets stay as they are
    ├── MessageTypeMismatch      a message of a type its topic does not accept
    ├── ProducerGroupMismatch    the transaction belongs to another producer group
    ├── ResolutionConflict       the transaction was already resolved differently
    ├── MessageIdInUse           a message id already taken by another message or transaction
    ├── ProducerFenced           a newer producer holds the transactional id (Kafka's epoch bump)
    ├── InvalidTxnState          a Kafka-model transaction not open: ended already, or not begun
    ├── TransactionAborted       a Kafka-model transaction the broker aborted (its timeout)
    ├── StaleReceiptHandle       a receipt handle that was acknowledged, or redelivered since
    ├── OffsetOutOfRange         a pull below a queue's low offset: retention deleted those messages
    ├── StorageFull              the disk (or the store's size limit) is full; reads still work
    ├── StorageFailure           any other failure of the store's SQLite file
    ├── TestControlsOff          a test control used on a broker started without --test-controls
    └── BrokerClosed             the store is shut down
"""

from __future__ import annotations


class HalfmqError(Exception):
    """Root of every error the broker core raises."""

    code = "INTERNAL"


class InvalidArgument(HalfmqError):
    """Raised when a request field is malformed or out of range."""

    code = "INVALID_ARGUMENT"


class MessageTooLarge(InvalidArgument):
    """Raised when a message body exceeds ``max_body_bytes``."""

    code = "MESSAGE_TOO_LARGE"


class InvalidDeliveryTime(InvalidArgument):
    """Raised when a delayed message is due further ahead than the broker's maximum delay."""

    code = "INVALID_DELIVERY_TIME"


class InvalidFilter(InvalidArgument):
    """Raised when a consumer's filter expression does not parse, or is of an unknown type."""


class MessageTypeMismatch(HalfmqError):
    """Raised when a message's type (normal, FIFO, delayed, transactional) is not the one its
    topic accepts."""

    code = "MESSAGE_TYPE_MISMATCH"


class NotFound(HalfmqError):
    """Raised when a named resource does not exist."""

    code = "NOT_FOUND"


class TopicNotFound(NotFound):
    """Raised when a topic does not exist."""

    code = "TOPIC_NOT_FOUND"


class TransactionNotFound(NotFound):
    """Raised when no half message carries the transaction id."""

    code = "TRANSACTION_NOT_FOUND"


class DelayedMessageNotFound(NotFound):
    """Raised when a recall names no delayed message still waiting: unknown, delivered or
    recalled already."""

    code = "DELAYED_MESSAGE_NOT_FOUND"


class RangeNotOpen(NotFound):
    """Raised when a batch's commit names a range that is not open in that batch of that group:
    never prepared there, or rolled back since (the batch timeout, or a later end of the group)."""

    code = "RANGE_NOT_OPEN"


class TransactionalIdNotFound(NotFound):
    """Raised when a Kafka-model call names a transactional id no producer ever initialised."""

    code = "TRANSACTIONAL_ID_NOT_FOUND"


class MessageNotFound(NotFound):
    """Raised when no message, held or stored, has the id an operator names."""

    code = "MESSAGE_NOT_FOUND"


class GroupNotFound(NotFound):
    """Raised when an operator names a consumer group the broker knows nothing of."""

    code = "GROUP_NOT_FOUND"


class GroupNotEmpty(HalfmqError):
    """Raised when an operator resets or deletes a consumer group that has live members, as
    Kafka refuses it (NON_EMPTY_GROUP): its consumers would write over the change."""

    code = "GROUP_NOT_EMPTY"


class HiddenTopic(HalfmqError):
    """Raised when a system topic is named through a data API (send, pull, create)."""

    code = "HIDDEN_TOPIC"


class TopicExists(HalfmqError):
    """Raised when creating a topic that exists with a different number of queues or message type."""

    code = "TOPIC_EXISTS"


class TopicInUse(HalfmqError):
    """Raised when deleting a topic that a pending transaction, a delayed message or an open
    range would still write to."""

    code = "TOPIC_IN_USE"


class ProducerGroupMismatch(HalfmqError):
    """Raised when a transaction is ended by a producer group other than the one that prepared it."""

    code = "PRODUCER_GROUP_MISMATCH"


class ResolutionConflict(HalfmqError):
    """Raised when a transaction is asked to reach a state other than the one already recorded."""

    code = "RESOLUTION_CONFLICT"


class MessageIdInUse(HalfmqError):
    """Raised when a message id is already used in the topic by a different message or transaction."""

    code = "MESSAGE_ID_IN_USE"


class ProducerFenced(HalfmqError):
    """Raised when a producer calls with an epoch older than its transactional id's: another
    producer initialised the id since, and the older one's open transaction was aborted."""

    code = "PRODUCER_FENCED"


class InvalidTxnState(HalfmqError):
    """Raised when a Kafka-model call names a transaction that is not open: ended already (and
    not the same way), or not begun (Kafka's INVALID_TXN_STATE)."""

    code = "INVALID_TXN_STATE"


class TransactionAborted(HalfmqError):
    """Raised when a Kafka-model call names a transaction the broker aborted because it was open
    longer than its producer's transaction timeout."""

    code = "TRANSACTION_ABORTED"


class StorageFull(HalfmqError):
    """Raised when a write cannot be stored because the disk is full; nothing of it is kept."""

    code = "STORAGE_FULL"


class StorageFailure(HalfmqError):
    """Raised when the store's SQLite file fails for any reason other than a full disk."""

    code = "STORAGE_ERROR"


class StaleReceiptHandle(HalfmqError):
    """Raised when a receipt handle no longer names an in-flight delivery (acked or redelivered since)."""

    code = "STALE_RECEIPT_HANDLE"


class OffsetOutOfRange(HalfmqError):
    """Raised when a pull starts below a queue's low offset: retention deleted those messages."""

    code = "OFFSET_OUT_OF_RANGE"


class TestControlsOff(HalfmqError):
    """Raised when a test control is used on a broker started without ``--test-controls``."""

    code = "TEST_CONTROLS_OFF"


class StoreInUse(HalfmqError):
    """Raised when a data directory is already open in another process."""

    code = "STORE_IN_USE"


class BrokerClosed(HalfmqError):
    """Raised when work is submitted to a store that has been closed."""

    code = "BROKER_CLOSED"
