"""Wire the store, the services and the front ends into one running broker."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import grpc

from broker.batches import BatchService
from broker.checkpoints import Checkpointer
from broker.clock import Clock, system_clock
from broker.config import Settings
from broker.controls import ControlledClock, TestControls
from broker.delays import DelayService
from broker.grpc_api import create_server
from broker.grpc_api.convert import segment_to_pb
from broker.grpc_api.servicer import BrokerServicer
from broker.http_api import AdminContext, create_app
from broker.http_api import create_server as create_http_server
from broker.http_api.app import HttpServer
from broker.kafka_api.groups import Coordinator
from broker.kafka_api.handlers import KafkaApis
from broker.kafka_api.server import KafkaServer
from broker.kafka_api.transactions import KafkaTransactions
from broker.kafka_txn import KafkaTxnService
from broker.messaging import MessagingService
from broker.metrics import Metrics
from broker.packer import Packer
from broker.pull_process import PullProcesses
from broker.remoting.handlers import RemotingBroker
from broker.remoting.namesrv import NameServer
from broker.remoting.server import RemotingServer
from broker.retention import RetentionService
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
    http_port: int = 0
    rocketmq_port: int = 0
    kafka_port: int = 0
    namesrv_port: int = 0
    remoting_port: int = 0
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        settings = self.settings
        controlled = ControlledClock() if settings.test_controls else None
        if controlled is not None:
            self.clock = controlled
        self.metrics = Metrics()
        self.store = Store(settings.data_dir, flush=settings.flush, on_commit=self.metrics.group_commit)
        self.metrics.watch_half_messages(self.store.pending_count)
        self.metrics.watch_open_transactions(self.store.open_txn_count)
        self.metrics.watch_store(self.store.usage, self.store.low_offsets)
        self.metrics.watch_delayed(self.store.delayed_by_topic)
        self.metrics.watch_retries(self.store.retry_counts)
        self.registry = ProducerRegistry()
        self.packer = Packer(self.store, segment_to_pb, metrics=self.metrics)
        self.delays = DelayService(self.store, max_delay=settings.max_delay, clock=self.clock)
        self.messaging = MessagingService(
            self.store,
            self.delays,
            max_body_bytes=settings.max_body_bytes,
            max_delivery_attempts=settings.max_delivery_attempts,
            clock=self.clock,
            on_written=self.packer.written if settings.segments else None,
        )
        self.transactions = TransactionService(
            self.store, max_body_bytes=settings.max_body_bytes, metrics=self.metrics, clock=self.clock
        )
        self.batches = BatchService(
            self.store,
            self.messaging,
            max_body_bytes=settings.max_body_bytes,
            timeout=settings.batch_timeout,
            clock=self.clock,
        )
        self.kafka_txns = KafkaTxnService(
            self.store, self.messaging, max_body_bytes=settings.max_body_bytes, metrics=self.metrics, clock=self.clock
        )
        self.checks = CheckService(
            self.store, self.transactions, self.registry, settings.check_policy, metrics=self.metrics, clock=self.clock
        )
        self.retention = RetentionService(self.store, settings.retention_policy, metrics=self.metrics, clock=self.clock)
        self.controls = (
            None
            if controlled is None
            else TestControls(controlled, self.store, self.checks, self.registry, self.delays)
        )
        self._server: grpc.aio.Server | None = None
        self._http: HttpServer | None = None
        self._rocketmq: grpc.aio.Server | None = None
        self.kafka_groups = Coordinator(settings.group_initial_rebalance_delay)
        kafka_host, kafka_port = settings.kafka_advertised_address or (
            None if settings.advertised_address is None else settings.advertised_address[0],
            None,
        )
        self._kafka = KafkaServer(
            KafkaApis(
                self.messaging,
                KafkaTransactions(self.kafka_txns, self.store),
                self.kafka_groups,
                advertised_host=kafka_host,
                advertised_port=kafka_port,
                auto_create_topics=settings.auto_create_topics,
                auth_token=settings.auth_token,
            ),
            self.metrics,
            auth_token=settings.auth_token,
            tls=None if settings.tls is None else settings.tls.server_context(),
        )
        self._http_task: asyncio.Task[None] | None = None
        tls = None if settings.tls is None else settings.tls.server_context()
        remoting = RemotingBroker(
            self.messaging,
            self.transactions,
            self.registry,
            auto_create_topics=settings.auto_create_topics,
            check_timeout=settings.check_timeout,
            clock=self.clock,
        )
        names = NameServer(
            self.messaging,
            lambda: self.remoting_port,
            advertised_host=None if settings.advertised_address is None else settings.advertised_address[0],
            auto_create_topics=settings.auto_create_topics,
        )
        self._remoting = RemotingServer("broker", remoting.handlers(), self.metrics, tls=tls)
        self._namesrv = RemotingServer("namesrv", names.handlers(), self.metrics, tls=tls)
        self.pull_processes = PullProcesses(settings, on_restart=self.metrics.pull_process_restarted)

    async def start(self) -> None:
        """Create the configured topics, start serving gRPC and the periodic check loop."""
        for topic in self.settings.topics:
            await self.messaging.create_topic(topic.name, topic.queues, topic.retention, topic.message_type)
        pull_ports = await self.pull_processes.start()
        faults = None if self.controls is None else self.controls.faults
        servicer = BrokerServicer(
            self.messaging,
            self.transactions,
            self.batches,
            self.kafka_txns,
            self.registry,
            check_timeout=self.settings.check_timeout,
            pull_ports=pull_ports,
            faults=faults,
        )
        self._server, self.grpc_port = create_server(
            servicer,
            f"{self.settings.host}:{self.settings.grpc_port}",
            auth_token=self.settings.auth_token,
            tls=self.settings.tls,
            faults=faults,
        )
        await self._server.start()
        context = AdminContext(
            settings=self.settings,
            store=self.store,
            messaging=self.messaging,
            transactions=self.transactions,
            registry=self.registry,
            metrics=self.metrics,
            clock=self.clock,
            ports=self.ports,
            kafka_groups=self.kafka_groups.views,
            controls=self.controls,
        )
        self._http = create_http_server(create_app(context), self.settings.host, self.settings.http_port)
        self._http_task = asyncio.create_task(self._http.serve())
        while not self._http.started:
            if self._http_task.done():  # e.g. the port is taken: surface uvicorn's failure
                await self._http_task
                raise RuntimeError(f"the HTTP server could not start on port {self.settings.http_port}")
            await asyncio.sleep(0.01)
        self.http_port = self._http.port
        await self._start_rocketmq()
        self.kafka_port = await self._kafka.start(self.settings.host, self.settings.kafka_port)
        if self.settings.auth_token is None:  # RocketMQ's ACL signature is not checked yet: no open door
            self.remoting_port = await self._remoting.start(self.settings.host, self.settings.remoting_port)
            self.namesrv_port = await self._namesrv.start(self.settings.host, self.settings.namesrv_port)
            log.info("RocketMQ name server on %s:%d, remoting broker on %s:%d", self.settings.host, self.namesrv_port,
                     self.settings.host, self.remoting_port)  # fmt: skip
        self._tasks.append(asyncio.create_task(self.kafka_groups.run()))
        checks = self.checks.run if self.controls is None else self.controls.run_checks
        self._tasks.append(asyncio.create_task(checks(self.settings.check_interval)))
        self._tasks.append(asyncio.create_task(self.retention.run()))
        self._tasks.append(asyncio.create_task(self.delays.run()))
        self._tasks.append(asyncio.create_task(Checkpointer(self.store).run()))
        self._tasks.append(asyncio.create_task(self.batches.run()))
        self._tasks.append(asyncio.create_task(self.kafka_txns.run()))
        if self.settings.segments:
            self._tasks.append(asyncio.create_task(self.packer.run()))
        else:
            await self.store.query(self.store.drop_segments)
        log.info(
            "halfmq broker serving gRPC on %s:%d, HTTP on %s:%d and Kafka on %s:%d%s, store %s%s",
            self.settings.host, self.grpc_port, self.settings.host, self.http_port, self.settings.host, self.kafka_port,
            " (TLS)" if self.settings.tls else "", self.store.path,
            f", pulls also on ports {', '.join(map(str, pull_ports))}" if pull_ports else "",
        )  # fmt: skip

    def ports(self) -> dict[str, int]:
        """The port each protocol serves (0: its front end is off)."""
        return {
            "grpc": self.grpc_port,
            "http": self.http_port,
            "rocketmq": self.rocketmq_port,
            "kafka": self.kafka_port,
            "namesrv": self.namesrv_port,
            "remoting": self.remoting_port,
        }

    async def _start_rocketmq(self) -> None:
        """Serve the RocketMQ 5 protocol too, when its optional modules are installed."""
        from broker.rocketmq_api.protocol import ProtocolUnavailable

        try:
            from broker.rocketmq_api.server import create_server as create_rocketmq_server
            from broker.rocketmq_api.servicer import RocketMQServicer
        except ProtocolUnavailable as exc:
            log.info("RocketMQ 5 front end off: %s", exc)
            return
        address = f"{self.settings.host}:{self.settings.rocketmq_port}"
        self._rocketmq, port = create_rocketmq_server(
            lambda port: RocketMQServicer(
                self.messaging,
                self.transactions,
                self.registry,
                advertised=self.settings.advertised_address,
                bound=(self.settings.host, port),
                max_body_bytes=self.settings.max_body_bytes,
                check_timeout=self.settings.check_timeout,
            ),
            address,
            auth_token=self.settings.auth_token,
            tls=self.settings.tls,
        )
        await self._rocketmq.start()
        self.rocketmq_port = port
        log.info("RocketMQ 5 front end (apache.rocketmq.v2) on %s:%d", self.settings.host, port)

    async def stop(self, grace: float = 2.0) -> None:
        """Stop accepting calls, let in-flight ones finish, commit every write, close the store."""
        if self._http is not None and self._http_task is not None:
            self._http.should_exit = True
            await asyncio.gather(self._http_task, return_exceptions=True)
        await self._kafka.stop()
        await self._namesrv.stop()
        await self._remoting.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for server in (self._server, self._rocketmq):
            if server is not None:
                await server.stop(grace)
        await self.pull_processes.stop()
        self.store.close()
        log.info("halfmq broker stopped")
