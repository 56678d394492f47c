"""The one table from core errors to gRPC status codes."""

from __future__ import annotations

import grpc

from broker import errors

ERROR_METADATA_KEY = "halfmq-error"

_STATUS: dict[type[errors.HalfmqError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.MessageTooLarge: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.TopicNotFound: grpc.StatusCode.NOT_FOUND,
    errors.TransactionNotFound: grpc.StatusCode.NOT_FOUND,
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
