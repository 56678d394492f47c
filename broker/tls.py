"""TLS for the broker's three ports, from PEM files read once at start-up."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc


@dataclass(frozen=True)
class TlsFiles:
    """The broker's certificate chain and key; with ``client_ca``, clients must present a
    certificate it signed (mutual TLS)."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    def check(self) -> None:
        """Raise OSError or ssl.SSLError unless the files are readable PEM and the key fits."""
        self.server_context()

    def server_context(self) -> ssl.SSLContext:
        """A server's TLS context (the Kafka port's); with ``client_ca``, client certificates required."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        if self.client_ca is not None:
            context.load_verify_locations(self.client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    def grpc_credentials(self) -> grpc.ServerCredentials:
        client_ca = self.client_ca.read_bytes() if self.client_ca is not None else None
        return grpc.ssl_server_credentials(
            [(self.key.read_bytes(), self.cert.read_bytes())],
            root_certificates=client_ca,
            require_client_auth=client_ca is not None,
        )

    def uvicorn_options(self) -> dict[str, Any]:
        return {
            "ssl_certfile": str(self.cert),
            "ssl_keyfile": str(self.key),
            "ssl_ca_certs": None if self.client_ca is None else str(self.client_ca),
            "ssl_cert_reqs": ssl.CERT_NONE if self.client_ca is None else ssl.CERT_REQUIRED,
        }


def bind(server: grpc.aio.Server, address: str, tls: TlsFiles | None) -> int:
    """Add ``address`` to ``server``, with TLS when given; return the port bound."""
    if tls is None:
        return int(server.add_insecure_port(address))
    return int(server.add_secure_port(address, tls.grpc_credentials()))
