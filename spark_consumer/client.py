"""A small blocking client for the Spark source and sink: queue ranges on the driver, pulls and
exactly-once batches' ranges on executors, batch ends on the driver.

Plain gRPC, no background threads. The source's driver opens a client per call and closes it;
the tasks of a Python worker share one client per broker (``shared_client``), as Spark reuses
workers. Broker errors arrive as the SDK's typed errors.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from types import TracebackType
from typing import Any, Self

import grpc
import grpc.experimental
import pyarrow as pa

from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk.columns import CALLS_IN_FLIGHT, table_calls
from producer_sdk.errors import BrokerUnavailable, HalfmqError, from_item_error, from_rpc_error
from spark_consumer.offsets import Ranges

_OPTIONS = [
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    # A streamed call's replies are read in the caller's thread, with no thread of gRPC's beside it.
    (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, True),
]


@dataclass(frozen=True)
class Connection:
    """How to reach the broker: ``host:port``, the PEM CA certificate that signed the broker's
    (TLS is on when given), and the broker's auth token, if it has one."""

    broker: str
    tls_ca: bytes | None = None
    token: str | None = None


class BrokerClient:
    def __init__(self, connection: Connection, *, timeout: float = 30.0) -> None:
        if connection.tls_ca is None:
            self._channel = grpc.insecure_channel(connection.broker, options=_OPTIONS)
        else:
            credentials = grpc.ssl_channel_credentials(connection.tls_ca)
            self._channel = grpc.secure_channel(connection.broker, credentials, options=_OPTIONS)
        self._stub = pb_grpc.BrokerStub(self._channel)
        self._connection = connection
        self._timeout = timeout
        self._metadata = (("authorization", f"Bearer {connection.token}"),) if connection.token else ()

    def ranges(self, topics: tuple[str, ...]) -> Ranges:
        """``{topic: {queue: (min, max)}}``; raises TopicNotFound, HiddenTopic, BrokerUnavailable."""
        return self.offsets(topics)[0]

    def readers(self, topic: str) -> tuple[Connection, ...]:
        """Where pulls should go (see ``offsets``), asked with ``topic``'s offsets."""
        return self.offsets((topic,))[1]

    def offsets(self, topics: tuple[str, ...]) -> tuple[Ranges, tuple[Connection, ...]]:
        """``ranges``, and where pulls should go: the broker's pull processes when it runs any (on
        its host, with the same TLS and token), else the broker itself; from the same replies."""
        ranges: dict[str, dict[int, tuple[int, int]]] = {}
        ports: tuple[int, ...] = ()
        for topic in topics:
            reply = self._call(self._stub.GetQueueOffsets, pb.GetQueueOffsetsRequest(topic=topic))
            ranges[topic] = {q.queue_id: (q.min_offset, q.max_offset) for q in reply.queues}
            ports = tuple(reply.pull_ports)
        host = self._connection.broker.rsplit(":", 1)[0]
        readers = tuple(replace(self._connection, broker=f"{host}:{port}") for port in ports)
        return ranges, readers or (self._connection,)

    def pull(self, topic: str, queue_id: int, offset: int, max_messages: int) -> pb.PullResponse:
        request = pb.PullRequest(topic=topic, queue_id=queue_id, offset=offset, max_messages=max_messages)
        reply: pb.PullResponse = self._call(self._stub.Pull, request)
        return reply

    def pull_columns(self, topic: str, queue_id: int, offset: int, max_messages: int) -> pb.PullColumnsResponse:
        request = pb.PullRequest(topic=topic, queue_id=queue_id, offset=offset, max_messages=max_messages)
        reply: pb.PullColumnsResponse = self._call(self._stub.PullColumns, request)
        return reply

    def read_columns(
        self, topic: str, queue_id: int, offset: int, end: int, max_messages: int
    ) -> Iterator[pb.PullColumnsResponse]:
        """PullColumns' replies for ``[offset, end)`` on one call (``ReadColumns``): the broker
        reads the next while the caller takes the last. Stops after the reply that reaches
        ``end``, or after one that holds nothing and does not move (the queue's end). The
        timeout is the whole call's, so a caller reads a long range in parts."""
        request = pb.ReadColumnsRequest(
            topic=topic, queue_id=queue_id, offset=offset, end=end, max_messages=max_messages
        )
        call = self._stub.ReadColumns(request, timeout=self._timeout, wait_for_ready=True, metadata=self._metadata)
        try:
            yield from call
        except grpc.RpcError as exc:
            raise self._error(exc) from exc
        finally:
            call.cancel()

    def _ahead(self, rpc: grpc.UnaryUnaryMultiCallable, request: object) -> Callable[[], Any]:
        """``rpc`` called now; its reply taken by calling what this returns, which raises the SDK's
        error for a failed call."""
        call = rpc.future(request, timeout=self._timeout, wait_for_ready=True, metadata=self._metadata)

        def reply() -> Any:
            try:
                return call.result()
            except grpc.RpcError as exc:
                raise self._error(exc) from exc

        return reply

    def prepare_table(self, producer_group: str, batch_id: int, topic: str, table: pa.Table) -> list[int]:
        """Store the rows of ``table`` as messages of ``topic`` in open ranges of the group's
        batch (``Producer.send_table``'s columns, a few calls in flight); their range ids.
        Raises the SDK's error of the first refused row (the ranges stored stay open until the
        group's next EndBatch rolls them back)."""
        request = partial(pb.PrepareColumnsRequest, producer_group=producer_group, batch_id=batch_id, topic=topic)
        requests = (call for call, _ in table_calls(table, request))
        return [reply.range_id for reply in self._pipelined(self._stub.PrepareColumns, requests) if reply.range_id]

    def end_batch(
        self, producer_group: str, batch_id: int, range_ids: list[int], *, commit: bool
    ) -> pb.EndBatchResponse:
        """Commit ``range_ids`` as the group's batch (once: a recorded batch commits nothing
        more), or abort it; either way what is open of it and earlier batches is rolled back."""
        request = pb.EndBatchRequest(
            producer_group=producer_group,
            batch_id=batch_id,
            resolution=pb.COMMIT if commit else pb.ROLLBACK,
            range_ids=range_ids if commit else [],
        )
        reply: pb.EndBatchResponse = self._call(self._stub.EndBatch, request)
        return reply

    def send_table(self, topic: str, table: pa.Table) -> None:
        """Send the rows of ``table`` as plain messages of ``topic`` (``Producer.send_table``'s
        columns), a few calls in flight; raises the SDK's error of the first refused row."""
        requests = (call for call, _ in table_calls(table, partial(pb.SendColumnsRequest, topic=topic)))
        for reply in self._pipelined(self._stub.SendColumns, requests):
            _raise_refused_row(reply)

    def _pipelined(self, rpc: grpc.UnaryUnaryMultiCallable, requests: Iterable[object]) -> Iterator[Any]:
        """The replies of ``rpc`` to ``requests`` in order, CALLS_IN_FLIGHT calls sent ahead."""
        calls: deque[Callable[[], Any]] = deque()
        for request in requests:
            if len(calls) == CALLS_IN_FLIGHT:
                yield calls.popleft()()
            calls.append(self._ahead(rpc, request))
        while calls:
            yield calls.popleft()()

    def _call(self, rpc: grpc.UnaryUnaryMultiCallable, request: object) -> Any:
        try:
            return rpc(request, timeout=self._timeout, wait_for_ready=True, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise self._error(exc) from exc

    def _error(self, exc: grpc.RpcError) -> HalfmqError:
        """The SDK's typed error for a failed call; one that never reached the broker names it."""
        error = from_rpc_error(exc)
        if isinstance(error, BrokerUnavailable):
            return BrokerUnavailable(
                f"no answer from the broker at {self._connection.broker} within {self._timeout:g} s ({error});"
                " is it running there, and is the tlsCaFile option the broker's?",
                status=error.status,
            )
        return error

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _raise_refused_row(reply: pb.SendColumnsResponse) -> None:
    if reply.refused:
        refusal = reply.refused[0]
        error = from_item_error(refusal.error)
        raise type(error)(f"row {refusal.index} of a call: {error}", status=error.status)


_shared: dict[tuple[int, Connection], BrokerClient] = {}
_shared_lock = threading.Lock()


def shared_client(connection: Connection) -> BrokerClient:
    """This process's client for ``connection``, opened on first use and kept for the process's
    life (keyed by pid too: a forked child never uses its parent's channel)."""
    key = (os.getpid(), connection)
    with _shared_lock:
        reader = _shared.get(key)
        if reader is None:
            reader = _shared[key] = BrokerClient(connection)
        return reader
