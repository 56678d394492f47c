"""Half sends and ends carried on one open Transact stream per producer instead of a unary call
each (the broker's ``grpc_api/transact.py``): each call is a message with an id, answered by id.

A stream that breaks (a broker restart, a lost connection) fails the calls in flight on it with
Retry; each is sent again on a new stream, with backoff, until the producer's timeout, as a unary
call would be: every carried call is idempotent.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import TYPE_CHECKING, Any

import grpc

from halfmq_proto.v1 import halfmq_pb2 as pb
from producer_sdk._retry import RETRYABLE, Retry, retryable, retrying
from producer_sdk.errors import from_item_error

if TYPE_CHECKING:
    from producer_sdk._client import BrokerClient

# A Transact stream that ends with these was lost, not refused: besides what any call retries,
# CANCELLED by the broker's shutdown, and INTERNAL when one of our writes raced the stream's end
# and gRPC's client replaced the stream's status with its own (the broker never ends a stream
# with INTERNAL: a call it refuses is answered with an ItemError).
_LOST = (*RETRYABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.INTERNAL)


class Carrier:
    """Carries calls on the client's Transact stream, opening a new one when it breaks."""

    def __init__(self, client: BrokerClient) -> None:
        self._client = client
        self._stream: _Stream | None = None
        self._ids = itertools.count()

    async def call(self, field: str, request: Any) -> Any:
        """Send ``request`` as the stream request's ``field`` (``halves`` or ``ends``); return the
        reply, or raise the typed error of a call refused as a whole."""

        async def attempt(remaining: float) -> Any:
            if self._stream is None or self._stream.broken is not None:
                self._stream = _Stream(self._client)
            try:
                async with asyncio.timeout(remaining):
                    return await self._stream.call(next(self._ids), field, request)
            except TimeoutError as exc:
                raise Retry("no reply on the Transact stream", grpc.StatusCode.DEADLINE_EXCEEDED.name) from exc

        reply = await retrying(attempt, broker=self._client.broker, timeout=self._client.timeout)
        if reply.WhichOneof("reply") == "error":
            raise from_item_error(reply.error)
        return getattr(reply, field)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()


class _Stream:
    """One Transact stream: its calls in flight by id, and the task that reads their replies."""

    def __init__(self, client: BrokerClient) -> None:
        self._call = client.broker_stub.Transact(metadata=client.metadata, wait_for_ready=True)
        self._waiting: dict[int, asyncio.Future[pb.TransactDown]] = {}
        self._writing = asyncio.Lock()
        self.broken: Exception | None = None
        self._reader = asyncio.create_task(self._read())

    async def call(self, call_id: int, field: str, request: Any) -> pb.TransactDown:
        future: asyncio.Future[pb.TransactDown] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = future  # before the write: its reply may be read before the write returns
        try:
            async with self._writing:
                if self.broken is None:
                    await self._call.write(pb.TransactUp(call_id=call_id, **{field: request}))
            if self.broken is not None:
                raise self.broken
            return await future
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as exc:
            # The write found the stream ended; its own error says less than the stream's status.
            await asyncio.wait({self._reader})
            raise self.broken or Retry(str(exc), grpc.StatusCode.UNAVAILABLE.name) from exc
        finally:
            del self._waiting[call_id]
            if future.done() and not future.cancelled():
                future.exception()  # read here or raised above: nothing is left unretrieved

    async def _read(self) -> None:
        try:
            while (reply := await self._call.read()) is not grpc.aio.EOF:
                future = self._waiting.get(reply.call_id)
                if future is not None and not future.done():
                    future.set_result(reply)
            broken: Exception = Retry("the broker ended the Transact stream", grpc.StatusCode.UNAVAILABLE.name)
        except grpc.aio.AioRpcError as exc:
            broken = retryable(exc, _LOST)
        self.broken = broken
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(broken)

    def close(self) -> None:
        self._call.cancel()
        self._reader.cancel()
