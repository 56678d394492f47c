"""A remoting listener: frames on a TCP (or TLS) socket, each request answered by its code's
handler in a task of its own (as RocketMQ's processors answer, in any order, matched by
``opaque``), so a long-polling pull never holds up a send on the same connection.

A frame that cannot be a command (a length below 4 or above MAX_FRAME, a header that does not
parse) closes its connection, as RocketMQ's decoder closes it; an unknown code gets
REQUEST_CODE_NOT_SUPPORTED, and more than MAX_IN_FLIGHT requests at once SYSTEM_BUSY. Other
connections never notice. With a secret key, a request not signed with it (``acl.py``) gets
NO_PERMISSION, as RocketMQ's broker answers with ACL on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
from collections.abc import Awaitable, Callable, Mapping

from broker import errors
from broker.frontends import TcpFrontEnd
from broker.metrics import Metrics
from broker.remoting import acl
from broker.remoting.codes import Response
from broker.remoting.frame import MAX_FRAME, Command, FrameError, decode, encode

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 1024  # requests of one connection being answered at once


class Connection:
    """One client's connection: where its answers and the broker's one-way requests go, and what
    to undo when it closes."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        peer = writer.get_extra_info("peername") or ("", 0)
        local = writer.get_extra_info("sockname") or ("", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.local = (str(local[0]), int(local[1]))
        self.on_close: list[Callable[[], None]] = []
        self.closed = asyncio.Event()
        self.in_flight = 0

    def close(self) -> None:
        """Close the connection: its reader ends, and what ``on_close`` holds is undone."""
        self._writer.close()

    async def send(self, command: Command) -> None:
        """Write a command; raises ConnectionError once the connection is closed."""
        if self.closed.is_set():
            raise ConnectionError(f"the connection of {self.peer} is closed")
        self._writer.write(encode(command))
        await self._writer.drain()


Handler = Callable[[Command, Connection], Awaitable[Command | None]]


class RemotingServer(TcpFrontEnd):
    """Serves ``handlers`` (by request code) to every connection, to requests signed with
    ``secret_key`` when one is given; ``name`` goes in logs and metrics."""

    def __init__(
        self, name: str, handlers: Mapping[int, Handler], metrics: Metrics, *, tls: ssl.SSLContext | None,
        secret_key: str | None,
    ) -> None:  # fmt: skip
        super().__init__(tls=tls)
        self._name = name
        self._handlers = handlers
        self._metrics = metrics
        self._secret_key = secret_key

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection(writer)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                if not 4 <= size <= MAX_FRAME:
                    raise FrameError(f"a frame of {size} bytes")
                command = decode(await reader.readexactly(size))
                if command.is_response:
                    continue  # halfmq's requests to clients are one-way: nothing awaits an answer
                if connection.in_flight >= MAX_IN_FLIGHT:
                    busy = f"[{self._name}] {connection.in_flight} requests of this connection in flight"
                    await connection.send(command.answer(Response.SYSTEM_BUSY, busy))
                    continue
                connection.in_flight += 1
                self.track(asyncio.create_task(self._answer(command, connection)))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        except FrameError as exc:
            log.info("closing the %s connection of %s: %s", self._name, connection.peer, exc)
        except Exception:
            log.exception("closing the %s connection of %s", self._name, connection.peer)
        finally:
            connection.closed.set()
            for undo in connection.on_close:
                undo()
            writer.close()

    async def _answer(self, command: Command, connection: Connection) -> None:
        with self.answering():
            await self._reply(command, connection)

    async def _reply(self, command: Command, connection: Connection) -> None:
        handler = self._handlers.get(command.code)
        refused = None
        if self._secret_key is not None:
            refused = acl.refusal(command.fields, command.body, command.version, self._secret_key)
        try:
            if refused is not None:
                log.info("refused %s request %d of %s: %s", self._name, command.code, connection.peer, refused)
                reply: Command | None = command.answer(Response.NO_PERMISSION, refused)
            elif handler is None:
                reply = command.answer(
                    Response.REQUEST_CODE_NOT_SUPPORTED, f"[{self._name}] request type {command.code} not supported"
                )
            else:
                reply = await handler(command, connection)
                self._metrics.remoting_request(self._name, command.code)
        except errors.HalfmqError as exc:
            reply = command.answer(Response.SYSTEM_ERROR, str(exc))
        except Exception as exc:
            log.exception("%s request %d of %s failed", self._name, command.code, connection.peer)
            reply = command.answer(Response.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        finally:
            connection.in_flight -= 1
        if reply is not None and not command.oneway:
            with contextlib.suppress(ConnectionError):  # the client left: nobody to answer
                await connection.send(reply)
