"""Bounds of the HTTP front end (docs/architecture.md, guarantee 11), applied before any route runs.

- ``RequestGate``: with an auth token set, every request but those for the open paths is
  authenticated, and a request with a body has its declared length checked, before a byte of
  the body is read (401, 411 or 413 as JSON, and the connection closed).
- ``BoundedH11Protocol``: at most MAX_CONNECTIONS connections (more are closed at once), and a
  connection that has not sent a request head within HEAD_TIMEOUT seconds is closed.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Container
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_CONNECTIONS = 1000
HEAD_TIMEOUT = 5.0
TIMEOUT_KEEP_ALIVE = 5
_BODY_METHODS = {b"POST", b"PUT", b"PATCH"}


def token_matches(authorization: str, token: str) -> bool:
    """Whether an ``Authorization`` header value carries ``Bearer <token>`` (constant-time)."""
    return secrets.compare_digest(authorization.encode(), f"Bearer {token}".encode())


class RequestGate:
    """ASGI middleware: authenticate requests, and size-check those with a body, before reading it.

    ``open_paths`` answer without the token: paths that hold no data (the dashboard's page and
    scripts, the API's description and its viewer) and ``/healthz``, for probes.
    """

    def __init__(self, app: ASGIApp, *, token: str | None, max_body_bytes: int, open_paths: Container[str]) -> None:
        self._app = app
        self._token = token
        self._max_body_bytes = max_body_bytes
        self._open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(scope["path"], scope["method"].encode(), dict(scope["headers"]))
            if refusal is not None:
                await _refuse(send, *refusal)
                return
        await self._app(scope, receive, send)

    def _refusal(self, path: str, method: bytes, headers: dict[bytes, bytes]) -> tuple[int, str, str] | None:
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        if self._token is not None and path not in self._open_paths and not token_matches(authorization, self._token):
            return 401, "UNAUTHENTICATED", "a valid bearer token is required (Authorization: Bearer <token>)"
        if method not in _BODY_METHODS:
            return None
        length = headers.get(b"content-length")
        if length is None:
            if b"transfer-encoding" in headers:
                return 411, "LENGTH_REQUIRED", "a request body needs a Content-Length"
            return None
        if not length.isdigit() or int(length) > self._max_body_bytes:
            return 413, "BODY_TOO_LARGE", f"a request body may be at most {self._max_body_bytes} bytes"
        return None


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers.append((b"connection", b"close"))  # the unread body must not be taken for the next request
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BoundedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a connection cap and a deadline for the request head."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > MAX_CONNECTIONS:
            transport.close()
            return
        self._head_deadline = self.loop.call_later(HEAD_TIMEOUT, self._head_overdue)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
        super().connection_lost(exc)

    def _head_overdue(self) -> None:
        if self.cycle is None and not self.transport.is_closing():
            self.transport.close()
