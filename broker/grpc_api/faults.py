"""The faults a test injects (``--test-controls``), applied to native gRPC calls: a call lost on
the network before the broker sees it (an end, or a send of a Kafka-model transaction), a half
message stored whose acknowledgement is lost, and a commit of a Kafka-model transaction stored
before the broker is SIGKILLed, unanswered. A lost call ends for the client with UNAVAILABLE, as
from a broken connection, and the client retries as it would. Installed only when the test
controls are on; calls carried on the Transact stream suffer the same faults (``suffer``), and a
lost one breaks the stream."""

from __future__ import annotations

import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

import grpc

from broker.controls import Faults

_SERVICE = "/halfmq.v1.Broker/"
# When a fault strikes: before the call runs (lost on its way), after (stored, the reply lost),
# or after with the broker killed (stored, and the broker dies before it answers).
When = Literal["before", "after", "crash"]
# RPC name -> the faults it can suffer: (the fault, when, the items of a request it uses up; 0: not this request)
_FAULTS: dict[str, tuple[tuple[str, When, Callable[[Any], int]], ...]] = {
    "EndTransactions": (("drop_end_transactions", "before", lambda request: len(request.items)),),
    "SendHalfMessages": (("lose_half_acks", "after", lambda request: len(request.items)),),
    "PrepareColumns": (("lose_half_acks", "after", lambda request: request.messages.count),),
    "EndBatch": (("drop_end_transactions", "before", lambda request: 1),),
    "SendInTransaction": (("drop_txn_sends", "before", lambda request: 1),),
    "EndTxn": (
        ("drop_end_transactions", "before", lambda request: 1),
        ("crash_in_commits", "crash", lambda request: int(request.commit)),
    ),
}


R = TypeVar("R")


async def suffer(
    faults: Faults, method: str, request: Any, run: Callable[[], Awaitable[R]], lose: Callable[[str], Awaitable[None]]
) -> R:
    """``run()`` the call ``method`` (one the table above names), unless a fault loses it first, or loses its
    reply after: ``lose(why)`` ends the call as a broken connection would, and does not return."""
    struck = [
        (kind, when) for kind, when, items in _FAULTS[method] if items(request) and faults.take(kind, items(request))
    ]
    if any(when == "before" for _, when in struck):
        await lose("test control: the call was lost before the broker saw it")
    response = await run()
    if any(when == "crash" for _, when in struck):
        os.kill(os.getpid(), signal.SIGKILL)  # stored; the broker dies before it answers
    if struck:
        await lose("test control: stored, but the acknowledgement was lost")
    return response


class FaultInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(self, faults: Faults) -> None:
        self._faults = faults

    async def intercept_service(
        self, continuation: Callable[[Any], Awaitable[Any]], details: grpc.HandlerCallDetails
    ) -> Any:
        handler = await continuation(details)
        method = details.method.removeprefix(_SERVICE)
        if handler is None or method not in _FAULTS:
            return handler
        behaviour = handler.unary_unary

        async def faulty(request: Any, context: grpc.aio.ServicerContext) -> Any:
            async def lose(why: str) -> None:
                await context.abort(grpc.StatusCode.UNAVAILABLE, why)

            return await suffer(self._faults, method, request, lambda: behaviour(request, context), lose)

        return grpc.unary_unary_rpc_method_handler(
            faulty, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )
