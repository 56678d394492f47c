"""``/consumers``: committed consumer offsets and lag, and each group's retry policy."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response

from broker.http_api.context import AdminContext, admin_context
from broker.http_api.schemas import (
    ConsumerOut,
    GroupName,
    Limit,
    Offset,
    Page,
    ResendIn,
    ResetIn,
    ResetOut,
    ResetToOffset,
    RetryCountsOut,
    RetryPolicyIn,
    RetryPolicyOut,
    SendReceiptOut,
)
from broker.operators import OffsetTarget
from broker.retry import dead_letter_topic

router = APIRouter(prefix="/consumers", tags=["consumers"])


@router.get("", response_model=Page[ConsumerOut])
async def consumers(
    limit: Limit = 100,
    offset: Offset = 0,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> Page[ConsumerOut]:
    """Every consumer group's committed offset per queue, with lag = newest offset - committed."""
    page, total = await context.operators.consumer_progress(limit, offset)
    items = [
        ConsumerOut(
            group=p.group,
            topic=p.topic,
            queue_id=p.queue_id,
            offset=p.committed,
            max_offset=p.end,
            lag=max(p.end - p.committed, 0),
        )
        for p in page
    ]
    return Page[ConsumerOut](items=items, total=total, limit=limit, offset=offset)


@router.get("/retries", response_model=list[RetryCountsOut])
async def retries(context: AdminContext = Depends(admin_context)) -> list[RetryCountsOut]:  # noqa: B008
    """Every consumer group retrying messages or holding dead letters: how many of each."""
    counts = await context.operators.retry_counts()
    return [RetryCountsOut(group=g, retrying=r, dead_letters=d) for g, (r, d) in sorted(counts.items())]


@router.get("/{group}/retry-policy", response_model=RetryPolicyOut)
async def retry_policy(group: str, context: AdminContext = Depends(admin_context)) -> RetryPolicyOut:  # noqa: B008
    """How many times the group gets a message before it goes to its dead-letter topic, the
    backoff between deliveries its push consumers are told, and where its messages are: how
    many it is retrying, how many are in its dead-letter topic."""
    policy = await context.messaging.retry_policy(group)
    retrying, dead = (await context.operators.retry_counts()).get(group, (0, 0))
    return RetryPolicyOut(
        group=group,
        max_attempts=policy.max_attempts,
        backoff_seconds=list(policy.backoff),
        fifo=policy.fifo,
        dead_letter_topic=dead_letter_topic(group),
        retrying=retrying,
        dead_letters=dead,
    )


@router.put("/{group}/retry-policy", response_model=RetryPolicyOut)
async def set_retry_policy(
    group: str,
    policy: RetryPolicyIn,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> RetryPolicyOut:
    """Set the group's retry policy (what ``mqadmin updateSubGroup`` sets); consumers connected
    now get it when they next send their settings."""
    backoff = None if policy.backoff_seconds is None else tuple(policy.backoff_seconds)
    await context.messaging.set_retry_policy(group, policy.max_attempts, backoff, policy.fifo)
    return await retry_policy(group, context)


@router.post("/{group}/reset-offsets", response_model=ResetOut)
async def reset_offsets(group: GroupName, reset: ResetIn, context: AdminContext = Depends(admin_context)) -> ResetOut:  # noqa: B008
    """Move the group's committed offsets in every queue of a topic: to its EARLIEST or LATEST
    message, to an OFFSET (kept within each queue's range), or to the first message stored at or
    after a DATETIME (broker epoch ms). 409 while the group has live consumers, as Kafka refuses
    it; once they have left, its consumers read from the new offsets."""
    value = reset.offset if isinstance(reset, ResetToOffset) else getattr(reset, "timestamp", None)
    offsets = await context.operators.reset_offsets(group, reset.topic, OffsetTarget(reset.to, value))
    return ResetOut(group=group, topic=reset.topic, offsets=offsets)


@router.delete("/{group}", status_code=204)
async def delete_group(group: GroupName, context: AdminContext = Depends(admin_context)) -> Response:  # noqa: B008
    """Forget a consumer group: its committed offsets, deliveries and retry policy (its retry
    and dead-letter topics stay). 409 while it has live consumers, 404 if nothing of it is stored."""
    await context.operators.delete_group(group)
    return Response(status_code=204)


@router.post("/{group}/dead-letters/resend", response_model=list[SendReceiptOut])
async def resend_dead_letters(
    group: GroupName,
    resend: ResendIn,
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> list[SendReceiptOut]:
    """Send the group's dead letters (or the one of ``message_id``) back to their original
    topics as new messages, read again by every group of those topics; the dead letters stay."""
    placed = await context.operators.resend_dead_letters(group, resend.message_id)
    return [SendReceiptOut(message_id=p.message_id, topic=p.topic, queue_id=p.queue_id, queue_offset=p.queue_offset)
            for p in placed]  # fmt: skip
