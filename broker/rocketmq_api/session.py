"""A RocketMQ 5 producer's Telemetry stream as a check session: checks go down it as
RecoverOrphanedTransactionCommand, through the session's bounded outbox."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc

from broker.rocketmq_api.convert import group_of, to_rocketmq
from broker.rocketmq_api.protocol import load
from broker.transaction.outbox import Check, CheckRequest, Outbox

definition, service, _ = load()


class TelemetrySession:
    """A RocketMQ 5 producer's Telemetry stream, registered once per topic it publishes."""

    def __init__(self, topic: str, client_id: str, context: grpc.aio.ServicerContext, lock: asyncio.Lock,
                 make_outbox: Callable[..., Outbox]) -> None:  # fmt: skip
        self.producer_group = group_of(topic)
        self.client_id = client_id
        self._context = context
        self._lock = lock
        self.outbox = make_outbox(self._write)

    def offer(self, check: Check) -> asyncio.Future[None] | None:
        return self.outbox.offer(check)

    async def _write(self, request: CheckRequest) -> None:
        command = service.RecoverOrphanedTransactionCommand(  # RocketMQ names a transaction by its message id
            message=to_rocketmq(request.message, definition.TRANSACTION), transaction_id=request.message.message_id
        )
        async with self._lock:
            await self._context.write(service.TelemetryCommand(recover_orphaned_transaction_command=command))
