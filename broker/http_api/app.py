"""The admin HTTP app: JSON API, dashboard, Prometheus metrics. Built by ``create_app``, served by
``HttpServer`` in the broker's own event loop, next to the gRPC server."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import fastapi_offline
import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.security import HTTPBearer
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from broker.clock import to_ms
from broker.errors import HalfmqError
from broker.http_api import (
    clients,
    consumers,
    controls,
    kafka_groups,
    messages,
    topics,
    transactional_ids,
    transactions,
)
from broker.http_api.context import AdminContext, admin_context
from broker.http_api.limits import TIMEOUT_KEEP_ALIVE, BoundedH11Protocol, RequestGate
from broker.http_api.schemas import Health, Stats
from broker.http_api.status import error_body, status_for

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
DOCS_ASSETS = "/docs/assets"
# Paths that hold no data (the dashboard's page, the API's description and its viewer) and the
# health probe answer without the auth token.
OPEN_PATHS = frozenset(
    ["/", "/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect"]
    + [f"/static/{path.name}" for path in STATIC.iterdir()]
    + [f"{DOCS_ASSETS}/{path.name}" for path in (Path(fastapi_offline.__file__).parent / "static").iterdir()]
)
_HTTP_CODES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}


def create_app(context: AdminContext) -> FastAPI:
    app = fastapi_offline.FastAPIOffline(  # /docs from the package's own assets: it works offline
        static_url=DOCS_ASSETS,
        redoc_url=None,  # its page fetches a logo from a CDN
        title="halfmq admin API",
        version="1",
        description="Topics, pending half messages and their checks, operator actions, Kafka-model transactional"
        " ids, consumer lag. With an auth"
        " token set, every path but /healthz needs `Authorization: Bearer <token>`.",
        dependencies=[Depends(HTTPBearer(auto_error=False))],  # shows the token field in /docs; RequestGate checks it
    )
    app.state.context = context
    routers = (topics, messages, transactions, transactional_ids, kafka_groups, consumers, clients, controls)
    for module in routers:
        app.include_router(module.router)

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
    async def healthz(context: AdminContext = Depends(admin_context)) -> Health:  # noqa: B008
        return Health(
            status="ok",
            pending_half_messages=await context.transactions.pending_count(),
            producer_sessions=context.registry.session_count(),
            ports=context.ports(),
        )

    @app.get("/stats", response_model=Stats, tags=["system"])
    async def stats(context: AdminContext = Depends(admin_context)) -> Stats:  # noqa: B008
        """Counter totals for the dashboard's rate charts."""
        on_disk, used = await context.operators.usage()
        return Stats(
            time=to_ms(context.clock()),
            pending_half_messages=await context.transactions.pending_count(),
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
    open_paths = OPEN_PATHS | {"/metrics"} if settings.metrics_open else OPEN_PATHS
    gated = RequestGate(
        app,
        token=settings.auth_token,
        max_body_bytes=2 * settings.max_body_bytes + 64 * 1024,
        open_paths=open_paths,
    )
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
