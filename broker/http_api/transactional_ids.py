"""``/transactional-ids``: Kafka-model producers, their epochs and their transactions."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from broker.clock import to_ms
from broker.errors import TransactionalIdNotFound
from broker.http_api.context import AdminContext, admin_context
from broker.http_api.schemas import Limit, Offset, Page, TransactionalIdOut
from broker.model import TxnState

router = APIRouter(prefix="/transactional-ids", tags=["kafka-model transactions"])


@router.get("", response_model=Page[TransactionalIdOut])
async def list_transactional_ids(
    state: TxnState | None = None,
    limit: Limit = 100,
    offset: Offset = 0,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> Page[TransactionalIdOut]:
    """Every transactional id (or those whose current or last transaction is in ``state``), by id."""
    now_ms = to_ms(context.clock())
    found = [t for t in await context.kafka_txns.transactional_ids() if state is None or t.state is state]
    items = [TransactionalIdOut.of(t, now_ms) for t in found[offset : offset + limit]]
    return Page[TransactionalIdOut](items=items, total=len(found), limit=limit, offset=offset)


@router.get("/{transactional_id}", response_model=TransactionalIdOut)
async def transactional_id_detail(
    transactional_id: str,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> TransactionalIdOut:
    found = await context.kafka_txns.transactional_ids(transactional_id)
    if not found:
        raise TransactionalIdNotFound(f"no producer ever initialised transactional id {transactional_id!r}")
    return TransactionalIdOut.of(found[0], to_ms(context.clock()))
