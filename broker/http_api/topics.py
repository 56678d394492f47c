"""``/topics``: list, create, delete, queue offsets, a topic's messages by time."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response
from fastapi import Path as FastApiPath

from broker.clock import to_ms
from broker.http_api.context import AdminContext, admin_context
from broker.http_api.schemas import (
    FoundOut,
    Limit,
    MessageIn,
    Offset,
    Page,
    QueueMessagesOut,
    QueueOut,
    SendReceiptOut,
    TopicCreated,
    TopicIn,
    TopicOut,
)
from broker.model import STORED, Found, Message, MessageType, Topic

router = APIRouter(prefix="/topics", tags=["topics"])


@router.get("", response_model=Page[TopicOut])
async def list_topics(
    limit: Limit = 100,
    offset: Offset = 0,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> Page[TopicOut]:
    """Real topics (system topics are hidden)."""
    topics = context.messaging.topics()
    delayed = await context.operators.delayed_by_topic()
    items = [topic_out(t, *delayed.get(t.name, (0, None))) for t in topics[offset : offset + limit]]
    return Page[TopicOut](items=items, total=len(topics), limit=limit, offset=offset)


def topic_out(topic: Topic, delayed: int = 0, next_due: int | None = None) -> TopicOut:
    return TopicOut(
        name=topic.name,
        queues=topic.queues,
        retention_seconds=topic.retention,
        message_type=None if topic.message_type is None else topic.message_type.value,
        delayed=delayed,
        next_due=next_due,
    )


@router.post("", response_model=TopicCreated, status_code=201)
async def create_topic(
    topic: TopicIn,
    response: Response,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> TopicCreated:
    """Create a topic (201); an existing one with the same queue count and message type answers
    200 (its retention set if one is given), another count or type 409."""
    kind = None if topic.message_type is None else MessageType(topic.message_type)
    created = await context.messaging.create_topic(topic.name, topic.queues, topic.retention_seconds, kind)
    if not created:
        response.status_code = 200
    return TopicCreated(**topic_out(context.messaging.topic(topic.name)).model_dump(), created=created)


@router.post("/{name}/messages", response_model=SendReceiptOut, status_code=201)
async def send_message(
    name: str,
    message: MessageIn,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> SendReceiptOut:
    """Send a normal (non-transactional) test message to a topic."""
    (stored,) = await context.messaging.send(
        [
            Message(
                topic=name,
                body=message.body.encode(),
                message_id=uuid.uuid4().hex,
                keys=tuple(message.keys),
                tags=message.tags,
                properties=message.properties,
                born_timestamp=to_ms(context.clock()),
            )
        ]
    )
    return SendReceiptOut(
        message_id=stored.message_id, topic=stored.topic, queue_id=stored.queue_id, queue_offset=stored.queue_offset
    )


@router.get("/{name}/messages", response_model=list[FoundOut])
async def browse_messages(
    name: str,
    since: Annotated[int | None, Query(ge=0, description="stored at or after, broker epoch ms")] = None,
    until: Annotated[int | None, Query(ge=0, description="stored before, broker epoch ms; default now")] = None,
    limit: Limit = 100,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> list[FoundOut]:
    """The topic's messages held or stored from ``since`` until before ``until``, newest first."""
    found = await context.operators.find(topic=name, since_ms=since, until_ms=until, limit=limit)
    return [FoundOut.of(f) for f in found]


@router.delete("/{name}", status_code=204)
async def delete_topic(name: str, context: AdminContext = Depends(admin_context)) -> Response:  # noqa: B008
    """Delete a topic with its messages, consumer offsets, deliveries and segments; their disk
    space is handed back. 409 ``TOPIC_IN_USE`` while a transaction or a delayed message of it is
    pending (nothing changes), 404 if it does not exist, 403 for a system topic."""
    await context.operators.delete_topic(name)
    return Response(status_code=204)


@router.get("/{name}/queues/{queue_id}/messages", response_model=QueueMessagesOut)
async def read_queue(
    name: str,
    queue_id: Annotated[int, FastApiPath(ge=0)],
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Limit = 100,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> QueueMessagesOut:
    """Up to ``limit`` committed messages of one queue from ``offset`` on, as a consumer reads
    them (what ``halfmq topics tail`` follows). 416 below the queue's low offset."""
    batch = await context.messaging.pull(name, queue_id, offset, limit)
    return QueueMessagesOut(
        messages=[FoundOut.of(Found(m, STORED)) for m in batch.messages],
        next_offset=batch.next_offset,
        min_offset=batch.min_offset,
        max_offset=batch.max_offset,
    )


@router.get("/{name}/queues", response_model=list[QueueOut])
async def queue_offsets(name: str, context: AdminContext = Depends(admin_context)) -> list[QueueOut]:  # noqa: B008
    """Per-queue offsets; ``max_offset`` is one past the newest message."""
    offsets = await context.messaging.queue_offsets(name)
    return [QueueOut(queue_id=q, min_offset=lo, max_offset=hi) for q, (lo, hi) in offsets.items()]
