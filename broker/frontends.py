"""What the broker starts and stops for each protocol: one small interface for every front end,
so ``app.Broker`` builds a list of them and serves each on its configured port."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

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
