"""The faults a test injects (``--test-controls``), applied to native gRPC calls: an end lost on
the network before the broker records it, and a half message stored whose acknowledgement is
lost. Either way the client gets UNAVAILABLE, as from a broken connection, and retries as it
would. Installed only when the test controls are on; calls carried on the Transact stream suffer
the same faults (``suffer``), and a lost one breaks the stream."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from broker.controls import Faults

_SERVICE = "/halfmq.v1.Broker/"
# RPC name -> (the fault it suffers, whether it runs before being lost, items in its request)
_FAULTS: dict[str, tuple[str, bool, Callable[[Any], int]]] = {
    "EndTransactions": ("drop_end_transactions", False, lambda request: len(request.items)),
    "SendHalfMessages": ("lose_half_acks", True, lambda request: len(request.items)),
    "PrepareColumns": ("lose_half_acks", True, lambda request: request.messages.count),
    "EndBatch": ("drop_end_transactions", False, lambda request: 1),
}


R = TypeVar("R")


async def suffer(
    faults: Faults, method: str, request: Any, run: Callable[[], Awaitable[R]], lose: Callable[[str], Awaitable[None]]
) -> R:
    """``run()`` the call ``method`` (one the table above names), unless a fault loses it first, or loses its
    reply after: ``lose(why)`` ends the call as a broken connection would, and does not return."""
    kind, runs, items = _FAULTS[method]
    if not runs and faults.take(kind, items(request)):
        await lose("test control: the end was lost before the broker saw it")
    response = await run()
    if runs and faults.take(kind, items(request)):
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
