"""Build (not run) the gRPC server: tests bind port 0 and read the port back."""

from __future__ import annotations

import grpc

from broker.controls import Faults
from broker.grpc_api.auth import token_interceptor
from broker.grpc_api.faults import FaultInterceptor
from broker.grpc_api.pulls import PullServicer, add_pull_handlers
from broker.model import MAX_WIRE_BYTES
from broker.tls import TlsFiles, bind

# Bodies up to the broker's own limit must reach the validation that names it.
TRANSPORT_LIMIT = MAX_WIRE_BYTES
# Ping idle connections every 20 s and drop a peer that does not answer within 10 s: a dead or
# frozen producer's session leaves the registry instead of waiting for checks. Clients may ping
# every 10 s (the SDK pings every 30 s).
KEEPALIVE_OPTIONS = [
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    # Current gRPC Core waits for a ping's answer for ping_timeout_ms (60 s by default), whatever
    # keepalive_timeout_ms says: the keepalive test showed it.
    ("grpc.http2.ping_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
]


def create_server(
    servicer: PullServicer,
    address: str,
    *,
    auth_token: str | None = None,
    tls: TlsFiles | None = None,
    faults: Faults | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Return an unstarted server for ``servicer`` bound to ``address`` (with ``tls``, TLS only)
    and the port it got; with ``auth_token``, every call must carry it; with ``faults`` (test
    controls on), calls suffer them."""
    interceptors = [token_interceptor(auth_token)] if auth_token else []
    server = grpc.aio.server(
        interceptors=interceptors + ([FaultInterceptor(faults)] if faults is not None else []),
        options=[
            ("grpc.max_receive_message_length", TRANSPORT_LIMIT),
            ("grpc.max_send_message_length", TRANSPORT_LIMIT),
            ("grpc.so_reuseport", 0),
            *KEEPALIVE_OPTIONS,
        ],
    )
    add_pull_handlers(servicer, server)
    return server, bind(server, address, tls)


def peer_address(context: grpc.aio.ServicerContext) -> str:
    """The client's host:port, from gRPC's peer name (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``)."""
    return str(context.peer()).partition(":")[2]
