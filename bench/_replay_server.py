"""A gRPC server that answers the Spark source without reading anything: what the path from the
broker's socket to Spark costs when reads cost nothing (bench/spark_ingest.py's ceiling of the
transport and the client).

    python -m bench._replay_server PORT REPLY_FILE OFFSETS_FILE

``GetQueueOffsets`` returns the serialised reply in OFFSETS_FILE and every ``PullColumns`` the one
in REPLY_FILE (a real reply of 1,024 messages taken from the broker), as bytes already serialised;
``ReadColumns`` streams that reply until the range's end, each with the next offset a reader moves to.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc

from bench._echo_server import serve
from halfmq_proto.v1 import halfmq_pb2 as pb


async def main(port: int, reply: bytes, offsets: bytes) -> None:
    count = pb.PullColumnsResponse.FromString(reply).count

    async def pull_columns(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return reply

    async def read_columns(request: pb.ReadColumnsRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        offset = request.offset
        while offset < request.end:
            offset = min(request.end, offset + count)
            # A field given twice takes its last value: the reply as stored, then its next offset.
            yield reply + pb.PullColumnsResponse(next_offset=offset).SerializeToString()

    async def queue_offsets(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return offsets

    await serve(
        port,
        "halfmq.v1.Broker",
        {
            "PullColumns": grpc.unary_unary_rpc_method_handler(pull_columns),
            "ReadColumns": grpc.unary_stream_rpc_method_handler(
                read_columns, request_deserializer=pb.ReadColumnsRequest.FromString
            ),
            "GetQueueOffsets": grpc.unary_unary_rpc_method_handler(queue_offsets),
        },
        max_send_message_length=64 * 1024 * 1024,
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), Path(sys.argv[2]).read_bytes(), Path(sys.argv[3]).read_bytes()))
