"""The async gRPC client every SDK class is built on: one channel, retries, typed errors."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk._batcher import Batcher
from producer_sdk._carrier import Carrier
from producer_sdk._retry import retryable, retrying
from producer_sdk.errors import from_item_error
from producer_sdk.message import MESSAGE_GROUP, Message, ReceivedMessage, SendReceipt

TlsCa = str | os.PathLike[str] | None  # the PEM file of the CA that signed the broker's certificate
_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    # Detect a dead broker or a broken path on an idle session stream (the broker allows pings every 10 s).
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.http2.ping_timeout_ms", 10_000),  # what current gRPC Core actually waits for a ping's answer
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]


class BrokerClient:
    """Calls the broker; every RPC of the protocol is idempotent, so unreachable-broker
    failures are retried with backoff until ``timeout`` seconds have passed."""

    def __init__(self, broker: str, *, timeout: float, token: str | None = None, tls_ca: TlsCa = None) -> None:
        """``tls_ca``: the PEM file of the CA that signed the broker's certificate; TLS is on when given."""
        if tls_ca is None:
            self._channel = grpc.aio.insecure_channel(broker, options=_CHANNEL_OPTIONS)
        else:
            credentials = grpc.ssl_channel_credentials(Path(tls_ca).read_bytes())
            self._channel = grpc.aio.secure_channel(broker, credentials, options=_CHANNEL_OPTIONS)
        self.broker_stub = pb_grpc.BrokerStub(self._channel)
        self.broker = broker
        self.timeout = timeout
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.carrier = Carrier(self)

    async def call(self, method: str, request: Any) -> Any:
        """Invoke the unary RPC ``method``; raise the typed error when it fails for good."""
        rpc = getattr(self.broker_stub, method)

        async def attempt(remaining: float) -> Any:
            try:
                return await rpc(request, timeout=remaining, wait_for_ready=True, metadata=self.metadata)
            except grpc.aio.AioRpcError as exc:
                raise retryable(exc) from exc

        return await retrying(attempt, broker=self.broker, timeout=self.timeout)

    async def call_batch(self, method: str, request: Any) -> list[Any]:
        """Invoke a batch RPC: per-item results in item order, a typed error for each refused item."""
        return item_results(await self.call(method, request))

    def batcher(self, rpc: BatchRpc | CarriedRpc, *, linger: float) -> Batcher[Any, Any]:
        """A Batcher for ``rpc``: on the Transact stream if it is carried there, else by its batch
        RPC (a lone item is a batch of one)."""

        async def send(items: list[Any]) -> list[Any]:
            if isinstance(rpc, CarriedRpc):
                return item_results(await self.carrier.call(rpc.field, rpc.wrap(items)))
            return await self.call_batch(rpc.batch, rpc.wrap(items))

        return Batcher(send, _byte_size, linger=linger)

    async def close(self) -> None:
        self.carrier.close()
        await self._channel.close()


def item_results(response: Any) -> list[Any]:
    """A batch reply's per-item results in item order, a typed error for each refused item."""
    return [
        outcome.result if outcome.WhichOneof("outcome") == "result" else from_item_error(outcome.error)
        for outcome in response.outcomes
    ]


@dataclass(frozen=True)
class BatchRpc:
    """A batch RPC: its name, and how to wrap items into its request."""

    batch: str
    wrap: Callable[[list[Any]], Any]


@dataclass(frozen=True)
class CarriedRpc:
    """A batch call carried on the Transact stream: its field there, and how to wrap items into it."""

    field: str
    wrap: Callable[[list[Any]], Any]


HALVES = CarriedRpc("halves", lambda items: pb.SendHalfMessagesRequest(items=items))
ENDS = CarriedRpc("ends", lambda items: pb.EndTransactionsRequest(items=items))
SENDS = BatchRpc("SendMessages", lambda items: pb.SendMessagesRequest(messages=items))


def _byte_size(item: Any) -> int:
    return int(item.ByteSize())


def message_to_pb(message: Message) -> pb.Message:
    return pb.Message(
        topic=message.topic,
        body=message.body,
        keys=list(message.keys),
        tags=message.tags,
        properties=(
            dict(message.properties)
            if message.message_group is None
            else {**message.properties, MESSAGE_GROUP: message.message_group}
        ),
        message_id=message.message_id,
        born_timestamp=int(time.time() * 1000),
        deliver_at=message.deliver_at or 0,
    )


def received_from_pb(message: pb.StoredMessage) -> ReceivedMessage:
    return ReceivedMessage(
        topic=message.topic,
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        message_id=message.message_id,
        transaction_id=message.transaction_id,
        keys=tuple(message.keys),
        tags=message.tags,
        properties=dict(message.properties),
        body=message.body,
        born_timestamp=message.born_timestamp,
        store_timestamp=message.store_timestamp,
    )


def receipt_from_pb(result: pb.SendResult) -> SendReceipt:
    return SendReceipt(
        message_id=result.message_id,
        topic=result.topic,
        queue_id=result.queue_id,
        queue_offset=result.queue_offset,
        recall_handle=result.recall_handle,
    )
