"""Build (not run) the RocketMQ 5 front end's gRPC server."""

from __future__ import annotations

from collections.abc import Callable

import grpc

from broker.grpc_api.server import KEEPALIVE_OPTIONS, TRANSPORT_LIMIT
from broker.rocketmq_api.auth import signature_interceptor
from broker.rocketmq_api.protocol import load
from broker.rocketmq_api.servicer import RocketMQServicer
from broker.tls import TlsFiles, bind

_, _, service_grpc = load()


def create_server(
    make_servicer: Callable[[int], RocketMQServicer],
    address: str,
    *,
    auth_token: str | None = None,
    tls: TlsFiles | None = None,
) -> tuple[grpc.aio.Server, int]:
    """An unstarted server for the RocketMQ 5 front end, and the port it bound. The servicer is
    made once the port is known, because routes advertise it. With ``auth_token``, every call
    must be signed with it as the client's secret key; with ``tls``, the port serves TLS only."""
    server = grpc.aio.server(
        interceptors=[signature_interceptor(auth_token)] if auth_token else [],
        # No SO_REUSEPORT, as on the native port: a second broker must fail to bind 8081, not share it.
        options=[("grpc.max_receive_message_length", TRANSPORT_LIMIT), ("grpc.so_reuseport", 0), *KEEPALIVE_OPTIONS],
    )
    port = bind(server, address, tls)
    service_grpc.add_MessagingServiceServicer_to_server(make_servicer(port), server)
    return server, port
