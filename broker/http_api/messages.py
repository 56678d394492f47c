"""``/messages``: find messages by key or id, and trace one (a topic's by time: ``/topics``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from broker.clock import to_ms
from broker.errors import MessageNotFound
from broker.http_api.context import AdminContext, admin_context
from broker.http_api.schemas import FoundOut, GroupTraceOut, Limit, TraceOut, TransactionOut, transaction_out
from broker.model import STORED, Found
from broker.operators import MAX_FOUND

router = APIRouter(prefix="/messages", tags=["messages"])


@router.get("", response_model=list[FoundOut])
async def find_by_key(
    key: str,
    topic: str | None = None,
    limit: Limit = 100,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> list[FoundOut]:
    """Messages held or stored one of whose keys is ``key`` (of ``topic`` only, if given), newest
    first. A search by key reads every message's keys: it takes as long as the store is large."""
    return [FoundOut.of(f) for f in await context.operators.find(key=key, topic=topic, limit=limit)]


@router.get("/{message_id}", response_model=list[FoundOut])
async def find_by_id(message_id: str, context: AdminContext = Depends(admin_context)) -> list[FoundOut]:  # noqa: B008
    """The messages with this id, held or stored, in any topic (retried sends are stored once
    per topic). 404 if there is none."""
    found = await context.operators.find(message_id=message_id, limit=MAX_FOUND)
    if not found:
        raise MessageNotFound(f"no message has id {message_id!r}")
    return [FoundOut.of(f) for f in found]


@router.get("/{message_id}/trace", response_model=TraceOut)
async def trace(message_id: str, context: AdminContext = Depends(admin_context)) -> TraceOut:  # noqa: B008
    """Where a message went: held or stored, its transaction, and for each consumer group of its
    topic its deliveries, retries, acknowledgement or dead letter. 404 if no message has the id."""
    found = await context.operators.trace(message_id)
    txn = found.transaction
    return TraceOut(
        message_id=found.message_id,
        found=[FoundOut.of(f) for f in found.found],
        transaction=None
        if txn is None
        else TransactionOut.model_validate(
            transaction_out(
                txn,
                now_ms=to_ms(context.clock()),
                online=bool(context.registry.sessions(txn.producer_group)),
                policy=context.settings.check_policy,
            )
        ),
        groups=[
            GroupTraceOut(
                group=g.group,
                state=g.state,
                attempts=g.attempts,
                copies=[FoundOut.of(Found(c, STORED)) for c in g.copies],
            )
            for g in found.groups
        ],
    )
