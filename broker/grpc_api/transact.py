"""The Transact stream: half sends and ends carried as messages on one open stream per producer,
each answered by its call id, instead of a unary call each (a stream message costs the broker
about 40 % of a unary call: docs/benchmarks.md, issue 9).

Calls run concurrently and are answered as they finish. At most MAX_CALLS of a stream run at
once: the stream is not read further until one finishes, so HTTP/2's flow control holds a client
that sends faster than the store commits. A call refused as a whole gets an ItemError and the
stream stays open; a test control's lost call breaks the stream with UNAVAILABLE, as a broken
connection would, and the client retries every call that was in flight on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from broker.controls import Faults
from broker.errors import HalfmqError, InvalidArgument
from broker.grpc_api.faults import suffer
from halfmq_proto.v1 import halfmq_pb2 as pb

MAX_CALLS = 8

Call = Callable[[Any], Awaitable[Any]]


class _Lost(Exception):
    """A call a test control lost: the stream breaks."""


async def serve_transact(
    requests: Any, context: grpc.aio.ServicerContext, calls: dict[str, tuple[str, Call]], faults: Faults | None
) -> None:
    """Serve one Transact stream: ``calls`` maps a request's field (``halves``, ``ends``) to the
    batch RPC it stands for and the function that answers it (raising a core error to refuse it)."""
    replies: asyncio.Queue[pb.TransactDown | Exception | None] = asyncio.Queue()
    slots = asyncio.Semaphore(MAX_CALLS)
    running: set[asyncio.Task[None]] = set()

    async def answer(up: pb.TransactUp) -> None:
        try:
            replies.put_nowait(await _reply(up, calls, faults))
        except Exception as exc:  # a lost call or a broker failure ends the stream
            replies.put_nowait(exc)
        finally:
            slots.release()

    async def read() -> None:
        try:
            async for up in requests:
                await slots.acquire()
                task = asyncio.create_task(answer(up))
                running.add(task)
                task.add_done_callback(running.discard)
            await asyncio.gather(*running)  # the client is done sending: answer what it sent
            replies.put_nowait(None)
        except Exception as exc:
            replies.put_nowait(exc)

    reader = asyncio.create_task(read())
    try:
        while (reply := await replies.get()) is not None:
            if isinstance(reply, _Lost):
                await context.abort(grpc.StatusCode.UNAVAILABLE, str(reply))
            if isinstance(reply, Exception):
                raise reply
            await context.write(reply)
    finally:
        for task in (reader, *running):
            task.cancel()


async def _reply(up: pb.TransactUp, calls: dict[str, tuple[str, Call]], faults: Faults | None) -> pb.TransactDown:
    field = up.WhichOneof("request")
    try:
        if field is None:
            raise InvalidArgument("a Transact request carries halves or ends")
        method, call = calls[field]
        request = getattr(up, field)
        if faults is None:
            response = await call(request)
        else:
            response = await suffer(faults, method, request, lambda: call(request), _lose)
    except HalfmqError as exc:
        return pb.TransactDown(call_id=up.call_id, error=pb.ItemError(code=exc.code, message=str(exc)))
    return pb.TransactDown(call_id=up.call_id, **{field: response})


async def _lose(why: str) -> None:
    raise _Lost(why)
