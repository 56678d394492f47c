"""The pull RPCs of ``halfmq.v1.Broker`` (Pull, PullColumns, GetQueueOffsets): what a pull process
serves, and what the broker's own servicer extends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from broker.grpc_api.convert import columns_to_pb, stored_to_pb
from broker.grpc_api.status import translate_errors
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
    async def PullColumns(self, request: pb.PullRequest, context: Any) -> pb.PullColumnsResponse:
        return columns_to_pb(
            await self._pulls.pull_columns(request.topic, request.queue_id, request.offset, request.max_messages)
        )

    @translate_errors
    async def GetQueueOffsets(self, request: pb.GetQueueOffsetsRequest, context: Any) -> pb.GetQueueOffsetsResponse:
        offsets = await self._pulls.queue_offsets(request.topic)
        return pb.GetQueueOffsetsResponse(
            queues=[pb.QueueOffsets(queue_id=q, min_offset=lo, max_offset=hi) for q, (lo, hi) in offsets.items()],
            pull_ports=self._pull_ports,
        )
