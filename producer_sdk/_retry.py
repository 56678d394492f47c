"""Retrying an unreachable broker: every call of the protocol is idempotent, so a call that fails
because the broker is out of reach is made again, with backoff, until the producer's timeout."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc

from producer_sdk.errors import UNREACHABLE_HINT, BrokerUnavailable, from_rpc_error

T = TypeVar("T")
RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


class Retry(Exception):
    """An attempt that failed because the broker is out of reach: worth trying again."""

    def __init__(self, details: str, status: str) -> None:
        super().__init__(details)
        self.status = status


def retryable(exc: grpc.aio.AioRpcError, codes: tuple[grpc.StatusCode, ...] = RETRYABLE) -> Exception:
    """Retry for a call that failed with one of ``codes``, else its typed error."""
    if exc.code() in codes:
        return Retry(exc.details() or exc.code().name, exc.code().name)
    return from_rpc_error(exc)


async def retrying(attempt: Callable[[float], Awaitable[T]], *, broker: str, timeout: float) -> T:
    """``attempt(seconds left)`` until it returns, again with backoff while it raises Retry,
    until ``timeout`` has passed: then BrokerUnavailable."""
    deadline = time.monotonic() + timeout
    backoff = 0.05
    while True:
        try:
            return await attempt(max(deadline - time.monotonic(), 0.01))
        except Retry as exc:
            if time.monotonic() + backoff >= deadline:
                raise BrokerUnavailable(
                    f"no answer from the broker at {broker} within {timeout:g} s ({exc}); {UNREACHABLE_HINT}",
                    status=exc.status,
                ) from exc
        await asyncio.sleep(backoff * random.uniform(0.5, 1.0))
        backoff = min(backoff * 2, 1.0)
