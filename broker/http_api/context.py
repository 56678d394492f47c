"""What the admin API's routes need from the broker, injected through a FastAPI dependency."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from broker.clock import Clock
from broker.config import Settings
from broker.controls import TestControls
from broker.http_api.limits import token_matches
from broker.messaging import MessagingService
from broker.metrics import Metrics
from broker.store import Store
from broker.transaction.registry import ProducerRegistry
from broker.transaction.service import TransactionService


@dataclass(frozen=True)
class AdminContext:
    settings: Settings
    store: Store
    messaging: MessagingService
    transactions: TransactionService
    registry: ProducerRegistry
    metrics: Metrics
    clock: Clock
    controls: TestControls | None = None


def admin_context(request: Request) -> AdminContext:
    context: AdminContext = request.app.state.context
    return context


_bearer = HTTPBearer(auto_error=False)


def require_token(
    credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),  # noqa: B008
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> None:
    """Mutating calls need ``Authorization: Bearer <token>`` when the broker has an auth token."""
    expected = context.settings.auth_token
    if expected is None:
        return
    given = credentials.credentials if credentials else ""
    if not token_matches(f"Bearer {given}", expected):
        raise HTTPException(status_code=401, detail="a valid bearer token is required")
