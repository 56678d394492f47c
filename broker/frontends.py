"""What the broker starts and stops for each protocol: one small interface for every front end,
so ``app.Broker`` builds a list of them and serves each on its configured port."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import ssl
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import grpc

from broker.http_api.app import HttpServer


class FrontEnd(Protocol):
    async def start(self, host: str, port: int) -> int:
        """Serve on ``host``:``port`` (0: a free port); return the port bound."""

    async def stop(self, grace: float) -> None:
        """Stop serving: requests being answered get ``grace`` seconds to finish, then every
        connection closes."""


class GrpcFrontEnd:
    """A gRPC server, built once its address is known (``build`` returns it unstarted, and its port)."""

    def __init__(self, build: Callable[[str], tuple[grpc.aio.Server, int]]) -> None:
        self._build = build
        self._server: grpc.aio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        self._server, bound = self._build(f"{host}:{port}")
        await self._server.start()
        return bound

    async def stop(self, grace: float) -> None:
        if self._server is not None:
            await self._server.stop(grace)


class HttpFrontEnd:
    """uvicorn inside the broker's loop, built once its address is known."""

    def __init__(self, build: Callable[[str, int], HttpServer]) -> None:
        self._build = build
        self._server: HttpServer | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int) -> int:
        self._server = self._build(host, port)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():  # e.g. the port is taken: surface uvicorn's failure
                await self._task
                raise RuntimeError(f"the HTTP server could not start on port {port}")
            await asyncio.sleep(0.01)
        return self._server.port

    async def stop(self, grace: float) -> None:
        """uvicorn lets requests under way finish (its own timeout, not ``grace``)."""
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await asyncio.gather(self._task, return_exceptions=True)


class TcpFrontEnd(abc.ABC):
    """A front end on an asyncio TCP (or TLS) socket: ``serve`` answers each connection, in a task
    of its own, and marks each request it is answering with ``answering()``, so that ``stop``
    gives those the grace period before it closes every connection."""

    def __init__(self, *, tls: ssl.SSLContext | None) -> None:
        self._tls = tls
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._answering = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._connected, host, port, ssl=self._tls)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self, grace: float) -> None:
        if self._server is not None:
            self._server.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), grace)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def track(self, task: asyncio.Task[Any]) -> None:
        """Cancel ``task`` (one answering a request) when the front end stops."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        self._answering += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._answering -= 1
            if not self._answering:
                self._idle.set()

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.track(task)
        await self.serve(reader, writer)

    @abc.abstractmethod
    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer one connection until it closes."""
