"""The producer session stream: check requests down, answers up, over one bidirectional gRPC call."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

import grpc

from broker.clients import PRODUCER, Client, Clients
from broker.errors import HalfmqError
from broker.grpc_api.convert import resolution_from_pb, stored_to_pb
from broker.grpc_api.server import peer_address
from broker.model import check_client_id, check_name
from broker.transaction.outbox import Check, CheckRequest, Outbox, closing_current_task
from broker.transaction.registry import ProducerRegistry
from broker.transaction.service import TransactionService
from halfmq_proto.v1 import halfmq_pb2 as pb

log = logging.getLogger(__name__)


HELLO_TIMEOUT = 5.0  # seconds a new session has to say hello


class GrpcProducerSession:
    """One producer's live stream, registered so the check service can reach it."""

    def __init__(
        self, producer_group: str, client_id: str, context: grpc.aio.ServicerContext, outbox: Callable[..., Outbox]
    ) -> None:
        self._producer_group = producer_group
        self._client_id = client_id
        self._context = context
        self.outbox = outbox(self._write)

    @property
    def producer_group(self) -> str:
        return self._producer_group

    @property
    def client_id(self) -> str:
        return self._client_id

    def offer(self, check: Check) -> asyncio.Future[None] | None:
        return self.outbox.offer(check)

    async def _write(self, request: CheckRequest) -> None:
        check = pb.CheckRequest(
            transaction_id=request.transaction_id,
            message=stored_to_pb(request.message),
            producer_group=request.producer_group,
            check_times=request.check_times,
        )
        await self._context.write(pb.SessionDown(check=check))


async def serve_session(
    context: grpc.aio.ServicerContext,
    registry: ProducerRegistry,
    transactions: TransactionService,
    clients: Clients,
    *,
    check_timeout: float,
) -> None:
    """Run one ProducerSession call: read the hello, register, then apply answers until the stream ends.

    A session that does not say hello within HELLO_TIMEOUT is closed with DEADLINE_EXCEEDED.
    Checks go out through the session's outbox, each write bounded by ``check_timeout``.
    """
    try:
        first = await asyncio.wait_for(context.read(), HELLO_TIMEOUT)
    except TimeoutError:
        await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, f"no hello within {HELLO_TIMEOUT:g}s")
    if first is grpc.aio.EOF or not first.HasField("hello"):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message of a session must be hello")
    hello = first.hello
    try:
        check_name("producer group", hello.producer_group)
        if hello.client_id:
            check_client_id(hello.client_id)
    except HalfmqError as exc:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    make_outbox = closing_current_task(write_timeout=check_timeout)
    session = GrpcProducerSession(hello.producer_group, hello.client_id or uuid.uuid4().hex, context, make_outbox)
    # Registered before the welcome is written, so a producer that holds its welcome can be checked.
    registry.register(session)
    client = Client("grpc", session.producer_group, PRODUCER, session.client_id, peer_address(context))
    clients.joined(client)
    answers: set[asyncio.Task[None]] = set()
    writer = asyncio.create_task(_welcome_then_checks(context, session.outbox))
    try:
        while (up := await context.read()) is not grpc.aio.EOF:
            if up.HasField("answer"):
                registry.answered(up.answer.transaction_id)
                task = asyncio.create_task(_apply_answer(up.answer, session, transactions))
                answers.add(task)
                task.add_done_callback(answers.discard)
    finally:
        registry.unregister(session)
        clients.left(client)
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
        if answers:
            await asyncio.gather(*answers)


async def _welcome_then_checks(context: grpc.aio.ServicerContext, outbox: Outbox) -> None:
    """Write the welcome, then the session's checks: the welcome is always the first message down."""
    await context.write(pb.SessionDown(welcome=pb.Welcome(session_id=uuid.uuid4().hex)))
    await outbox.run()


async def _apply_answer(answer: pb.CheckAnswer, session: GrpcProducerSession, transactions: TransactionService) -> None:
    """End the transaction as the producer answered; answers may come in any order, or late."""
    try:
        resolution = resolution_from_pb(answer.resolution)
        await transactions.answer_check(answer.transaction_id, session.producer_group, resolution)
    except HalfmqError as exc:
        log.info("check answer for %s from %s ignored: %s", answer.transaction_id, session.client_id, exc)
