"""A small blocking client for the Spark source: queue ranges on the driver, pulls on executors.

Plain gRPC, no background threads. The driver opens a reader per call and closes it; the tasks of
a Python worker share one reader per broker (``shared_reader``), as Spark reuses workers. Broker
errors arrive as the SDK's typed errors.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import grpc

from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk.errors import from_rpc_error
from spark_consumer.offsets import Ranges

_OPTIONS = [("grpc.max_receive_message_length", 256 * 1024 * 1024)]


@dataclass(frozen=True)
class Connection:
    """How to reach the broker: ``host:port``, the PEM CA certificate that signed the broker's
    (TLS is on when given), and the broker's auth token, if it has one."""

    broker: str
    tls_ca: bytes | None = None
    token: str | None = None


class BrokerReader:
    def __init__(self, connection: Connection, *, timeout: float = 30.0) -> None:
        if connection.tls_ca is None:
            self._channel = grpc.insecure_channel(connection.broker, options=_OPTIONS)
        else:
            credentials = grpc.ssl_channel_credentials(connection.tls_ca)
            self._channel = grpc.secure_channel(connection.broker, credentials, options=_OPTIONS)
        self._stub = pb_grpc.BrokerStub(self._channel)
        self._timeout = timeout
        self._metadata = (("authorization", f"Bearer {connection.token}"),) if connection.token else ()

    def ranges(self, topics: tuple[str, ...]) -> Ranges:
        """``{topic: {queue: (min, max)}}``; raises TopicNotFound, HiddenTopic, BrokerUnavailable."""
        result = {}
        for topic in topics:
            reply = self._call(self._stub.GetQueueOffsets, pb.GetQueueOffsetsRequest(topic=topic))
            result[topic] = {q.queue_id: (q.min_offset, q.max_offset) for q in reply.queues}
        return result

    def pull(self, topic: str, queue_id: int, offset: int, max_messages: int) -> pb.PullResponse:
        request = pb.PullRequest(topic=topic, queue_id=queue_id, offset=offset, max_messages=max_messages)
        reply: pb.PullResponse = self._call(self._stub.Pull, request)
        return reply

    def pull_columns(self, topic: str, queue_id: int, offset: int, max_messages: int) -> pb.PullColumnsResponse:
        request = pb.PullRequest(topic=topic, queue_id=queue_id, offset=offset, max_messages=max_messages)
        reply: pb.PullColumnsResponse = self._call(self._stub.PullColumns, request)
        return reply

    def _call(self, rpc: grpc.UnaryUnaryMultiCallable, request: object) -> Any:
        try:
            return rpc(request, timeout=self._timeout, wait_for_ready=True, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from exc

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


_shared: dict[tuple[int, Connection], BrokerReader] = {}
_shared_lock = threading.Lock()


def shared_reader(connection: Connection) -> BrokerReader:
    """This process's reader for ``connection``, opened on first use and kept for the process's
    life (keyed by pid too: a forked child never uses its parent's channel)."""
    key = (os.getpid(), connection)
    with _shared_lock:
        reader = _shared.get(key)
        if reader is None:
            reader = _shared[key] = BrokerReader(connection)
        return reader
