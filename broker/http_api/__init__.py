"""The admin HTTP front end (FastAPI): JSON API, dashboard and Prometheus metrics."""

from broker.http_api.app import create_app, create_server
from broker.http_api.context import AdminContext

__all__ = ["AdminContext", "create_app", "create_server"]
