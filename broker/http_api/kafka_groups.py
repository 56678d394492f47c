"""``/kafka-groups``: the consumer groups of Kafka clients, their state and live members."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from broker.http_api.context import AdminContext, admin_context
from broker.http_api.schemas import KafkaGroupOut

router = APIRouter(prefix="/kafka-groups", tags=["kafka"])


@router.get("", response_model=list[KafkaGroupOut])
def kafka_groups(context: AdminContext = Depends(admin_context)) -> list[KafkaGroupOut]:  # noqa: B008
    """Every group Kafka clients joined since the broker started: its state, generation and live
    members with their partitions. Committed offsets are under ``/consumers``."""
    return [KafkaGroupOut.model_validate(view, from_attributes=True) for view in context.kafka_groups()]
