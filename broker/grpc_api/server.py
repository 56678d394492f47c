"""Build (not run) the gRPC server: tests bind port 0 and read the port back."""

from __future__ import annotations

import grpc

from broker.grpc_api.auth import TokenInterceptor
from broker.grpc_api.servicer import BrokerServicer
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc

# Bodies up to the broker's own limit must reach the validation that names it.
_MAX_MESSAGE = 64 * 1024 * 1024


def create_server(
    servicer: BrokerServicer, address: str, *, auth_token: str | None = None
) -> tuple[grpc.aio.Server, int]:
    """Return an unstarted server for ``servicer`` bound to ``address`` and the port it got;
    with ``auth_token``, every call must carry it."""
    server = grpc.aio.server(
        interceptors=[TokenInterceptor(auth_token)] if auth_token else [],
        options=[
            ("grpc.max_receive_message_length", _MAX_MESSAGE),
            ("grpc.max_send_message_length", _MAX_MESSAGE),
            ("grpc.so_reuseport", 0),
        ],
    )
    pb_grpc.add_BrokerServicer_to_server(servicer, server)
    port = server.add_insecure_port(address)
    return server, port
