"""halfmq producer SDK: transactional and plain producers and a pull consumer for the halfmq broker."""

from producer_sdk.consumer import PullConsumer
from producer_sdk.errors import (
    BrokerError,
    BrokerUnavailable,
    HalfmqError,
    HiddenTopic,
    InvalidArgument,
    MessageIdInUse,
    MessageTooLarge,
    NotFound,
    OffsetOutOfRange,
    ProducerGroupMismatch,
    RangeNotOpen,
    ResolutionConflict,
    StorageFull,
    TopicExists,
    TopicNotFound,
    TransactionNotFound,
    Unauthenticated,
)
from producer_sdk.listener import TransactionListener
from producer_sdk.message import (
    LocalTransactionState,
    Message,
    PullResult,
    ReceivedMessage,
    SendReceipt,
    SendResult,
    TransactionSendResult,
    TransactionState,
)
from producer_sdk.producer import Producer
from producer_sdk.transaction_producer import AsyncTransactionProducer, TransactionProducer

__all__ = [
    "AsyncTransactionProducer",
    "BrokerError",
    "BrokerUnavailable",
    "HalfmqError",
    "HiddenTopic",
    "InvalidArgument",
    "LocalTransactionState",
    "Message",
    "MessageIdInUse",
    "MessageTooLarge",
    "NotFound",
    "OffsetOutOfRange",
    "Producer",
    "ProducerGroupMismatch",
    "PullConsumer",
    "PullResult",
    "RangeNotOpen",
    "ReceivedMessage",
    "ResolutionConflict",
    "SendReceipt",
    "SendResult",
    "StorageFull",
    "TopicExists",
    "TopicNotFound",
    "TransactionListener",
    "TransactionNotFound",
    "TransactionProducer",
    "TransactionSendResult",
    "TransactionState",
    "Unauthenticated",
]
