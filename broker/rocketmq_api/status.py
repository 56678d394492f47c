"""Core errors as RocketMQ 5 statuses (``apache.rocketmq.v2.Status``), in one table."""

from __future__ import annotations

from typing import Any

from broker import errors
from broker.rocketmq_api.protocol import load

definition, _, _ = load()

CODES = {
    errors.TopicNotFound: definition.TOPIC_NOT_FOUND,
    errors.HiddenTopic: definition.ILLEGAL_TOPIC,
    errors.MessageTooLarge: definition.MESSAGE_BODY_TOO_LARGE,
    errors.InvalidDeliveryTime: definition.ILLEGAL_DELIVERY_TIME,
    errors.InvalidFilter: definition.ILLEGAL_FILTER_EXPRESSION,
    errors.DelayedMessageNotFound: definition.NOT_FOUND,
    errors.MessageTypeMismatch: definition.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
    errors.TransactionNotFound: definition.INVALID_TRANSACTION_ID,
    errors.ProducerGroupMismatch: definition.FORBIDDEN,
    errors.ResolutionConflict: definition.PRECONDITION_FAILED,
    errors.BrokerClosed: definition.INTERNAL_ERROR,
    errors.StaleReceiptHandle: definition.INVALID_RECEIPT_HANDLE,
    errors.OffsetOutOfRange: definition.ILLEGAL_OFFSET,
    errors.MessageIdInUse: definition.BAD_REQUEST,
    errors.StorageFull: definition.INTERNAL_SERVER_ERROR,
    errors.StorageFailure: definition.INTERNAL_SERVER_ERROR,
}


def status(error: errors.HalfmqError | None = None) -> Any:
    if error is None:
        return definition.Status(code=definition.OK, message="OK")
    return definition.Status(code=CODES.get(type(error), definition.BAD_REQUEST), message=str(error))
