"""What the admin API's routes need from the broker, injected through a FastAPI dependency: its
services, never the store itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Request

from broker.clients import Clients
from broker.clock import Clock
from broker.config import Settings
from broker.controls import TestControls
from broker.kafka_api.groups import GroupView
from broker.kafka_txn import KafkaTxnService
from broker.messaging import MessagingService
from broker.metrics import Metrics
from broker.operators import OperatorService
from broker.transaction.registry import ProducerRegistry
from broker.transaction.service import TransactionService


@dataclass(frozen=True)
class AdminContext:
    settings: Settings
    messaging: MessagingService
    transactions: TransactionService
    kafka_txns: KafkaTxnService
    operators: OperatorService
    registry: ProducerRegistry
    clients: Clients
    metrics: Metrics
    clock: Clock
    ports: Callable[[], dict[str, int]]  # each protocol's bound port
    kafka_groups: Callable[[], list[GroupView]]  # the Kafka port's consumer groups
    controls: TestControls | None = None


def admin_context(request: Request) -> AdminContext:
    context: AdminContext = request.app.state.context
    return context
