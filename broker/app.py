"""Wire the store, the services and the front ends into one running broker."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from broker.batches import BatchService
from broker.checkpoints import Checkpointer
from broker.clients import Clients
from broker.clock import Clock, system_clock
from broker.config import Settings
from broker.controls import ControlledClock, TestControls
from broker.delays import DelayService
from broker.frontends import FrontEnd, GrpcFrontEnd, HttpFrontEnd
from broker.grpc_api import create_server
from broker.grpc_api.convert import segment_from_pb, segment_to_pb
from broker.grpc_api.servicer import BrokerServicer
from broker.http_api import AdminContext, create_app
from broker.http_api import create_server as create_http_server
from broker.kafka_api.admin import KafkaConfigs
from broker.kafka_api.groups import Coordinator
from broker.kafka_api.handlers import DEFAULT_PARTITIONS, NODE_ID, KafkaApis
from broker.kafka_api.server import KafkaServer
from broker.kafka_api.transactions import KafkaTransactions
from broker.kafka_txn import KafkaTxnService
from broker.messaging import MessagingService
from broker.metrics import Metrics
from broker.operators import OperatorService
from broker.packer import Packer
from broker.pull_process import PullProcesses
from broker.remoting.admin import RemotingAdmin
from broker.remoting.handlers import RemotingBroker
from broker.remoting.namesrv import NameServer
from broker.remoting.server import RemotingServer
from broker.retention import RetentionService
from broker.store import Store
from broker.transaction.check import CheckService
from broker.transaction.registry import ProducerRegistry
from broker.transaction.service import TransactionService

log = logging.getLogger(__name__)

# The front ends by the name of their port setting (``grpc`` serves on ``grpc_port``), as logs name them.
LABELS = {"grpc": "gRPC", "http": "HTTP", "rocketmq": "RocketMQ 5 gRPC", "kafka": "Kafka",
          "remoting": "RocketMQ remoting", "namesrv": "RocketMQ name server"}  # fmt: skip


@dataclass
class Broker:
    """A broker built from settings; ``start`` serves, ``stop`` drains and closes."""

    settings: Settings
    clock: Clock = system_clock
    _bound: dict[str, int] = field(default_factory=dict)  # each front end's port, by name
    _started: list[FrontEnd] = field(default_factory=list)
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
        self.clients = Clients()
        self.packer = Packer(self.store, segment_to_pb, metrics=self.metrics)
        self.delays = DelayService(self.store, max_delay=settings.max_delay, clock=self.clock)
        self.messaging = MessagingService(
            self.store,
            self.delays,
            max_body_bytes=settings.max_body_bytes,
            max_delivery_attempts=settings.max_delivery_attempts,
            clock=self.clock,
            on_written=self.packer.written if settings.segments else None,
            unpack=segment_from_pb,
        )
        self.transactions = TransactionService(
            self.store, max_body_bytes=settings.max_body_bytes, metrics=self.metrics, clock=self.clock
        )
        self.operators = OperatorService(self.store, self.messaging, self.clients, clock=self.clock)
        self.batches = BatchService(
            self.store,
            self.messaging,
            max_body_bytes=settings.max_body_bytes,
            timeout=settings.batch_timeout,
            clock=self.clock,
            on_committed=self.packer.written if settings.segments else None,
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
        self.kafka_groups = Coordinator(settings.group_initial_rebalance_delay)
        self._tls_context = None if settings.tls is None else settings.tls.server_context()
        kafka_host, kafka_port = settings.kafka_advertised_address or (
            None if settings.advertised_address is None else settings.advertised_address[0],
            None,
        )
        self._kafka = KafkaServer(
            KafkaApis(
                self.messaging,
                KafkaTransactions(self.kafka_txns),
                self.kafka_groups,
                self.operators,
                KafkaConfigs.of(settings, NODE_ID, DEFAULT_PARTITIONS),
                advertised_host=kafka_host,
                advertised_port=kafka_port,
                auto_create_topics=settings.auto_create_topics,
                auth_token=settings.auth_token,
            ),
            self.metrics,
            auth_token=settings.auth_token,
            tls=self._tls_context,
        )
        self._remoting_broker = RemotingBroker(
            self.messaging,
            self.transactions,
            self.registry,
            auto_create_topics=settings.auto_create_topics,
            check_timeout=settings.check_timeout,
            clock=self.clock,
        )
        self._names = NameServer(
            self.messaging,
            lambda: self.remoting_port,
            advertised_host=None if settings.advertised_address is None else settings.advertised_address[0],
            auto_create_topics=settings.auto_create_topics,
        )
        self.pull_processes = PullProcesses(settings, on_restart=self.metrics.pull_process_restarted)
        self.clients.add_membership(self.kafka_groups)
        self.clients.add_membership(self._remoting_broker)

    async def start(self) -> None:
        """Create the configured topics, serve every front end on its port, start the background
        work (checks, retention, delays, checkpoints, batches, Kafka transactions and groups)."""
        for topic in self.settings.topics:
            await self.messaging.create_topic(topic.name, topic.queues, topic.retention, topic.message_type)
        pull_ports = await self.pull_processes.start()
        for name, front_end in self._front_ends(pull_ports):
            self._bound[name] = await front_end.start(self.settings.host, getattr(self.settings, f"{name}_port"))
            self._started.append(front_end)
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
        served = ", ".join(f"{LABELS[name]} on {self.settings.host}:{port}" for name, port in self._bound.items())
        log.info(
            "halfmq broker serving %s%s, store %s%s", served, " (TLS)" if self.settings.tls else "", self.store.path,
            f", pulls also on ports {', '.join(map(str, pull_ports))}" if pull_ports else "",
        )  # fmt: skip

    def _front_ends(self, pull_ports: list[int]) -> list[tuple[str, FrontEnd]]:
        """Every front end the settings ask for, by the name of its port setting (``grpc`` serves
        on ``grpc_port``), in the order they start."""
        settings = self.settings
        faults = None if self.controls is None else self.controls.faults
        servicer = BrokerServicer(
            self.messaging,
            self.transactions,
            self.batches,
            self.kafka_txns,
            self.registry,
            self.clients,
            check_timeout=settings.check_timeout,
            pull_ports=pull_ports,
            faults=faults,
        )
        context = AdminContext(
            settings=settings,
            messaging=self.messaging,
            transactions=self.transactions,
            kafka_txns=self.kafka_txns,
            operators=self.operators,
            registry=self.registry,
            clients=self.clients,
            metrics=self.metrics,
            clock=self.clock,
            ports=self.ports,
            kafka_groups=self.kafka_groups.views,
            controls=self.controls,
        )
        front_ends: list[tuple[str, FrontEnd]] = [
            ("grpc", GrpcFrontEnd(lambda address: create_server(servicer, address, auth_token=settings.auth_token,
                                                                 tls=settings.tls, faults=faults))),
            ("http", HttpFrontEnd(lambda host, port: create_http_server(create_app(context), host, port))),
        ]  # fmt: skip
        rocketmq = self._rocketmq_front_end()
        if rocketmq is not None:
            front_ends.append(("rocketmq", rocketmq))
        front_ends.append(("kafka", self._kafka))
        admin = RemotingAdmin(self.messaging, self.operators, self._remoting_broker, clock=self.clock)
        remoting = {**self._remoting_broker.handlers(), **admin.handlers()}
        # The broker checks RocketMQ's ACL signature; the name server, as RocketMQ's, answers routes to anyone.
        front_ends += [
            ("remoting", RemotingServer("remoting", remoting, self.metrics,
                                        tls=self._tls_context, secret_key=settings.auth_token)),
            ("namesrv", RemotingServer("namesrv", self._names.handlers(), self.metrics, tls=self._tls_context,
                                       secret_key=None)),
        ]  # fmt: skip
        return front_ends

    def _rocketmq_front_end(self) -> FrontEnd | None:
        """The RocketMQ 5 front end, when its optional modules are installed."""
        from broker.rocketmq_api.protocol import ProtocolUnavailable

        try:
            from broker.rocketmq_api.server import create_server as create_rocketmq_server
            from broker.rocketmq_api.servicer import RocketMQServicer
        except ProtocolUnavailable as exc:
            log.info("RocketMQ 5 front end off: %s", exc)
            return None
        settings = self.settings
        return GrpcFrontEnd(
            lambda address: create_rocketmq_server(
                lambda port: RocketMQServicer(
                    self.messaging,
                    self.transactions,
                    self.registry,
                    self.clients,
                    advertised=settings.advertised_address,
                    bound=(settings.host, port),
                    max_body_bytes=settings.max_body_bytes,
                    check_timeout=settings.check_timeout,
                ),
                address,
                auth_token=settings.auth_token,
                tls=settings.tls,
            )
        )

    def ports(self) -> dict[str, int]:
        """The port each protocol serves (0: its front end is off)."""
        return {name: self._bound.get(name, 0) for name in LABELS}

    @property
    def grpc_port(self) -> int:
        return self._bound.get("grpc", 0)

    @property
    def http_port(self) -> int:
        return self._bound.get("http", 0)

    @property
    def rocketmq_port(self) -> int:
        return self._bound.get("rocketmq", 0)

    @property
    def kafka_port(self) -> int:
        return self._bound.get("kafka", 0)

    @property
    def namesrv_port(self) -> int:
        return self._bound.get("namesrv", 0)

    @property
    def remoting_port(self) -> int:
        return self._bound.get("remoting", 0)

    async def stop(self, grace: float = 2.0) -> None:
        """Stop accepting calls, let in-flight ones finish, commit every write, close the store."""
        for front_end in reversed(self._started):
            await front_end.stop(grace)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.pull_processes.stop()
        self.store.close()
        log.info("halfmq broker stopped")
