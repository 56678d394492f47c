"""Shared-token authentication of every gRPC call (``authorization: Bearer <token>`` metadata)."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

TOKEN_KEY = "authorization"


class TokenInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuses a call without the broker's token with UNAUTHENTICATED, before any handler runs."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(
        self, continuation: Callable[[Any], Awaitable[Any]], details: grpc.HandlerCallDetails
    ) -> Any:
        handler = await continuation(details)
        given = dict(details.invocation_metadata or ()).get(TOKEN_KEY, "")
        if handler is None or secrets.compare_digest(str(given).encode(), self._expected):
            return handler

        async def deny(request: Any, context: grpc.aio.ServicerContext) -> None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "a valid bearer token is required")

        if handler.stream_stream:
            return grpc.stream_stream_rpc_method_handler(deny)
        return grpc.unary_unary_rpc_method_handler(deny)
