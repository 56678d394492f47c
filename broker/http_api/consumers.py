"""``/consumers``: committed consumer offsets and lag, and each group's retry policy."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from broker.http_api.context import AdminContext, admin_context
from broker.http_api.schemas import (
    ConsumerOut,
    Limit,
    Offset,
    Page,
    RetryCountsOut,
    RetryPolicyIn,
    RetryPolicyOut,
)
from broker.retry import dead_letter_topic

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


@router.get("/retries", response_model=list[RetryCountsOut])
def retries(context: AdminContext = Depends(admin_context)) -> list[RetryCountsOut]:  # noqa: B008
    """Every consumer group retrying messages or holding dead letters: how many of each."""
    counts = context.store.retry_counts()
    return [RetryCountsOut(group=g, retrying=r, dead_letters=d) for g, (r, d) in sorted(counts.items())]


@router.get("/{group}/retry-policy", response_model=RetryPolicyOut)
async def retry_policy(group: str, context: AdminContext = Depends(admin_context)) -> RetryPolicyOut:  # noqa: B008
    """How many times the group gets a message before it goes to its dead-letter topic, the
    backoff between deliveries its push consumers are told, and where its messages are: how
    many it is retrying, how many are in its dead-letter topic."""
    policy = await context.messaging.retry_policy(group)
    retrying, dead = (await context.store.query(context.store.retry_counts)).get(group, (0, 0))
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
