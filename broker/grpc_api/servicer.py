"""``halfmq.v1.Broker`` servicer: each RPC translates its request, calls the core, translates back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import grpc

from broker.batches import BatchService
from broker.clients import Clients
from broker.controls import Faults
from broker.errors import HalfmqError, InvalidArgument
from broker.grpc_api.convert import (
    appended_to_pb,
    columns_from_pb,
    end_to_pb,
    half_to_pb,
    message_from_pb,
    resolution_from_pb,
    send_result_to_pb,
    source_from_pb,
    topic_to_pb,
)
from broker.grpc_api.pulls import PullServicer
from broker.grpc_api.session import serve_session
from broker.grpc_api.status import translate_errors
from broker.grpc_api.transact import Call, serve_transact
from broker.kafka_txn import KafkaTxnService
from broker.messaging import MAX_BATCH, MessagingService
from broker.model import EndResult, OffsetInTxn, Resolution, Source, message_type_of
from broker.transaction.registry import ProducerRegistry
from broker.transaction.service import TransactionService
from halfmq_proto.v1 import halfmq_pb2 as pb


def item_outcomes(results: Sequence[object], outcome: Callable[..., Any], to_pb: Callable[[Any], Any]) -> list[Any]:
    """Per-item outcomes of a batch: each result converted, each core error as an ItemError.
    Anything else a batch item raised is a broker failure, raised for the whole call."""
    outcomes = []
    for result in results:
        if isinstance(result, HalfmqError):
            outcomes.append(outcome(error=pb.ItemError(code=result.code, message=str(result))))
        elif isinstance(result, BaseException):
            raise result
        else:
            outcomes.append(outcome(result=to_pb(result)))
    return outcomes


def check_batch(items: Sequence[object]) -> None:
    if not 1 <= len(items) <= MAX_BATCH:
        raise InvalidArgument(f"a batch holds 1 to {MAX_BATCH} items, got {len(items)}")


def _end_item(request: pb.EndTransactionRequest) -> tuple[str, str, Resolution, Source] | HalfmqError:
    """One end of a batch in core terms, or its refusal (a malformed resolution or source)."""
    try:
        return (
            request.transaction_id,
            request.producer_group,
            resolution_from_pb(request.resolution),
            source_from_pb(request.source),
        )
    except HalfmqError as exc:
        return exc


class BrokerServicer(PullServicer):
    def __init__(
        self,
        messaging: MessagingService,
        transactions: TransactionService,
        batches: BatchService,
        kafka_txns: KafkaTxnService,
        registry: ProducerRegistry,
        clients: Clients,
        *,
        check_timeout: float,
        pull_ports: Sequence[int] = (),
        faults: Faults | None = None,
    ) -> None:
        """``faults``: what carried calls suffer when the test controls are on (unary calls
        suffer them through the server's interceptor)."""
        super().__init__(messaging, pull_ports=pull_ports)
        self._messaging = messaging
        self._transactions = transactions
        self._batches = batches
        self._kafka_txns = kafka_txns
        self._registry = registry
        self._clients = clients
        self._check_timeout = check_timeout
        self._faults = faults

    @translate_errors
    async def SendBatch(self, request: pb.SendBatchRequest, context: Any) -> pb.SendBatchResponse:
        stored = await self._messaging.send([message_from_pb(m) for m in request.messages])
        return pb.SendBatchResponse(results=[send_result_to_pb(s) for s in stored])

    @translate_errors
    async def SendColumns(self, request: pb.SendColumnsRequest, context: Any) -> pb.SendColumnsResponse:
        return appended_to_pb(await self._messaging.send_columns(columns_from_pb(request.topic, request.messages)))

    @translate_errors
    async def SendMessages(self, request: pb.SendMessagesRequest, context: Any) -> pb.SendMessagesResponse:
        check_batch(request.messages)
        results = await self._messaging.send_each([message_from_pb(m) for m in request.messages])
        return pb.SendMessagesResponse(outcomes=item_outcomes(results, pb.SendMessageOutcome, send_result_to_pb))

    @translate_errors
    async def RecallMessage(self, request: pb.RecallMessageRequest, context: Any) -> pb.RecallMessageResponse:
        return pb.RecallMessageResponse(message_id=await self._messaging.recall(request.topic, request.recall_handle))

    @translate_errors
    async def SendHalfMessages(self, request: pb.SendHalfMessagesRequest, context: Any) -> pb.SendHalfMessagesResponse:
        return await self._send_halves(request)

    @translate_errors
    async def EndTransactions(self, request: pb.EndTransactionsRequest, context: Any) -> pb.EndTransactionsResponse:
        return await self._end_transactions(request)

    async def Transact(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
        calls: dict[str, tuple[str, Call]] = {
            "halves": ("SendHalfMessages", self._send_halves),
            "ends": ("EndTransactions", self._end_transactions),
        }
        await serve_transact(request_iterator, context, calls, self._faults)

    async def _send_halves(self, request: pb.SendHalfMessagesRequest) -> pb.SendHalfMessagesResponse:
        check_batch(request.items)
        results = await self._transactions.prepare_many(
            [(message_from_pb(i.message), i.producer_group) for i in request.items]
        )
        return pb.SendHalfMessagesResponse(outcomes=item_outcomes(results, pb.SendHalfMessageOutcome, half_to_pb))

    async def _end_transactions(self, request: pb.EndTransactionsRequest) -> pb.EndTransactionsResponse:
        check_batch(request.items)
        results = await self._end_many([_end_item(item) for item in request.items])
        return pb.EndTransactionsResponse(outcomes=item_outcomes(results, pb.EndTransactionOutcome, end_to_pb))

    @translate_errors
    async def PrepareColumns(self, request: pb.PrepareColumnsRequest, context: Any) -> pb.PrepareColumnsResponse:
        prepared = await self._batches.prepare(
            request.producer_group, request.batch_id, columns_from_pb(request.topic, request.messages)
        )
        return pb.PrepareColumnsResponse(
            range_id=prepared.range_id,
            queue_id=prepared.queue_id,
            first_offset=prepared.first_offset,
            end_offset=prepared.end_offset,
            already_stored=prepared.already_stored,
        )

    @translate_errors
    async def EndBatch(self, request: pb.EndBatchRequest, context: Any) -> pb.EndBatchResponse:
        ended = await self._batches.end(
            request.producer_group, request.batch_id, resolution_from_pb(request.resolution), list(request.range_ids)
        )
        return pb.EndBatchResponse(
            already_committed=ended.already_committed, committed=ended.committed, rolled_back=ended.rolled_back
        )

    @translate_errors
    async def InitTransactions(self, request: pb.InitTransactionsRequest, context: Any) -> pb.InitTransactionsResponse:
        started = await self._kafka_txns.init(request.transactional_id, request.transaction_timeout_seconds)
        return pb.InitTransactionsResponse(
            epoch=started.epoch, txn_number=started.txn_number, aborted_messages=started.aborted_messages
        )

    @translate_errors
    async def SendInTransaction(
        self, request: pb.SendInTransactionRequest, context: Any
    ) -> pb.SendInTransactionResponse:
        txn = request.txn
        messages = [message_from_pb(m) for m in request.messages]
        placed = await self._kafka_txns.send(txn.transactional_id, txn.epoch, txn.txn_number, messages)
        return pb.SendInTransactionResponse(results=[
            pb.SendResult(message_id=m.message_id, topic=m.topic, queue_id=queue_id, queue_offset=offset)
            for m, (queue_id, offset) in zip(messages, placed, strict=True)
        ])  # fmt: skip

    @translate_errors
    async def SendOffsetsToTransaction(
        self, request: pb.SendOffsetsToTransactionRequest, context: Any
    ) -> pb.SendOffsetsToTransactionResponse:
        txn = request.txn
        offsets = [OffsetInTxn(o.topic, o.queue_id, o.offset) for o in request.offsets]
        await self._kafka_txns.send_offsets(
            txn.transactional_id, txn.epoch, txn.txn_number, request.consumer_group, offsets
        )
        return pb.SendOffsetsToTransactionResponse()

    @translate_errors
    async def EndTxn(self, request: pb.EndTxnRequest, context: Any) -> pb.EndTxnResponse:
        txn = request.txn
        ended = await self._kafka_txns.end(txn.transactional_id, txn.epoch, txn.txn_number, request.commit)
        return pb.EndTxnResponse(already_ended=ended.already_ended, messages=ended.messages, offsets=ended.offsets)

    async def _end_many(
        self, items: list[tuple[str, str, Resolution, Source] | HalfmqError]
    ) -> list[EndResult | HalfmqError]:
        """End the well-formed items (an answer to a check tells the registry its session answered);
        the refused ones keep their error, in place."""
        valid = [item for item in items if not isinstance(item, HalfmqError)]
        for transaction_id, _, _, source in valid:
            if source is Source.CHECK:
                self._registry.answered(transaction_id)
        ended = iter(await self._transactions.end_many(valid))
        return [item if isinstance(item, HalfmqError) else next(ended) for item in items]

    async def ProducerSession(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
        await serve_session(
            context, self._registry, self._transactions, self._clients, check_timeout=self._check_timeout
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
        topic = request.topic
        retention = topic.retention_seconds if topic.HasField("retention_seconds") else None
        kind = message_type_of(topic.message_type) if topic.message_type else None
        created = await self._messaging.create_topic(topic.name, topic.queues, retention, kind)
        return pb.CreateTopicResponse(topic=topic_to_pb(self._messaging.topic(topic.name)), created=created)

    @translate_errors
    async def ListTopics(self, request: pb.ListTopicsRequest, context: Any) -> pb.ListTopicsResponse:
        return pb.ListTopicsResponse(topics=[topic_to_pb(t) for t in self._messaging.topics()])
