"""The pull RPCs of ``halfmq.v1.Broker`` (Pull, PullColumns, ReadColumns, GetQueueOffsets): what a
pull process serves, and what the broker's own servicer extends."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc

from broker.grpc_api.convert import columns_to_pb, packed_reply, stored_to_pb
from broker.grpc_api.status import translate_errors, translate_stream_errors
from broker.model import Packed, PullBatch, QueueColumns
from broker.pulls import PullService
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc


class PullServicer(pb_grpc.BrokerServicer):
    """Serves the pull RPCs from ``pulls``; every other RPC is UNIMPLEMENTED. ``pull_ports`` are
    advertised in GetQueueOffsets' replies: where the broker's pull processes listen."""

    def __init__(self, pulls: PullService, *, pull_ports: Sequence[int] = ()) -> None:
        self._pulls = pulls
        self._pull_ports = list(pull_ports)

    @translate_errors
    async def Pull(self, request: pb.PullRequest, context: Any) -> pb.PullResponse:
        batch = await self._pulls.pull(request.topic, request.queue_id, request.offset, request.max_messages)
        return pb.PullResponse(
            messages=[stored_to_pb(m) for m in batch.messages],
            next_offset=batch.next_offset,
            min_offset=batch.min_offset,
            max_offset=batch.max_offset,
        )

    @translate_errors
    async def PullColumns(self, request: pb.PullRequest, context: Any) -> bytes:
        """The reply serialised: a packed segment goes out as it is stored (``add_pull_handlers``)."""
        batch = await self._pulls.pull_columns(request.topic, request.queue_id, request.offset, request.max_messages)
        return _serialised(batch)

    @translate_stream_errors
    async def ReadColumns(self, request: pb.ReadColumnsRequest, context: Any) -> AsyncIterator[bytes]:
        """PullColumns' replies for ``[offset, end)``, serialised (``add_pull_handlers``)."""
        read = self._pulls.read_columns(request.topic, request.queue_id, request.offset, request.end,
                                        request.max_messages)  # fmt: skip
        async for batch in read:
            yield _serialised(batch)

    @translate_errors
    async def GetQueueOffsets(self, request: pb.GetQueueOffsetsRequest, context: Any) -> pb.GetQueueOffsetsResponse:
        offsets = await self._pulls.queue_offsets(request.topic)
        return pb.GetQueueOffsetsResponse(
            queues=[pb.QueueOffsets(queue_id=q, min_offset=lo, max_offset=hi) for q, (lo, hi) in offsets.items()],
            pull_ports=self._pull_ports,
        )


def _serialised(batch: PullBatch[QueueColumns | Packed]) -> bytes:
    """A columnar pull's reply; a packed segment as it is stored."""
    if isinstance(batch.messages, Packed):
        return packed_reply(batch.messages, batch.min_offset, batch.max_offset)
    reply: bytes = columns_to_pb(
        PullBatch(batch.messages, batch.next_offset, batch.min_offset, batch.max_offset)
    ).SerializeToString()
    return reply


def add_pull_handlers(servicer: PullServicer, server: grpc.aio.Server) -> None:
    """Serve ``servicer`` on ``server``; PullColumns' and ReadColumns' replies, already serialised,
    go out as they are."""
    pb_grpc.add_BrokerServicer_to_server(servicer, server)
    server.add_registered_method_handlers(  # the later registration of a method wins
        "halfmq.v1.Broker",
        {
            "PullColumns": grpc.unary_unary_rpc_method_handler(
                servicer.PullColumns, request_deserializer=pb.PullRequest.FromString, response_serializer=_as_is
            ),
            "ReadColumns": grpc.unary_stream_rpc_method_handler(
                servicer.ReadColumns, request_deserializer=pb.ReadColumnsRequest.FromString, response_serializer=_as_is
            ),
        },
    )


def _as_is(reply: bytes) -> bytes:
    return reply
