"""``/consumers``: committed consumer offsets and lag."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from broker.http_api.context import AdminContext, admin_context
from broker.http_api.schemas import ConsumerOut

router = APIRouter(prefix="/consumers", tags=["consumers"])


@router.get("", response_model=list[ConsumerOut])
def consumers(context: AdminContext = Depends(admin_context)) -> list[ConsumerOut]:  # noqa: B008
    """Every consumer group's committed offset per queue, with lag = newest offset - committed."""
    result = []
    for group, topic, queue_id, offset in context.store.consumer_groups():
        _, high = context.store.queue_range(topic, queue_id)
        result.append(
            ConsumerOut(
                group=group, topic=topic, queue_id=queue_id, offset=offset, max_offset=high, lag=max(high - offset, 0)
            )
        )
    return result
