"""The broker's shared token on the RocketMQ 5 front end, as RocketMQ's own request signature.

RocketMQ 5 clients sign each call with their credentials (``Credentials(ak, sk)``):
``authorization: MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time, Signature=<hex>``,
the signature being HMAC-SHA1 of the ``x-mq-date-time`` header keyed by ``sk``. With an auth
token, halfmq accepts a call only if it is signed with ``sk`` = the token (any access key).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import grpc


def signed_with(token: str, metadata: dict[str, str]) -> bool:
    """True if the call's metadata carries a valid signature made with ``token`` as secret key."""
    authorization = metadata.get("authorization", "")
    scheme, _, fields = authorization.partition(" ")
    parts = dict(part.strip().partition("=")[::2] for part in fields.split(","))
    if scheme != "MQv2-HMAC-SHA1" or parts.get("SignedHeaders") != "x-mq-date-time":
        return False
    expected = hmac.new(token.encode(), metadata.get("x-mq-date-time", "").encode(), hashlib.sha1).hexdigest()
    return hmac.compare_digest(parts.get("Signature", "").lower(), expected)


class SignatureInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuses unsigned or wrongly signed calls with UNAUTHENTICATED before any handler runs."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_service(
        self, continuation: Callable[[Any], Awaitable[Any]], details: grpc.HandlerCallDetails
    ) -> Any:
        handler = await continuation(details)
        if handler is None or signed_with(self._token, dict(details.invocation_metadata or ())):
            return handler

        async def deny(request: Any, context: grpc.aio.ServicerContext) -> None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "the call must be signed with the broker's token")

        if handler.stream_stream:
            return grpc.stream_stream_rpc_method_handler(deny)
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(deny)
        return grpc.unary_unary_rpc_method_handler(deny)
