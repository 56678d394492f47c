"""The admin HTTP app: JSON API, dashboard, Prometheus metrics. Built by ``create_app``, served by
``HttpServer`` in the broker's own event loop, next to the gRPC server."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from broker.errors import HalfmqError
from broker.http_api import consumers, controls, topics, transactions
from broker.http_api.context import AdminContext, admin_context
from broker.http_api.limits import TIMEOUT_KEEP_ALIVE, BoundedH11Protocol, RequestGate
from broker.http_api.schemas import Health, Stats
from broker.http_api.status import error_body, status_for

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
_HTTP_CODES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}


def create_app(context: AdminContext) -> FastAPI:
    app = FastAPI(
        title="halfmq admin API",
        version="1",
        description="Topics, pending half messages and their checks, operator actions, consumer lag.",
    )
    app.state.context = context
    for router in (topics.router, transactions.router, consumers.router, controls.router):
        app.include_router(router)

    @app.exception_handler(HalfmqError)
    async def core_error(request: Request, exc: HalfmqError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, str(exc)), status_code=status_for(exc))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed: %r", request.method, request.url.path, exc)
        return JSONResponse(error_body("INTERNAL", "the broker failed to handle the request"), status_code=500)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = [{"where": list(e["loc"]), "problem": e["msg"]} for e in exc.errors()]
        return JSONResponse(error_body("INVALID_ARGUMENT", "the request is malformed", details=details), 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, f"HTTP_{exc.status_code}")
        headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code, headers=headers)

    @app.get("/healthz", response_model=Health, tags=["system"])
    def healthz(context: AdminContext = Depends(admin_context)) -> Health:  # noqa: B008
        return Health(
            status="ok",
            pending_half_messages=context.store.pending_count(),
            producer_sessions=context.registry.session_count(),
        )

    @app.get("/stats", response_model=Stats, tags=["system"])
    def stats(context: AdminContext = Depends(admin_context)) -> Stats:  # noqa: B008
        """Counter totals for the dashboard's rate charts."""
        on_disk, used = context.store.usage()
        return Stats(
            time=context.clock(),
            pending_half_messages=context.store.pending_count(),
            totals=context.metrics.totals(),
            store_bytes=on_disk,
            store_used_bytes=used,
        )

    @app.get("/metrics", tags=["system"], response_class=Response)
    def metrics(context: AdminContext = Depends(admin_context)) -> Response:  # noqa: B008
        """Prometheus text exposition of the ``halfmq_*`` metrics."""
        return Response(generate_latest(context.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/", include_in_schema=False)
    def dashboard() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


class HttpServer(uvicorn.Server):
    """uvicorn inside the broker's loop: the broker, not uvicorn, owns SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    @property
    def port(self) -> int:
        """The bound port (the configured one, or the one the OS chose for port 0)."""
        return int(self.servers[0].sockets[0].getsockname()[1])


def create_server(app: FastAPI, host: str, port: int) -> HttpServer:
    """The HTTP server: bodies gated by ``RequestGate`` (auth and size before reading), connections
    capped and timed by ``BoundedH11Protocol``."""
    context: AdminContext = app.state.context
    settings = context.settings
    gated = RequestGate(app, token=settings.auth_token, max_body_bytes=2 * settings.max_body_bytes + 64 * 1024)
    config = uvicorn.Config(
        gated,
        host=host,
        port=port,
        log_level="warning",
        lifespan="off",
        http=BoundedH11Protocol,
        timeout_keep_alive=TIMEOUT_KEEP_ALIVE,
        **(settings.tls.uvicorn_options() if settings.tls else {}),
    )
    return HttpServer(config)
