"""``/clients``: the clients connected now, by protocol, with their producer and consumer groups."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from broker.http_api.context import AdminContext, admin_context
from broker.http_api.schemas import ClientOut

router = APIRouter(prefix="/clients", tags=["clients"])


@router.get("", response_model=list[ClientOut])
def clients(context: AdminContext = Depends(admin_context)) -> list[ClientOut]:  # noqa: B008
    """Every live client under each group it named: native producer sessions, RocketMQ 5 clients
    (their Telemetry stream), classic RocketMQ clients (their heartbeats) and members of Kafka
    consumer groups. Clients that hold no session (native and Kafka readers and producers) are
    not listed."""
    return [ClientOut.model_validate(client, from_attributes=True) for client in context.clients.listed()]
