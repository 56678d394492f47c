"""A bare gRPC echo server (grpc.aio, like the broker): the ceiling a broker RPC can reach here.

``Echo`` is a unary call; ``Stream`` echoes each message of a bidirectional stream, as the
producer's open session stream would carry requests and their answers.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator

import grpc


async def serve(port: int, service: str, handlers: dict[str, grpc.RpcMethodHandler], **options: int) -> None:
    """Serve ``handlers`` (raw bytes in and out) as ``service`` on 127.0.0.1:``port`` with channel
    ``options``, say "ready", and run until killed."""
    server = grpc.aio.server(options=[(f"grpc.{name}", value) for name, value in options.items()])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


async def main(port: int) -> None:
    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    async def stream(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        async for request in requests:
            yield request

    await serve(
        port,
        "bench.Echo",
        {"Echo": grpc.unary_unary_rpc_method_handler(echo), "Stream": grpc.stream_stream_rpc_method_handler(stream)},
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
