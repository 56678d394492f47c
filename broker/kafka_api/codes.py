"""halfmq's core errors as Kafka's error codes, for every Kafka API."""

from __future__ import annotations

from kafka import errors as kerr

from broker.errors import (
    HalfmqError,
    HiddenTopic,
    InvalidArgument,
    MessageTooLarge,
    NotFound,
    OffsetOutOfRange,
    StorageFull,
    TopicExists,
    TopicInUse,
)
from broker.kafka_api.records import BadRecords
from broker.model import check_name


def name_error(topic: str) -> int | None:
    """INVALID_TOPIC_EXCEPTION for a name no topic may have, as Kafka answers it; else None."""
    try:
        check_name("topic", topic)
    except InvalidArgument:
        return int(kerr.InvalidTopicError.errno)
    return None


def error_code(exc: HalfmqError) -> int:
    """The Kafka error code for a core error."""
    if isinstance(exc, BadRecords):
        return int(kerr.CorruptRecordError.errno)
    for kind, kafka_error in (
        (HiddenTopic, kerr.TopicAuthorizationFailedError),
        (NotFound, kerr.UnknownTopicOrPartitionError),
        (MessageTooLarge, kerr.MessageSizeTooLargeError),
        (OffsetOutOfRange, kerr.OffsetOutOfRangeError),
        (TopicExists, kerr.TopicAlreadyExistsError),
        (TopicInUse, kerr.PolicyViolationError),
        (StorageFull, kerr.KafkaStorageError),
        (InvalidArgument, kerr.InvalidRequestError),
    ):
        if isinstance(exc, kind):
            return int(kafka_error.errno)
    return int(kerr.UnknownError.errno)
