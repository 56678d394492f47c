"""The ports the broker listens on, checked before it writes anything.

A port another process holds would otherwise fail deep inside grpc or uvicorn, after the data
directory was created, with a traceback (and, for uvicorn inside the broker's loop, a crash at
exit). Binding each port once first lets the broker refuse to start with the flag to change.
"""

from __future__ import annotations

import errno
import socket

from broker.config import Settings


class PortUnavailable(Exception):
    """Raised when a port the settings name cannot be bound; the message names its flag."""


def wanted_ports(settings: Settings, *, rocketmq: bool) -> list[tuple[str, int]]:
    """``(flag, port)`` for every fixed port the broker will bind (port 0 takes a free one)."""
    ports = [
        ("--grpc-port", settings.grpc_port),
        ("--http-port", settings.http_port),
        ("--kafka-port", settings.kafka_port),
    ]
    if settings.auth_token is None:
        ports += [("--namesrv-port", settings.namesrv_port), ("--remoting-port", settings.remoting_port)]
    if rocketmq:
        ports.append(("--rocketmq-port", settings.rocketmq_port))
    if settings.pull_port:
        ports += [("--pull-port", settings.pull_port + i) for i in range(settings.pull_processes)]
    return [(flag, port) for flag, port in ports if port]


def check_ports(host: str, ports: list[tuple[str, int]]) -> None:
    """Bind and release each port on ``host`` as the servers will (SO_REUSEADDR, so a port whose
    old connections linger in TIME_WAIT counts as free). Raises PortUnavailable."""
    for flag, port in ports:
        try:
            addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except socket.gaierror as exc:
            raise PortUnavailable(f"--host {host}: cannot resolve it ({exc.strerror})") from exc
        for family, kind, proto, _, address in addresses:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind(address)
                except OSError as exc:
                    if exc.errno == errno.EADDRINUSE:
                        raise PortUnavailable(
                            f"{flag} {port}: the port is in use on {host}; stop what holds it or choose another"
                            f" port with {flag}"
                        ) from exc
                    raise PortUnavailable(f"{flag} {port}: cannot listen on {host}: {exc.strerror}") from exc
