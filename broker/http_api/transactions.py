"""``/transactions``: the half messages, their checks, and operator actions."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query

from broker.clock import to_ms
from broker.http_api.context import AdminContext, admin_context
from broker.http_api.schemas import CheckOut, Limit, Offset, Page, TransactionDetail, TransactionOut, transaction_out
from broker.model import Resolution, Transaction, TransactionState

router = APIRouter(prefix="/transactions", tags=["transactions"])
TransactionId = Annotated[str, Path(pattern="^[0-9a-f]{32}$", description="32 lowercase hex characters")]


def _out(context: AdminContext, txn: Transaction) -> dict[str, Any]:
    return transaction_out(
        txn,
        now_ms=to_ms(context.clock()),
        online=bool(context.registry.sessions(txn.producer_group)),
        policy=context.settings.check_policy,
    )


@router.get("", response_model=Page[TransactionOut])
async def list_transactions(
    state: TransactionState | None = Query(TransactionState.PENDING, description="filter by state; omit for PENDING"),  # noqa: B008
    limit: Limit = 100,
    offset: Offset = 0,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> Page[TransactionOut]:
    """Transactions of one state, oldest half message first (pending by default)."""
    items, total = await context.transactions.transactions(state, limit, offset)
    return Page[TransactionOut](
        items=[TransactionOut(**_out(context, t)) for t in items], total=total, limit=limit, offset=offset
    )


@router.get("/{transaction_id}", response_model=TransactionDetail)
async def transaction_detail(
    transaction_id: TransactionId,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> TransactionDetail:
    """One transaction with its message's metadata and every check delivered for it."""
    txn, half, checks = await context.transactions.detail(transaction_id)
    return TransactionDetail(
        **_out(context, txn),
        keys=list(half.keys),
        tags=half.tags,
        properties=dict(half.properties),
        body_size=len(half.body),
        checks=[CheckOut.of(c) for c in checks],
    )


@router.post("/{transaction_id}/commit", response_model=TransactionOut)
async def commit(transaction_id: TransactionId, context: AdminContext = Depends(admin_context)) -> TransactionOut:  # noqa: B008
    """Commit a pending transaction as an operator: its message becomes visible once."""
    await context.transactions.operator_end(transaction_id, Resolution.COMMIT)
    return TransactionOut(**_out(context, await context.transactions.transaction(transaction_id)))


@router.post("/{transaction_id}/rollback", response_model=TransactionOut)
async def rollback(transaction_id: TransactionId, context: AdminContext = Depends(admin_context)) -> TransactionOut:  # noqa: B008
    """Roll back a pending transaction as an operator: its message is never delivered."""
    await context.transactions.operator_end(transaction_id, Resolution.ROLLBACK)
    return TransactionOut(**_out(context, await context.transactions.transaction(transaction_id)))


@router.post("/{transaction_id}/resume", response_model=TransactionOut)
async def resume(transaction_id: TransactionId, context: AdminContext = Depends(admin_context)) -> TransactionOut:  # noqa: B008
    """Make a discarded transaction pending again, with its check count reset."""
    txn = await context.transactions.resume(transaction_id)
    return TransactionOut(**_out(context, txn))
