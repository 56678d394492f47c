"""Authentication of every gRPC call, for both front ends: one interceptor refuses a call whose
metadata fails the front end's check. The native front end's check is the shared token
(``authorization: Bearer <token>``); the RocketMQ 5 front end's is RocketMQ's signature."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

TOKEN_KEY = "authorization"


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuses a call whose metadata ``allowed`` rejects, with UNAUTHENTICATED and ``refusal``,
    before any handler runs."""

    def __init__(self, allowed: Callable[[dict[str, str]], bool], refusal: str) -> None:
        self._allowed = allowed
        self._refusal = refusal

    async def intercept_service(
        self, continuation: Callable[[Any], Awaitable[Any]], details: grpc.HandlerCallDetails
    ) -> Any:
        handler = await continuation(details)
        if handler is None or self._allowed(dict(details.invocation_metadata or ())):
            return handler

        async def deny(request: Any, context: grpc.aio.ServicerContext) -> None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, self._refusal)

        if handler.stream_stream:
            return grpc.stream_stream_rpc_method_handler(deny)
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(deny)
        return grpc.unary_unary_rpc_method_handler(deny)


def token_interceptor(token: str) -> AuthInterceptor:
    """Calls must carry ``authorization: Bearer <token>``."""
    expected = f"Bearer {token}".encode()
    return AuthInterceptor(
        lambda metadata: secrets.compare_digest(str(metadata.get(TOKEN_KEY, "")).encode(), expected),
        "a valid bearer token is required",
    )
