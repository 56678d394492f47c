"""Apache Kafka as a local process beside halfmq: one KRaft node that is both broker and
controller, its jars fetched from Maven Central once (``maven.classpath``), on free ports, with
its configuration, data and log in a directory of its own."""

from __future__ import annotations

import base64
import socket
import struct
import subprocess
import uuid
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from types import TracebackType

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from halfmq_peers import maven
from halfmq_peers.jvm import Jvm, PeerFailed, free_port, wait_ready

__all__ = ["VERSION", "Kafka"]

# The newest Apache Kafka on Maven Central; its broker's classes are Java 17 bytecode (Kafka 4
# brokers need Java 17 or later).
VERSION = "4.4.0"
# Kafka's jars log through SLF4J 1.7 and name no binding; its own distribution binds Log4j 2
# (log4j-slf4j-impl, the binding for SLF4J 1.x) from the 2.25 line. Without one, SLF4J
# prints a warning and drops every line.
_LOG4J = "2.25.5"
_LOGGING = (f"org.apache.logging.log4j:log4j-slf4j-impl:{_LOG4J}", f"org.apache.logging.log4j:log4j-core:{_LOG4J}")
_BROKER_ARTIFACTS = (f"org.apache.kafka:kafka_2.13:{VERSION}", *_LOGGING)
# The command-line tools (TopicCommand, ConsumerGroupCommand, TransactionsCommand, the console
# producer and consumer) live in kafka-tools, which brings Connect's runtime along: a fetch of
# its own, made by the program that runs them (tests/conformance/programs/KafkaTools.java).
TOOLS_ARTIFACTS = (f"org.apache.kafka:kafka-tools:{VERSION}", *_LOGGING)

# Spark's Kafka connector for the installed Spark's Scala, which reads this Kafka and halfmq's
# Kafka port alike. Spark 4.3.0's own build of it is not on Maven Central; 4.2.0's runs on Spark
# 4.3.0 (tests/test_spark_kafka_connector.py).
SPARK_CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"

NODE_ID = 1
HEAP_MB = 512  # the launcher's default is 1 GB; the whole process's RSS measured 340-375 MB with 512
# Measured on 2 cores: 4 to 6 s from the JVM's start to answering, 8 to 16 s with a load average
# of 10 from other test runs; the margin is for a slower machine.
START_TIMEOUT = 120.0
_FORMAT_TIMEOUT = 120.0
_PROBE_TIMEOUT = 2.0
_METADATA_VERSION = 12  # Kafka 4 serves Metadata v4-v13 (KIP-896 removed v0-v3)

# Kafka's launcher (kafka-run-class.sh) runs the broker with these, so timings compare with a
# broker started the usual way.
_BROKER_OPTIONS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
# The storage format is a JVM that lives about two seconds: with the client compiler alone and the
# serial collector it takes a third less CPU (1.3 s against 2.1 s, measured).
_FORMAT_OPTIONS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true")

# The lines that place the node (its roles, ports, quorum and data directory): Kafka.start writes
# them, and a setting that changed one would leave `endpoints` or the storage format wrong.
_PLACEMENT = frozenset(
    {
        "process.roles",
        "node.id",
        "broker.id",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "controller.listener.names",
        "inter.broker.listener.name",
        "security.inter.broker.protocol",
        "controller.quorum.bootstrap.servers",
        "controller.quorum.voters",
        "log.dirs",
        "log.dir",
        "metadata.log.dir",
    }
)

# The broker's log (kafka.log): warnings and errors from everything; at INFO only the milestones
# of start-up and shutdown, topic creations and deletions, group rebalances and transaction
# coordination. At INFO everywhere (Kafka's own configuration) a first start logged 2,400 lines,
# the whole configuration five times over, and each internal topic's first use a line for each of
# its 50 partitions at several loggers. Log4j's own shutdown hook is off: it would stop logging
# while Kafka's hook still shuts the node down, and the log would end before the shutdown does.
_BROKER_LOG4J = """\
status = warn
shutdownHook = disable
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
logger.raftServer.name = kafka.server.KafkaRaftServer
logger.raftServer.level = INFO
logger.broker.name = kafka.server.BrokerServer
logger.broker.level = INFO
logger.controller.name = kafka.server.ControllerServer
logger.controller.level = INFO
logger.topics.name = org.apache.kafka.controller.ReplicationControlManager
logger.topics.level = INFO
logger.groups.name = org.apache.kafka.coordinator.group.GroupMetadataManager
logger.groups.level = INFO
logger.transactions.name = kafka.coordinator.transaction.TransactionCoordinator
logger.transactions.level = INFO
"""


def broker_classpath() -> str:
    """The classpath of the Kafka node, fetched from Maven Central on first use."""
    return maven.classpath(f"kafka-{VERSION}", _BROKER_ARTIFACTS)


class Kafka:
    """Apache Kafka in KRaft mode: one combined broker and controller, on free ports, with a data
    directory of its own under ``workdir``.

    ``settings`` are extra ``server.properties`` lines (``{"group.initial.rebalance.delay.ms":
    "0"}``); they override everything but the lines that place the node (roles, listeners,
    quorum, ``log.dirs``), which raise ValueError. Every other setting keeps Kafka's built-in
    default, including the ones Kafka's sample ``server.properties`` changes (its
    ``group.initial.rebalance.delay.ms=0``, say): the caller decides.

    ``workdir`` holds ``server.properties``, ``log4j2.properties``, the broker's log
    ``kafka.log`` and its data in ``data/``. A ``data/`` formatted by an earlier start is kept:
    ``start`` after ``stop`` brings the same topics, offsets and transactions back, on the same
    ports (a new Kafka on the same ``workdir`` brings them back on new ports).
    """

    def __init__(self, workdir: Path, *, settings: Mapping[str, str] | None = None) -> None:
        placing = sorted(_PLACEMENT.intersection(settings or {}))
        if placing:
            raise ValueError(f"settings may not change where the Kafka node listens or keeps its data: {placing}")
        self.workdir = workdir
        self.settings = dict(settings or {})
        self.endpoints: dict[str, str] = {}
        self.pids: list[int] = []
        self._ports: tuple[int, int] | None = None  # (PLAINTEXT, CONTROLLER), kept across restarts
        self._jvm: Jvm | None = None

    @property
    def data_dir(self) -> Path:
        """The node's ``log.dirs``: its topics' partitions and the metadata log."""
        return self.workdir / "data"

    @property
    def log(self) -> Path:
        """The broker's log (its stdout and stderr)."""
        return self.workdir / "kafka.log"

    def start(self) -> Kafka:
        """Fetch Kafka (once per machine), format ``data/`` unless an earlier start did, start
        the node and return once it answers as a broker: a client can produce then (topics it
        names are created, as Kafka's ``auto.create.topics.enable`` has it). Starting a running
        node does nothing. Raises PeerFailed when a step fails or the node does not answer within
        START_TIMEOUT seconds, with the log's end."""
        if self._jvm is not None and self._jvm.alive():
            return self
        classpath = broker_classpath()
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self._ports is None:
            self._ports = (free_port(), free_port())
        port, controller_port = self._ports
        config = self.workdir / "server.properties"
        config.write_text(_properties(self._server_properties(port, controller_port)), encoding="ascii")
        log4j = self.workdir / "log4j2.properties"
        log4j.write_text(_BROKER_LOG4J)
        if not (self.data_dir / "meta.properties").exists():
            self._format(classpath, config, log4j)
        self._jvm = Jvm(
            "kafka",
            "kafka.Kafka",
            [str(config)],
            classpath=classpath,
            heap_mb=HEAP_MB,
            workdir=self.workdir,
            options=(*_BROKER_OPTIONS, f"-Dlog4j2.configurationFile={log4j}"),
        )
        self.pids = [self._jvm.pid]
        ready = partial(_serves_as_broker, "127.0.0.1", port)
        try:
            wait_ready(ready, [self._jvm], timeout=START_TIMEOUT, what=f"Apache Kafka {VERSION}")
        except BaseException:
            self.stop()
            raise
        self.endpoints = {"bootstrap": f"127.0.0.1:{port}"}
        return self

    def stop(self) -> None:
        """Stop the node: SIGTERM, on which Kafka shuts down cleanly (in 1 to 3 s, measured), and
        SIGKILL if it has not after 30 s. ``data/`` stays."""
        if self._jvm is not None:
            self._jvm.stop()
        self._jvm = None
        self.pids = []
        self.endpoints = {}

    def __enter__(self) -> Kafka:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    def _server_properties(self, port: int, controller_port: int) -> dict[str, str]:
        return {
            "process.roles": "broker,controller",
            "node.id": str(NODE_ID),
            # A dynamic quorum of this one controller (`format --standalone`), as Kafka 4's
            # quickstart sets it up.
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            # The internal topics' default replication factor is 3, which one broker cannot
            # place: the first group, transaction or share group would fail.
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            **self.settings,
        }

    def _format(self, classpath: str, config: Path, log4j: Path) -> None:
        """``kafka-storage format --standalone``: the cluster's id, its feature levels and this
        controller as the quorum's only voter, written to ``data/``."""
        command = [
            "java",
            *_FORMAT_OPTIONS,
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            classpath,
            "kafka.tools.StorageTool",
            "format",
            "--config",
            str(config),
            "--cluster-id",
            _cluster_id(),
            "--standalone",
        ]
        try:
            done = subprocess.run(command, cwd=self.workdir, capture_output=True, text=True, timeout=_FORMAT_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PeerFailed(f"formatting Kafka's storage: {exc}") from exc
        if done.returncode != 0:
            raise PeerFailed(f"formatting Kafka's storage failed:\n{(done.stdout + done.stderr)[-4000:]}")


def _cluster_id() -> str:
    """A cluster id as ``kafka-storage random-uuid`` prints it (a random UUID in URL-safe base64
    without padding, never starting with "-", which the tools would read as an option), without
    starting a JVM for it."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _serves_as_broker(host: str, port: int) -> bool:
    """Whether the node answers a Metadata request and lists itself as a broker. Its PLAINTEXT
    listener processes requests only once the controller has unfenced the broker, and the
    metadata lists unfenced brokers only: from then on a produce succeeds, the topic's creation
    included. The request names no topic, so it creates none."""
    request = MetadataRequest(topics=[], allow_auto_topic_creation=False, version=_METADATA_VERSION)
    request.with_header(correlation_id=1, client_id="halfmq-peers-ready")
    with socket.create_connection((host, port), timeout=_PROBE_TIMEOUT) as sock:
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        (size,) = struct.unpack(">i", _receive(sock, 4))
        response = MetadataResponse.decode(_receive(sock, size), version=_METADATA_VERSION, header=True)
    return any(broker.node_id == NODE_ID for broker in response.brokers)


def _receive(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("Kafka closed the connection")
        chunks += chunk
    return bytes(chunks)


def _properties(settings: Mapping[str, str]) -> str:
    """``settings`` as a ``server.properties`` file: java.util.Properties reads it as ISO-8859-1
    with backslash escapes, so a value with a newline or a non-Latin character stays one value."""
    return "".join(f"{_escape(key, key=True)}={_escape(value, key=False)}\n" for key, value in settings.items())


def _escape(text: str, *, key: bool) -> str:
    escaped = []
    for index, char in enumerate(text):
        if char == "\\" or (key and char in "=: #!") or (index == 0 and char == " "):
            escaped.append("\\" + char)
        elif " " <= char <= "~":
            escaped.append(char)
        else:  # a \uXXXX escape of each UTF-16 unit, as Properties reads them
            units = char.encode("utf-16-be")
            escaped.extend(f"\\u{int.from_bytes(units[i : i + 2], 'big'):04x}" for i in range(0, len(units), 2))
    return "".join(escaped)
