"""``/consumers``: committed consumer offsets and lag."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from broker.http_api.context import AdminContext, admin_context
from broker.http_api.schemas import ConsumerOut, Limit, Offset, Page

router = APIRouter(prefix="/consumers", tags=["consumers"])


@router.get("", response_model=Page[ConsumerOut])
def consumers(
    limit: Limit = 100,
    offset: Offset = 0,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> Page[ConsumerOut]:
    """Every consumer group's committed offset per queue, with lag = newest offset - committed."""
    groups = context.store.consumer_groups()
    result = []
    for group, topic, queue_id, committed in groups[offset : offset + limit]:
        _, high = context.store.queue_range(topic, queue_id)
        result.append(
            ConsumerOut(
                group=group,
                topic=topic,
                queue_id=queue_id,
                offset=committed,
                max_offset=high,
                lag=max(high - committed, 0),
            )
        )
    return Page[ConsumerOut](items=result, total=len(groups), limit=limit, offset=offset)
