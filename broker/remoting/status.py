"""Core errors as RocketMQ remoting response codes, in one table."""

from __future__ import annotations

from broker import errors
from broker.remoting.codes import Response

CODES = {
    errors.TopicNotFound: Response.TOPIC_NOT_EXIST,
    errors.HiddenTopic: Response.NO_PERMISSION,  # RocketMQ: sending to the topic "is forbidden"
    errors.MessageTooLarge: Response.MESSAGE_ILLEGAL,
    errors.InvalidArgument: Response.MESSAGE_ILLEGAL,
    errors.InvalidDeliveryTime: Response.MESSAGE_ILLEGAL,
    errors.MessageTypeMismatch: Response.MESSAGE_ILLEGAL,
}


def code_of(error: errors.HalfmqError) -> Response:
    """The response code for ``error``: SYSTEM_ERROR for what has no code of its own."""
    return next((code for kind, code in CODES.items() if isinstance(error, kind)), Response.SYSTEM_ERROR)
