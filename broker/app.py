"""Wire the store, the services and the front ends into one running broker."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import grpc

from broker.clock import Clock, system_clock
from broker.config import Settings
from broker.grpc_api import create_server
from broker.grpc_api.servicer import BrokerServicer
from broker.messaging import MessagingService
from broker.metrics import Metrics
from broker.store import Store
from broker.transaction.check import CheckService
from broker.transaction.registry import ProducerRegistry
from broker.transaction.service import TransactionService

log = logging.getLogger(__name__)


@dataclass
class Broker:
    """A broker built from settings; ``start`` serves, ``stop`` drains and closes."""

    settings: Settings
    clock: Clock = system_clock
    grpc_port: int = 0
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        settings = self.settings
        self.metrics = Metrics()
        self.store = Store(settings.data_dir, flush=settings.flush, on_commit=self.metrics.group_commit)
        self.metrics.watch_half_messages(self.store.pending_count)
        self.registry = ProducerRegistry()
        self.messaging = MessagingService(self.store, max_body_bytes=settings.max_body_bytes, clock=self.clock)
        self.transactions = TransactionService(
            self.store, max_body_bytes=settings.max_body_bytes, metrics=self.metrics, clock=self.clock
        )
        self.checks = CheckService(
            self.store, self.transactions, self.registry, settings.check_policy, metrics=self.metrics, clock=self.clock
        )
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        """Create the configured topics, start serving gRPC and the periodic check loop."""
        for topic in self.settings.topics:
            await self.messaging.create_topic(topic.name, topic.queues)
        servicer = BrokerServicer(self.messaging, self.transactions, self.registry)
        self._server, self.grpc_port = create_server(servicer, f"{self.settings.host}:{self.settings.grpc_port}")
        await self._server.start()
        self._tasks.append(asyncio.create_task(self.checks.run(self.settings.check_interval)))
        log.info("halfmq broker serving gRPC on %s:%d, store %s", self.settings.host, self.grpc_port, self.store.path)

    async def stop(self, grace: float = 2.0) -> None:
        """Stop accepting calls, let in-flight ones finish, commit every write, close the store."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.stop(grace)
        self.store.close()
        log.info("halfmq broker stopped")
