"""``apache.rocketmq.v2.MessagingService`` for the official RocketMQ 5 producers.

Transactional producers are grouped per topic (producer group ``RMQ5%<topic>``): RocketMQ 5
checks any live producer of a topic, and its clients announce topics, not groups. Checks of
that group are pushed down the client's Telemetry stream as RecoverOrphanedTransactionCommand
by the same check service, with the same limits, as for the native protocol. RPCs not listed
here answer UNIMPLEMENTED (the generated base class).
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import logging
import time
from typing import Any

import grpc

from broker import errors
from broker.clients import CONSUMER, PRODUCER, Client, Clients
from broker.grpc_api.server import peer_address
from broker.messaging import MessagingService
from broker.model import MESSAGE_GROUP, Admits, Delivery, Message, MessageType, Resolution, Source
from broker.rocketmq_api.convert import filter_of, group_of, timestamp, to_rocketmq
from broker.rocketmq_api.protocol import load
from broker.rocketmq_api.session import TelemetrySession
from broker.rocketmq_api.status import status
from broker.transaction.outbox import closing_current_task
from broker.transaction.registry import ProducerRegistry
from broker.transaction.service import TransactionService

definition, service, service_grpc = load()
log = logging.getLogger(__name__)

_POLL = 0.1  # seconds between looks at an empty queue during long polling
MESSAGE_TYPES = {
    MessageType.NORMAL: definition.NORMAL,
    MessageType.FIFO: definition.FIFO,
    MessageType.DELAY: definition.DELAY,
    MessageType.TRANSACTION: definition.TRANSACTION,
}
# What a topic of no declared type accepts, as its route says.
ACCEPTED = list(MESSAGE_TYPES.values())
# Sent through MessagingService.send: its message says whether it is delayed or FIFO.
SENT_AS_IS = (definition.NORMAL, definition.FIFO, definition.DELAY, definition.MESSAGE_TYPE_UNSPECIFIED)


class RocketMQServicer(service_grpc.MessagingServiceServicer):  # type: ignore[name-defined]
    def __init__(
        self,
        messaging: MessagingService,
        transactions: TransactionService,
        registry: ProducerRegistry,
        clients: Clients,
        *,
        advertised: tuple[str, int] | None,
        bound: tuple[str, int],
        max_body_bytes: int,
        check_timeout: float,
    ) -> None:
        self._messaging = messaging
        self._transactions = transactions
        self._registry = registry
        self._clients = clients
        self._advertised = advertised
        self._bound = bound
        self._max_body_bytes = max_body_bytes
        self._check_timeout = check_timeout
        self._turns = itertools.count()

    async def QueryRoute(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        topic = request.topic.name
        try:
            found = self._messaging.topic(topic)
        except errors.HalfmqError as exc:
            return service.QueryRouteResponse(status=status(exc))
        accepts = ACCEPTED if found.message_type is None else [MESSAGE_TYPES[found.message_type]]
        broker = definition.Broker(name="halfmq", id=0, endpoints=self._route_endpoints(request.endpoints))
        return service.QueryRouteResponse(
            status=status(),
            message_queues=[
                definition.MessageQueue(
                    topic=definition.Resource(name=topic, resource_namespace=request.topic.resource_namespace),
                    id=queue_id,
                    permission=definition.READ_WRITE,
                    broker=broker,
                    accept_message_types=accepts,
                )
                for queue_id in range(found.queues)
            ],
        )

    def _route_endpoints(self, used: Any) -> Any:
        """Where a route sends the client: ``--advertised-address`` when set, else the endpoints the
        client itself connected through (as RocketMQ's proxy answers), so a remapped or forwarded
        port leads back to this broker; else the bound address."""
        if self._advertised is not None:
            host, port = self._advertised
        elif used.addresses:
            return used
        else:
            host, port = self._bound
        try:
            scheme = definition.IPv6 if ipaddress.ip_address(host).version == 6 else definition.IPv4
        except ValueError:
            scheme = definition.DOMAIN_NAME
        return definition.Endpoints(scheme=scheme, addresses=[definition.Address(host=host, port=port)])

    async def Heartbeat(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return service.HeartbeatResponse(status=status())

    async def SendMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        entries = []
        for message in request.messages:
            properties = message.system_properties
            core = Message(
                topic=message.topic.name,
                body=message.body,
                message_id=properties.message_id,
                keys=tuple(properties.keys),
                tags=properties.tag,
                properties=(
                    {**message.user_properties, MESSAGE_GROUP: properties.message_group}
                    if properties.HasField("message_group") else dict(message.user_properties)
                ),
                born_timestamp=properties.born_timestamp.ToMilliseconds(),
                deliver_at=(
                    properties.delivery_timestamp.ToMilliseconds()
                    if properties.HasField("delivery_timestamp") else None
                ),
            )  # fmt: skip
            refused = _group_refusal(properties)
            if refused is not None:
                entries.append(service.SendResultEntry(status=refused, message_id=properties.message_id))
                continue
            try:
                if properties.message_type == definition.TRANSACTION:
                    txn = await self._transactions.prepare(core, group_of(core.topic))
                    entries.append(
                        service.SendResultEntry(
                            status=status(),
                            message_id=txn.message_id,
                            transaction_id=txn.message_id,  # RocketMQ's: a transaction is named by its message id
                            offset=txn.half_offset,
                        )
                    )
                elif properties.message_type in SENT_AS_IS:
                    (stored,) = await self._messaging.send([core])
                    entries.append(
                        service.SendResultEntry(
                            status=status(),
                            message_id=stored.message_id,
                            offset=stored.queue_offset,
                            recall_handle=stored.recall_handle,
                        )
                    )
                else:
                    unsupported = definition.Status(
                        code=definition.UNSUPPORTED,
                        message="halfmq accepts NORMAL, FIFO, DELAY and TRANSACTION messages",
                    )
                    entries.append(service.SendResultEntry(status=unsupported, message_id=properties.message_id))
            except errors.HalfmqError as exc:
                entries.append(service.SendResultEntry(status=status(exc), message_id=properties.message_id))
        failed = next((e.status for e in entries if e.status.code != definition.OK), None)
        return service.SendMessageResponse(status=failed or status(), entries=entries)

    async def EndTransaction(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        resolution = {definition.COMMIT: Resolution.COMMIT, definition.ROLLBACK: Resolution.ROLLBACK}.get(
            request.resolution
        )
        if resolution is None:
            bad = definition.Status(code=definition.BAD_REQUEST, message="resolution must be COMMIT or ROLLBACK")
            return service.EndTransactionResponse(status=bad)
        source = Source.CHECK if request.source == definition.SOURCE_SERVER_CHECK else Source.CLIENT
        group = group_of(request.topic.name)
        try:
            transaction_id = (await self._transactions.transaction_of_message(request.transaction_id)).transaction_id
            if source is Source.CHECK:
                self._registry.answered(transaction_id)
                await self._transactions.answer_check(transaction_id, group, resolution)
            else:
                await self._transactions.end(transaction_id, group, resolution, source)
        except errors.HalfmqError as exc:
            return service.EndTransactionResponse(status=status(exc))
        return service.EndTransactionResponse(status=status())

    async def Telemetry(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
        client_id = dict(context.invocation_metadata() or ()).get("x-mq-client-id", "")
        if not client_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "x-mq-client-id metadata is required")
        lock = asyncio.Lock()
        make_outbox = closing_current_task(write_timeout=self._check_timeout)
        sessions: list[TelemetrySession] = []
        writers: list[asyncio.Task[None]] = []
        shown: set[Client] = set()
        try:
            while (command := await context.read()) is not grpc.aio.EOF:
                if not command.HasField("settings"):
                    continue
                settings = await self._settings(command.settings)
                known = {s.producer_group for s in sessions}
                for topic in command.settings.publishing.topics:  # registered before the reply: see serve_session
                    if group_of(topic.name) not in known:
                        session = TelemetrySession(topic.name, client_id, context, lock, make_outbox)
                        writers.append(asyncio.create_task(session.outbox.run()))
                        self._registry.register(session)
                        sessions.append(session)
                async with lock:
                    await context.write(service.TelemetryCommand(status=status(), settings=settings))
                self._show(shown, command.settings, client_id, peer_address(context))
        finally:
            for client in shown:
                self._clients.left(client)
            for session in sessions:
                self._registry.unregister(session)
            for writer in writers:
                writer.cancel()
            await asyncio.gather(*writers, return_exceptions=True)

    def _show(self, shown: set[Client], settings: Any, client_id: str, address: str) -> None:
        """List the client under the groups its settings name: a producer's topics' group, a
        consumer's group."""
        groups = [(PRODUCER, group_of(t.name)) for t in settings.publishing.topics]
        if settings.HasField("subscription"):
            groups.append((CONSUMER, settings.subscription.group.name))
        for role, group in groups:
            client = Client("rocketmq", group, role, client_id, address)
            if client not in shown:
                shown.add(client)
                self._clients.joined(client)

    async def QueryAssignment(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Every queue of the topic is assigned to every consumer: receipt handles keep them apart."""
        route = await self.QueryRoute(
            service.QueryRouteRequest(topic=request.topic, endpoints=request.endpoints), context
        )
        return service.QueryAssignmentResponse(
            status=route.status, assignments=[definition.Assignment(message_queue=q) for q in route.message_queues]
        )

    async def ReceiveMessage(self, request: Any, context: grpc.aio.ServicerContext) -> None:
        """Long-poll until messages arrive or the client's polling time (or deadline) is up.

        Like RocketMQ's proxy, the request's queue only names the broker: messages come from any
        queue of the topic, starting with a different queue each time so none is starved.
        """
        deadline = self._deadline(request.long_polling_timeout, context)
        try:
            wanted = filter_of(request.filter_expression)
            while True:
                received = await self._receive_any(request, None if wanted.everything else wanted.admits)
                if received or time.monotonic() + _POLL >= deadline:
                    break
                await asyncio.sleep(_POLL)
        except errors.HalfmqError as exc:
            await context.write(service.ReceiveMessageResponse(status=status(exc)))
            return
        if not received:
            empty = definition.Status(code=definition.MESSAGE_NOT_FOUND, message="no new message")
            await context.write(service.ReceiveMessageResponse(status=empty))
            return
        await context.write(service.ReceiveMessageResponse(status=status()))
        await context.write(service.ReceiveMessageResponse(delivery_timestamp=timestamp(int(time.time() * 1000))))
        for delivery in received:
            message = to_rocketmq(
                delivery.message,
                receipt_handle=delivery.receipt_handle,
                delivery_attempt=delivery.attempt,
                invisible_duration=request.invisible_duration,
            )
            await context.write(service.ReceiveMessageResponse(message=message))

    async def _receive_any(self, request: Any, admits: Admits | None) -> list[Delivery]:
        group, topic = request.group.name, request.message_queue.topic.name
        batch = request.batch_size or 32
        invisible = request.invisible_duration.ToMilliseconds() / 1000 or 30.0
        queues = self._messaging.queue_count(topic)
        start = next(self._turns)
        received: list[Delivery] = []
        for i in range(queues):
            received += await self._messaging.receive(
                group, topic, (start + i) % queues, batch - len(received), invisible, admits
            )
            if len(received) >= batch:
                break
        return received

    async def AckMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        results = []
        for entry in request.entries:
            try:
                await self._messaging.ack(request.group.name, request.topic.name, entry.receipt_handle)
                outcome = status()
            except errors.HalfmqError as exc:
                outcome = status(exc)
            results.append(
                service.AckMessageResultEntry(
                    message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=outcome
                )
            )
        failed = next((r.status for r in results if r.status.code != definition.OK), None)
        return service.AckMessageResponse(status=failed or status(), entries=results)

    async def ChangeInvisibleDuration(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            handle = await self._messaging.change_invisible(
                request.group.name,
                request.topic.name,
                request.receipt_handle,
                request.invisible_duration.ToMilliseconds() / 1000,
            )
        except errors.HalfmqError as exc:
            return service.ChangeInvisibleDurationResponse(status=status(exc))
        return service.ChangeInvisibleDurationResponse(status=status(), receipt_handle=handle)

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            await self._messaging.forward_to_dead_letters(
                request.group.name, request.topic.name, request.receipt_handle
            )
        except errors.HalfmqError as exc:
            return service.ForwardMessageToDeadLetterQueueResponse(status=status(exc))
        return service.ForwardMessageToDeadLetterQueueResponse(status=status())

    async def RecallMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """As RocketMQ answers: a handle due ahead is recalled, OK however often; one due already
        is refused (the broker's ILLEGAL_OPERATION, which its proxy reports as an internal error)."""
        try:
            message_id = await self._messaging.recall(request.topic.name, request.recall_handle)
        except errors.DelayedMessageNotFound as exc:
            if self._messaging.is_due(request.recall_handle):
                late = definition.Status(code=definition.INTERNAL_SERVER_ERROR, message=f"delivered already: {exc}")
                return service.RecallMessageResponse(status=late)
            return service.RecallMessageResponse(status=status())
        except errors.HalfmqError as exc:
            return service.RecallMessageResponse(status=status(exc))
        return service.RecallMessageResponse(status=status(), message_id=message_id)

    async def PullMessage(self, request: Any, context: grpc.aio.ServicerContext) -> None:
        """Messages of one queue from an offset, as the native pull reads them (long polling while
        the queue has none past it): a status, the messages that pass the filter, the next offset."""
        topic, queue_id = request.message_queue.topic.name, request.message_queue.id
        deadline = self._deadline(request.long_polling_timeout, context)
        try:
            wanted = filter_of(request.filter_expression)
            while True:
                pulled = await self._messaging.pull(topic, queue_id, request.offset, request.batch_size or 32)
                if pulled.messages or time.monotonic() + _POLL >= deadline:
                    break
                await asyncio.sleep(_POLL)
        except errors.HalfmqError as exc:
            await context.write(service.PullMessageResponse(status=status(exc)))
            return
        if not pulled.messages:
            empty = definition.Status(code=definition.MESSAGE_NOT_FOUND, message="no new message")
            await context.write(service.PullMessageResponse(status=empty))
        else:
            await context.write(service.PullMessageResponse(status=status()))
            for message in pulled.messages:
                if wanted.admits(message.tags, message.properties):
                    await context.write(service.PullMessageResponse(message=to_rocketmq(message)))
        await context.write(service.PullMessageResponse(next_offset=pulled.next_offset))

    async def QueryOffset(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        topic, queue_id = request.message_queue.topic.name, request.message_queue.id
        try:
            if request.query_offset_policy == definition.TIMESTAMP:
                offset = await self._messaging.offset_at(topic, queue_id, request.timestamp.ToMilliseconds())
            else:
                low, high = (await self._messaging.queue_offsets(topic))[queue_id]
                offset = low if request.query_offset_policy == definition.BEGINNING else high
        except errors.HalfmqError as exc:
            return service.QueryOffsetResponse(status=status(exc))
        except KeyError:
            return service.QueryOffsetResponse(status=status(errors.InvalidArgument(f"no queue {queue_id}")))
        return service.QueryOffsetResponse(status=status(), offset=offset)

    async def GetOffset(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        queue_id = request.message_queue.id
        try:
            committed = await self._messaging.consumer_offsets(request.group.name, request.message_queue.topic.name)
        except errors.HalfmqError as exc:
            return service.GetOffsetResponse(status=status(exc))
        if queue_id not in committed:
            missing = definition.Status(code=definition.OFFSET_NOT_FOUND, message="the group committed no offset here")
            return service.GetOffsetResponse(status=missing)
        return service.GetOffsetResponse(status=status(), offset=committed[queue_id])

    async def UpdateOffset(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        queue = request.message_queue
        try:
            await self._messaging.commit_consumer_offset(request.group.name, queue.topic.name, queue.id, request.offset)
        except errors.HalfmqError as exc:
            return service.UpdateOffsetResponse(status=status(exc))
        return service.UpdateOffsetResponse(status=status())

    def _deadline(self, long_polling: Any, context: grpc.aio.ServicerContext) -> float:
        """When a long poll gives up: the client's polling time (20 s if none), within its deadline."""
        remaining = context.time_remaining()
        budget = long_polling.ToMilliseconds() / 1000 or 20.0
        return time.monotonic() + min(budget, (remaining - 1.0) if remaining else budget)

    async def NotifyClientTermination(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return service.NotifyClientTerminationResponse(status=status())

    async def _settings(self, asked: Any) -> Any:
        """The client's settings completed with the broker's: body limit, timeout, and the retry
        policy: a producer's for its sends, a consumer's its group's (deliveries and backoff)."""
        settings = definition.Settings()
        settings.CopyFrom(asked)
        # publishing and subscription are one of a kind: setting one clears the other.
        if settings.client_type == definition.PRODUCER:
            settings.publishing.max_body_size = self._max_body_bytes
            settings.publishing.validate_message_type = True
        group = settings.subscription.group.name
        if group and settings.client_type in (definition.SIMPLE_CONSUMER, definition.PUSH_CONSUMER):
            policy = await self._messaging.retry_policy(group)
            settings.subscription.fifo = policy.fifo
            settings.backoff_policy.Clear()
            settings.backoff_policy.max_attempts = policy.max_attempts
            for step in policy.backoff:
                settings.backoff_policy.customized_backoff.next.add().FromMilliseconds(round(step * 1000))
        else:
            settings.backoff_policy.max_attempts = 3
            settings.backoff_policy.exponential_backoff.initial.FromMilliseconds(10)
            settings.backoff_policy.exponential_backoff.max.FromMilliseconds(1000)
            settings.backoff_policy.exponential_backoff.multiplier = 2.0
        if not settings.request_timeout.seconds:
            settings.request_timeout.seconds = 3
        if (
            settings.client_type == definition.SIMPLE_CONSUMER
            and not settings.subscription.long_polling_timeout.seconds
        ):
            settings.subscription.long_polling_timeout.seconds = 20
        return settings


def _group_refusal(properties: Any) -> Any:
    """ILLEGAL_MESSAGE_GROUP for a FIFO message without a message group, or one of another type
    with one; else None."""
    grouped = properties.HasField("message_group")
    if properties.message_type not in MESSAGE_TYPES.values() or grouped == (properties.message_type == definition.FIFO):
        return None
    text = "only FIFO messages have a message group" if grouped else "a FIFO message needs a message group"
    return definition.Status(code=definition.ILLEGAL_MESSAGE_GROUP, message=text)


async def _unimplemented(self: RocketMQServicer, request: Any, context: grpc.aio.ServicerContext) -> None:
    await context.abort(grpc.StatusCode.UNIMPLEMENTED, "halfmq does not implement this RocketMQ 5 RPC")


# The generated base class answers with plain functions, which the asyncio server cannot run.
RocketMQServicer.SyncLiteSubscription = _unimplemented
