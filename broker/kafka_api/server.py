"""The Kafka protocol listener: size-prefixed request frames on a TCP (or TLS) socket, answered
in order per connection, as a Kafka broker does. A Kafka broker also handles them one at a time;
here plain produces that follow one another (``overlaps``: no transactional id, each partition's
records one store write) are handled together, up to IN_FLIGHT of them, as a producer pipelines
them: their writes reach the store's writer in the order they came, and join one group commit
instead of one each. Any other request starts once every earlier one is answered, and none after
it starts before it is.

A frame that cannot be a request (a size below a header's or above MAX_FRAME, a body that does
not decode), or a request of an API or version halfmq does not serve, closes its connection, as
Kafka's broker closes it; an ApiVersions request newer than halfmq's gets UNSUPPORTED_VERSION
with the versions halfmq serves, so the client can ask again. Other connections never notice. With an auth
token set, a connection must authenticate (SASL PLAIN, the token as password) before any API
but ApiVersions, SaslHandshake and SaslAuthenticate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
from dataclasses import dataclass
from typing import Any

from kafka import errors as kerr
from kafka.protocol.api_key import ApiKey

from broker.frontends import TcpFrontEnd
from broker.kafka_api.handlers import REQUESTS, VERSIONS, Connection, KafkaApis, overlaps
from broker.metrics import Metrics

log = logging.getLogger(__name__)

MAX_FRAME = 100 * 1024 * 1024  # bytes: Kafka's socket.request.max.bytes
HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
OPEN_APIS = (ApiKey.ApiVersions, ApiKey.SaslHandshake, ApiKey.SaslAuthenticate)
# Produces of a connection handled at once: the Java producer's max.in.flight.requests.per.connection.
IN_FLIGHT = 5


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
        flight = _InFlight()
        reading = asyncio.current_task()
        assert reading is not None
        sender = asyncio.create_task(self._send(flight, writer, connection, reading))
        alongside = False  # whether the requests in flight may have another beside them
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                if not HEADER.size <= size <= MAX_FRAME:
                    raise BadFrame(f"a request frame of {size} bytes")
                request = self._decode(await reader.readexactly(size))
                joins = request.body is not None and overlaps(request.api_key, request.body)
                if not (joins and alongside):
                    await flight.answered(sender)
                if not connection.authenticated and request.api_key not in OPEN_APIS:
                    raise BadFrame(f"{request.api_key.name} before SASL authentication")
                alongside = joins
                if joins:
                    await flight.add(asyncio.create_task(self._answer(request, connection)))
                elif (reply := await self._answer(request, connection)) is not None:  # nothing else in flight
                    writer.write(reply)
                    await writer.drain()
        except asyncio.IncompleteReadError:  # the peer sent all it will: what it sent is answered
            with contextlib.suppress(ConnectionError):
                await flight.answered(sender)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except BadFrame as exc:
            log.info("closing the Kafka connection of %s: %s", connection.client_host, exc)
            with contextlib.suppress(ConnectionError):
                await flight.answered(sender)
        except Exception:
            log.exception("closing the Kafka connection of %s: answering failed", connection.client_host)
        finally:
            sender.cancel()
            flight.cancel()
            writer.close()

    async def _send(
        self, flight: _InFlight, writer: asyncio.StreamWriter, connection: Connection, reading: asyncio.Task[Any]
    ) -> None:
        """Write each request's reply, in the order the requests came. When an answer fails, or
        the peer is gone, the connection closes: ``reading`` (its requests) is cancelled."""
        try:
            while True:
                answer = await flight.tasks.get()
                try:
                    reply = await answer
                    if reply is not None:
                        writer.write(reply)
                        await writer.drain()
                finally:
                    flight.done()
        except ConnectionError:
            reading.cancel()
        except Exception:
            log.exception("closing the Kafka connection of %s: answering failed", connection.client_host)
            reading.cancel()

    def _decode(self, frame: bytes) -> _Request:
        """The request a frame holds; raises BadFrame. ``body`` is None for an ApiVersions request
        newer than halfmq's."""
        api_key, version, correlation_id = HEADER.unpack_from(frame)
        supported = VERSIONS.get(api_key)
        if supported is None or not supported[0] <= version <= supported[1]:
            if api_key == ApiKey.ApiVersions:
                return _Request(ApiKey.ApiVersions, version, correlation_id, None)
            raise BadFrame(f"API {api_key} version {version} is not served")
        try:
            body = REQUESTS[ApiKey(api_key)].decode(frame, version=version, header=True)
        except Exception as exc:  # kafka-python raises whatever its decoders meet
            raise BadFrame(f"an undecodable {ApiKey(api_key).name} v{version} request: {exc!r}") from None
        return _Request(ApiKey(api_key), version, correlation_id, body)

    async def _answer(self, request: _Request, connection: Connection) -> bytes | None:
        with self.answering():
            if request.body is None:  # a newer client's ApiVersions: reply in v0, listing ours
                reply = await self._apis.api_versions(None, connection)
                reply.error_code = kerr.UnsupportedVersionError.errno
                return _encode(reply, 0, request.correlation_id)
            reply = await self._apis.handlers[request.api_key](request.body, connection)
        self._metrics.kafka_request(request.api_key.name)
        return None if reply is None else _encode(reply, request.version, request.correlation_id)


@dataclass(frozen=True)
class _Request:
    api_key: ApiKey
    version: int
    correlation_id: int
    body: Any


class _InFlight:
    """A connection's requests being answered, in the order they came (IN_FLIGHT at most)."""

    def __init__(self) -> None:
        self.tasks: asyncio.Queue[asyncio.Task[bytes | None]] = asyncio.Queue(IN_FLIGHT)
        self._unanswered = 0
        self._none = asyncio.Event()
        self._none.set()

    async def add(self, answer: asyncio.Task[bytes | None]) -> None:
        self._unanswered += 1
        self._none.clear()
        await self.tasks.put(answer)

    def done(self) -> None:
        """One more reply written (or given up)."""
        self._unanswered -= 1
        if not self._unanswered:
            self._none.set()

    async def answered(self, sender: asyncio.Task[None]) -> None:
        """Wait until every request so far is answered; raises ConnectionError if the connection
        closed first (an answer failed)."""
        if self._unanswered:
            waiting = asyncio.ensure_future(self._none.wait())
            try:
                await asyncio.wait({waiting, sender}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiting.cancel()
        if sender.done():
            raise ConnectionError("the connection closed")

    def cancel(self) -> None:
        while not self.tasks.empty():
            self.tasks.get_nowait().cancel()


def _encode(reply: Any, version: int, correlation_id: int) -> bytes:
    reply.API_VERSION = version
    reply.with_header(correlation_id=correlation_id)
    return bytes(reply.encode(header=True, framed=True))
