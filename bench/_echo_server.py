"""A bare gRPC echo server (grpc.aio, like the broker): the ceiling a broker RPC can reach here.

``Echo`` is a unary call; ``Stream`` echoes each message of a bidirectional stream, as the
producer's open session stream would carry requests and their answers.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator

import grpc


async def main(port: int) -> None:
    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    async def stream(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        async for request in requests:
            yield request

    handler = grpc.method_handlers_generic_handler(
        "bench.Echo",
        {"Echo": grpc.unary_unary_rpc_method_handler(echo), "Stream": grpc.stream_stream_rpc_method_handler(stream)},
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
