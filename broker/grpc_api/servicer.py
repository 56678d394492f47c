"""``halfmq.v1.Broker`` servicer: each RPC translates its request, calls the core, translates back."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from broker.errors import HalfmqError
from broker.grpc_api.convert import (
    STATES,
    message_from_pb,
    resolution_from_pb,
    send_result_to_pb,
    source_from_pb,
    stored_to_pb,
    topic_to_pb,
)
from broker.grpc_api.session import serve_session
from broker.grpc_api.status import ERROR_METADATA_KEY, status_for
from broker.messaging import MessagingService
from broker.model import Source
from broker.transaction.registry import ProducerRegistry
from broker.transaction.service import TransactionService
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc

R = TypeVar("R")
Handler = Callable[[Any, Any, grpc.aio.ServicerContext], Awaitable[R]]


def translate_errors(handler: Handler[R]) -> Handler[R]:
    """Turn a core error into its gRPC status, with the stable error code in trailing metadata."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> R:
        try:
            return await handler(self, request, context)
        except HalfmqError as exc:
            await context.abort(status_for(exc), str(exc), trailing_metadata=((ERROR_METADATA_KEY, exc.code),))
            raise  # unreachable: abort raises

    return wrapper


class BrokerServicer(pb_grpc.BrokerServicer):
    def __init__(
        self,
        messaging: MessagingService,
        transactions: TransactionService,
        registry: ProducerRegistry,
        *,
        check_timeout: float,
    ) -> None:
        self._messaging = messaging
        self._transactions = transactions
        self._registry = registry
        self._check_timeout = check_timeout

    @translate_errors
    async def SendMessage(self, request: pb.SendMessageRequest, context: Any) -> pb.SendMessageResponse:
        (stored,) = await self._messaging.send([message_from_pb(request.message)])
        return pb.SendMessageResponse(result=send_result_to_pb(stored))

    @translate_errors
    async def SendBatch(self, request: pb.SendBatchRequest, context: Any) -> pb.SendBatchResponse:
        stored = await self._messaging.send([message_from_pb(m) for m in request.messages])
        return pb.SendBatchResponse(results=[send_result_to_pb(s) for s in stored])

    @translate_errors
    async def SendHalfMessage(self, request: pb.SendHalfMessageRequest, context: Any) -> pb.SendHalfMessageResponse:
        txn = await self._transactions.prepare(message_from_pb(request.message), request.producer_group)
        return pb.SendHalfMessageResponse(
            transaction_id=txn.transaction_id, message_id=txn.message_id, half_offset=txn.half_offset
        )

    @translate_errors
    async def EndTransaction(self, request: pb.EndTransactionRequest, context: Any) -> pb.EndTransactionResponse:
        source = source_from_pb(request.source)
        if source is Source.CHECK:
            self._registry.answered(request.transaction_id)
        result = await self._transactions.end(
            request.transaction_id, request.producer_group, resolution_from_pb(request.resolution), source
        )
        return pb.EndTransactionResponse(state=STATES[result.state], already_resolved=result.already_resolved)

    async def ProducerSession(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
        await serve_session(context, self._registry, self._transactions, check_timeout=self._check_timeout)

    @translate_errors
    async def Pull(self, request: pb.PullRequest, context: Any) -> pb.PullResponse:
        batch = await self._messaging.pull(request.topic, request.queue_id, request.offset, request.max_messages)
        return pb.PullResponse(
            messages=[stored_to_pb(m) for m in batch.messages],
            next_offset=batch.next_offset,
            min_offset=batch.min_offset,
            max_offset=batch.max_offset,
        )

    @translate_errors
    async def GetQueueOffsets(self, request: pb.GetQueueOffsetsRequest, context: Any) -> pb.GetQueueOffsetsResponse:
        offsets = await self._messaging.queue_offsets(request.topic)
        return pb.GetQueueOffsetsResponse(
            queues=[pb.QueueOffsets(queue_id=q, min_offset=lo, max_offset=hi) for q, (lo, hi) in offsets.items()]
        )

    @translate_errors
    async def CommitConsumerOffset(
        self, request: pb.CommitConsumerOffsetRequest, context: Any
    ) -> pb.CommitConsumerOffsetResponse:
        await self._messaging.commit_consumer_offset(
            request.consumer_group, request.topic, request.queue_id, request.offset
        )
        return pb.CommitConsumerOffsetResponse()

    @translate_errors
    async def GetConsumerOffsets(
        self, request: pb.GetConsumerOffsetsRequest, context: Any
    ) -> pb.GetConsumerOffsetsResponse:
        return pb.GetConsumerOffsetsResponse(
            offsets=await self._messaging.consumer_offsets(request.consumer_group, request.topic)
        )

    @translate_errors
    async def CreateTopic(self, request: pb.CreateTopicRequest, context: Any) -> pb.CreateTopicResponse:
        created = await self._messaging.create_topic(request.topic.name, request.topic.queues)
        return pb.CreateTopicResponse(topic=request.topic, created=created)

    @translate_errors
    async def ListTopics(self, request: pb.ListTopicsRequest, context: Any) -> pb.ListTopicsResponse:
        return pb.ListTopicsResponse(topics=[topic_to_pb(t) for t in self._messaging.topics()])
