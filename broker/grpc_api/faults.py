"""The faults a test injects (``--test-controls``), applied to native gRPC calls: an end lost on
the network before the broker records it, and a half message stored whose acknowledgement is
lost. Either way the client gets UNAVAILABLE, as from a broken connection, and retries as it
would. Installed only when the test controls are on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from broker.controls import Faults

_SERVICE = "/halfmq.v1.Broker/"
# RPC name -> (the fault it suffers, whether it runs before being lost, items in its request)
_FAULTS: dict[str, tuple[str, bool, Callable[[Any], int]]] = {
    "EndTransaction": ("drop_end_transactions", False, lambda request: 1),
    "EndTransactions": ("drop_end_transactions", False, lambda request: len(request.items)),
    "SendHalfMessage": ("lose_half_acks", True, lambda request: 1),
    "SendHalfMessages": ("lose_half_acks", True, lambda request: len(request.items)),
    "PrepareBatch": ("lose_half_acks", True, lambda request: len(request.messages)),
    "EndBatch": ("drop_end_transactions", False, lambda request: 1),
}


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
        kind, runs, items = _FAULTS[method]
        behaviour = handler.unary_unary

        async def faulty(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if not runs and self._faults.take(kind, items(request)):
                await context.abort(
                    grpc.StatusCode.UNAVAILABLE, "test control: the end was lost before the broker saw it"
                )
            response = await behaviour(request, context)
            if runs and self._faults.take(kind, items(request)):
                await context.abort(
                    grpc.StatusCode.UNAVAILABLE, "test control: stored, but the acknowledgement was lost"
                )
            return response

        return grpc.unary_unary_rpc_method_handler(
            faulty, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )
