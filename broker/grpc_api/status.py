"""The one table from core errors to gRPC status codes, and the decorator that applies it."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from broker import errors

ERROR_METADATA_KEY = "halfmq-error"

_STATUS: dict[type[errors.HalfmqError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.MessageTooLarge: grpc.StatusCode.INVALID_ARGUMENT,
    errors.InvalidDeliveryTime: grpc.StatusCode.INVALID_ARGUMENT,
    errors.DelayedMessageNotFound: grpc.StatusCode.NOT_FOUND,
    errors.MessageTypeMismatch: grpc.StatusCode.FAILED_PRECONDITION,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.TopicNotFound: grpc.StatusCode.NOT_FOUND,
    errors.TransactionNotFound: grpc.StatusCode.NOT_FOUND,
    errors.RangeNotOpen: grpc.StatusCode.NOT_FOUND,
    errors.TransactionalIdNotFound: grpc.StatusCode.NOT_FOUND,
    errors.ProducerFenced: grpc.StatusCode.FAILED_PRECONDITION,
    errors.InvalidTxnState: grpc.StatusCode.FAILED_PRECONDITION,
    errors.TransactionAborted: grpc.StatusCode.ABORTED,
    errors.HiddenTopic: grpc.StatusCode.PERMISSION_DENIED,
    errors.TopicExists: grpc.StatusCode.ALREADY_EXISTS,
    errors.ProducerGroupMismatch: grpc.StatusCode.PERMISSION_DENIED,
    errors.ResolutionConflict: grpc.StatusCode.FAILED_PRECONDITION,
    errors.BrokerClosed: grpc.StatusCode.UNAVAILABLE,
    errors.MessageIdInUse: grpc.StatusCode.ALREADY_EXISTS,
    errors.StorageFull: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.StorageFailure: grpc.StatusCode.INTERNAL,
    errors.OffsetOutOfRange: grpc.StatusCode.OUT_OF_RANGE,
}


def status_for(error: errors.HalfmqError) -> grpc.StatusCode:
    """The gRPC status for a core error (INTERNAL for one the table does not name)."""
    return _STATUS.get(type(error), grpc.StatusCode.INTERNAL)


R = TypeVar("R")
Handler = Callable[[Any, Any, grpc.aio.ServicerContext], Awaitable[R]]
StreamHandler = Callable[[Any, Any, grpc.aio.ServicerContext], AsyncIterator[R]]


def translate_errors(handler: Handler[R]) -> Handler[R]:
    """Turn a core error into its gRPC status, with the stable error code in trailing metadata."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> R:
        try:
            return await handler(self, request, context)
        except errors.HalfmqError as exc:
            await _abort(context, exc)
            raise  # unreachable: abort raises

    return wrapper


def translate_stream_errors(handler: StreamHandler[R]) -> StreamHandler[R]:
    """``translate_errors`` for a handler that streams its replies: a core error ends the stream
    with its status, after the replies already sent."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[R]:
        try:
            async for reply in handler(self, request, context):
                yield reply
        except errors.HalfmqError as exc:
            await _abort(context, exc)

    return wrapper


async def _abort(context: grpc.aio.ServicerContext, exc: errors.HalfmqError) -> None:
    await context.abort(status_for(exc), str(exc), trailing_metadata=((ERROR_METADATA_KEY, exc.code),))
