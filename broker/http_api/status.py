"""The one table from core errors to HTTP status codes, and the JSON error body."""

from __future__ import annotations

from typing import Any

from broker import errors

_STATUS: dict[type[errors.HalfmqError], int] = {
    errors.InvalidArgument: 400,
    errors.MessageTooLarge: 413,
    errors.InvalidDeliveryTime: 400,
    errors.DelayedMessageNotFound: 404,
    errors.MessageTypeMismatch: 409,
    errors.NotFound: 404,
    errors.TopicNotFound: 404,
    errors.TransactionNotFound: 404,
    errors.TransactionalIdNotFound: 404,
    errors.RangeNotOpen: 404,
    errors.MessageNotFound: 404,
    errors.GroupNotFound: 404,
    errors.GroupNotEmpty: 409,
    errors.ProducerFenced: 409,
    errors.InvalidTxnState: 409,
    errors.TransactionAborted: 409,
    errors.HiddenTopic: 403,
    errors.TopicExists: 409,
    errors.TopicInUse: 409,
    errors.ProducerGroupMismatch: 403,
    errors.ResolutionConflict: 409,
    errors.BrokerClosed: 503,
    errors.MessageIdInUse: 409,
    errors.StorageFull: 507,
    errors.StorageFailure: 500,
    errors.OffsetOutOfRange: 416,
    errors.TestControlsOff: 403,
}


def status_for(error: errors.HalfmqError) -> int:
    return _STATUS.get(type(error), 500)


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """``{"error": {"code": ..., "message": ...}}``: every error the admin API returns."""
    return {"error": {"code": code, "message": message, **extra}}
