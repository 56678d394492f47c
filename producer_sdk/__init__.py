"""halfmq producer SDK: transactional and plain producers and a pull consumer for the halfmq broker."""

import warnings
from typing import Any

from producer_sdk import transaction_producer
from producer_sdk.consumer import PullConsumer
from producer_sdk.errors import (
    BrokerError,
    BrokerUnavailable,
    DelayedMessageNotFound,
    HalfmqError,
    HiddenTopic,
    InvalidArgument,
    InvalidDeliveryTime,
    InvalidTxnState,
    KafkaTransactionalIdNotFound,
    MessageIdInUse,
    MessageTooLarge,
    MessageTypeMismatch,
    NotFound,
    OffsetOutOfRange,
    ProducerFenced,
    ProducerGroupMismatch,
    RangeNotOpen,
    ResolutionConflict,
    RocketMQTransactionNotFound,
    StorageFull,
    TopicExists,
    TopicNotFound,
    TransactionAborted,
    Unauthenticated,
)
from producer_sdk.listener import TransactionListener
from producer_sdk.message import (
    LocalTransactionState,
    Message,
    PullResult,
    ReceivedMessage,
    SendReceipt,
    TransactionSendResult,
    TransactionState,
)
from producer_sdk.producer import Producer
from producer_sdk.transaction_producer import AsyncRocketMQTransactionProducer, RocketMQTransactionProducer
from producer_sdk.transactional import AsyncKafkaTransactionProducer, KafkaTransactionProducer

__all__ = [
    "AsyncKafkaTransactionProducer",
    "AsyncRocketMQTransactionProducer",
    "BrokerError",
    "BrokerUnavailable",
    "DelayedMessageNotFound",
    "HalfmqError",
    "HiddenTopic",
    "InvalidArgument",
    "InvalidDeliveryTime",
    "InvalidTxnState",
    "KafkaTransactionProducer",
    "KafkaTransactionalIdNotFound",
    "LocalTransactionState",
    "Message",
    "MessageIdInUse",
    "MessageTooLarge",
    "MessageTypeMismatch",
    "NotFound",
    "OffsetOutOfRange",
    "Producer",
    "ProducerFenced",
    "ProducerGroupMismatch",
    "PullConsumer",
    "PullResult",
    "RangeNotOpen",
    "ReceivedMessage",
    "ResolutionConflict",
    "RocketMQTransactionNotFound",
    "RocketMQTransactionProducer",
    "SendReceipt",
    "StorageFull",
    "TopicExists",
    "TopicNotFound",
    "TransactionAborted",
    "TransactionListener",
    "TransactionSendResult",
    "TransactionState",
    "Unauthenticated",
]

# The names of the release before, each the same class as its new name (TransactionProducer: one
# that connects in start(), as it did); each warns when used, and goes in the next release.
_DEPRECATED = {
    "AsyncTransactionProducer": "AsyncRocketMQTransactionProducer",
    "AsyncTransactionalProducer": "AsyncKafkaTransactionProducer",
    "TransactionalProducer": "KafkaTransactionProducer",
    "TransactionNotFound": "RocketMQTransactionNotFound",
    "TransactionalIdNotFound": "KafkaTransactionalIdNotFound",
    "SendResult": "TransactionSendResult",
}


def __getattr__(name: str) -> Any:
    if name == "TransactionProducer":
        return transaction_producer.TransactionProducer  # warns when made
    if name in _DEPRECATED:
        warnings.warn(f"{name} is deprecated: use {_DEPRECATED[name]}", DeprecationWarning, stacklevel=2)
        return globals()[_DEPRECATED[name]]
    raise AttributeError(f"module 'producer_sdk' has no attribute {name!r}")
