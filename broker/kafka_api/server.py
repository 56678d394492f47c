"""The Kafka protocol listener: size-prefixed request frames on a TCP (or TLS) socket, answered
in order, one at a time per connection, as a Kafka broker does.

A frame that cannot be a request (a size below a header's or above MAX_FRAME, a body that does
not decode), or a request of an API or version halfmq does not serve, closes its connection, as
Kafka's broker closes it; an ApiVersions request newer than halfmq's gets UNSUPPORTED_VERSION
with the versions halfmq serves, so the client can ask again. Other connections never notice. With an auth
token set, a connection must authenticate (SASL PLAIN, the token as password) before any API
but ApiVersions, SaslHandshake and SaslAuthenticate.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from typing import Any

from kafka import errors as kerr
from kafka.protocol.api_key import ApiKey

from broker.frontends import TcpFrontEnd
from broker.kafka_api.handlers import REQUESTS, VERSIONS, Connection, KafkaApis
from broker.metrics import Metrics

log = logging.getLogger(__name__)

MAX_FRAME = 100 * 1024 * 1024  # bytes: Kafka's socket.request.max.bytes
HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
OPEN_APIS = (ApiKey.ApiVersions, ApiKey.SaslHandshake, ApiKey.SaslAuthenticate)


class BadFrame(Exception):
    """A frame that is no request: the connection closes."""


class KafkaServer(TcpFrontEnd):
    def __init__(
        self, apis: KafkaApis, metrics: Metrics, *, auth_token: str | None, tls: ssl.SSLContext | None
    ) -> None:
        super().__init__(tls=tls)
        self._apis = apis
        self._metrics = metrics
        self._auth_token = auth_token

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("", 0)
        local = writer.get_extra_info("sockname") or ("", 0)
        connection = Connection(
            client_host=str(peer[0]), local=(str(local[0]), int(local[1])), authenticated=self._auth_token is None
        )
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                if not HEADER.size <= size <= MAX_FRAME:
                    raise BadFrame(f"a request frame of {size} bytes")
                frame = await reader.readexactly(size)
                with self.answering():
                    reply = await self._answer(frame, connection)
                if reply is not None:
                    writer.write(reply)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        except BadFrame as exc:
            log.info("closing the Kafka connection of %s: %s", connection.client_host, exc)
        except Exception:
            log.exception("closing the Kafka connection of %s: answering failed", connection.client_host)
        finally:
            writer.close()

    async def _answer(self, frame: bytes, connection: Connection) -> bytes | None:
        api_key, version, correlation_id = HEADER.unpack_from(frame)
        supported = VERSIONS.get(api_key)
        if supported is None or not supported[0] <= version <= supported[1]:
            if api_key == ApiKey.ApiVersions:  # a newer client's ApiVersions: reply in v0, listing ours
                reply = await self._apis.api_versions(None, connection)
                reply.error_code = kerr.UnsupportedVersionError.errno
                return _encode(reply, 0, correlation_id)
            raise BadFrame(f"API {api_key} version {version} is not served")
        request_class = REQUESTS[ApiKey(api_key)]
        try:
            request = request_class.decode(frame, version=version, header=True)
        except Exception as exc:  # kafka-python raises whatever its decoders meet
            raise BadFrame(f"an undecodable {ApiKey(api_key).name} v{version} request: {exc!r}") from None
        if not connection.authenticated and api_key not in OPEN_APIS:
            raise BadFrame(f"{ApiKey(api_key).name} before SASL authentication")
        reply = await self._apis.handlers[ApiKey(api_key)](request, connection)
        self._metrics.kafka_request(ApiKey(api_key).name)
        return None if reply is None else _encode(reply, version, correlation_id)


def _encode(reply: Any, version: int, correlation_id: int) -> bytes:
    reply.API_VERSION = version
    reply.with_header(correlation_id=correlation_id)
    return bytes(reply.encode(header=True, framed=True))
