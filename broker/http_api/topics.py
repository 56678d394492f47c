"""``/topics``: list, create, queue offsets."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Response

from broker.http_api.context import AdminContext, admin_context, require_token
from broker.http_api.schemas import MAX_OFFSET, Page, QueueOut, TopicCreated, TopicIn, TopicOut

router = APIRouter(prefix="/topics", tags=["topics"])


@router.get("", response_model=Page[TopicOut])
def list_topics(
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> Page[TopicOut]:
    """Real topics (system topics are hidden)."""
    topics = context.messaging.topics()
    items = [TopicOut(name=t.name, queues=t.queues) for t in topics[offset : offset + limit]]
    return Page[TopicOut](items=items, total=len(topics), limit=limit, offset=offset)


@router.post("", response_model=TopicCreated, status_code=201, dependencies=[Depends(require_token)])
async def create_topic(
    topic: TopicIn,
    response: Response,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> TopicCreated:
    """Create a topic (201); an existing one with the same queue count answers 200, another count 409."""
    created = await context.messaging.create_topic(topic.name, topic.queues)
    if not created:
        response.status_code = 200
    return TopicCreated(name=topic.name, queues=topic.queues, created=created)


@router.get("/{name}/queues", response_model=list[QueueOut])
def queue_offsets(name: str, context: AdminContext = Depends(admin_context)) -> list[QueueOut]:  # noqa: B008
    """Per-queue offsets; ``max_offset`` is one past the newest message."""
    offsets = context.messaging.queue_offsets(name)
    return [QueueOut(queue_id=q, min_offset=lo, max_offset=hi) for q, (lo, hi) in offsets.items()]
