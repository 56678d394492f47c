"""The producer's session stream: announces the group, receives checks, sends answers, reconnects."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import grpc

from halfmq_proto.v1 import halfmq_pb2 as pb
from producer_sdk._client import BrokerClient
from producer_sdk.errors import HalfmqError, from_rpc_error
from producer_sdk.message import LocalTransactionState

log = logging.getLogger(__name__)

RESOLUTIONS = {
    LocalTransactionState.COMMIT: pb.COMMIT,
    LocalTransactionState.ROLLBACK: pb.ROLLBACK,
    LocalTransactionState.UNKNOWN: pb.UNKNOWN,
}
CheckHandler = Callable[[pb.CheckRequest], Awaitable[LocalTransactionState]]


class SessionLoop:
    """Keeps one ProducerSession stream open, reconnecting with backoff after a broker restart."""

    def __init__(self, client: BrokerClient, producer_group: str, client_id: str, on_check: CheckHandler) -> None:
        self._client = client
        self._hello = pb.SessionUp(hello=pb.Hello(producer_group=producer_group, client_id=client_id))
        self._producer_group = producer_group
        self._on_check = on_check
        self.connected = asyncio.Event()
        self.refused: HalfmqError | None = None
        self.checks_received = 0
        self._checks: set[asyncio.Task[None]] = set()
        self._write_lock = asyncio.Lock()

    async def run(self) -> None:
        """Hold the session open until cancelled, or until the broker refuses the hello (see ``refused``)."""
        backoff = 0.05
        while True:
            call = self._client.broker_stub.ProducerSession(metadata=self._client.metadata)
            try:
                await call.write(self._hello)
                welcome = await call.read()
                if welcome is grpc.aio.EOF:
                    raise ConnectionError("broker closed the session")
                self.connected.set()
                backoff = 0.05
                while (down := await call.read()) is not grpc.aio.EOF:
                    if down.HasField("check"):
                        self.checks_received += 1
                        task = asyncio.create_task(self._answer(call, down.check))
                        self._checks.add(task)
                        task.add_done_callback(self._checks.discard)
            except grpc.aio.AioRpcError as exc:
                if exc.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAUTHENTICATED):
                    self.refused = from_rpc_error(exc)
                    return
                log.info("producer session lost (%s); reconnecting in %.2fs", exc.code().name, backoff)
            except ConnectionError as exc:
                log.info("producer session lost (%s); reconnecting in %.2fs", exc, backoff)
            finally:
                self.connected.clear()
                call.cancel()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    async def close(self) -> None:
        """Wait for the answers already being computed."""
        if self._checks:
            await asyncio.gather(*self._checks, return_exceptions=True)

    async def _answer(self, call: grpc.aio.StreamStreamCall, check: pb.CheckRequest) -> None:
        state = await self._on_check(check)
        answer = pb.CheckAnswer(transaction_id=check.transaction_id, resolution=RESOLUTIONS[state])
        try:
            async with self._write_lock:
                await call.write(pb.SessionUp(answer=answer))
            return
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as exc:
            log.info("answer for %s not sent on the session (%s); using EndTransactions", check.transaction_id, exc)
        if state is LocalTransactionState.UNKNOWN:
            return
        request = pb.EndTransactionRequest(
            transaction_id=check.transaction_id,
            producer_group=self._producer_group,
            resolution=RESOLUTIONS[state],
            source=pb.CHECK,
        )
        try:
            (ended,) = await self._client.call_batch("EndTransactions", pb.EndTransactionsRequest(items=[request]))
            if isinstance(ended, HalfmqError):
                raise ended
        except HalfmqError as exc:
            log.warning("answer for %s not delivered: %s; the broker will check again", check.transaction_id, exc)
