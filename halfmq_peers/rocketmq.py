"""Apache RocketMQ 5 as local processes beside halfmq: a name server, and a broker with its proxy in
local mode (one JVM, the layout of RocketMQ 5's quick start), their jars fetched from Maven Central
once (``maven.classpath``), on free ports, with configuration, logs and data in a directory of
their own."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc

from broker.rocketmq_api import protocol
from halfmq_peers import maven
from halfmq_peers.jvm import Jvm, PeerFailed, free_port, wait_ready

__all__ = ["CLASSIC_CLIENT", "MESSAGE_TYPES", "VERSION", "RocketMQ"]

# The newest RocketMQ 5 that Maven Central has whole. 5.5.1 is listed in rocketmq-broker's
# maven-metadata.xml, but only common, remoting, store, tiered-store, broker and controller were
# published at 5.5.1: its broker's pom names rocketmq-client, -srvutil, -filter and -auth 5.5.1,
# and there is no namesrv, proxy or tools 5.5.1, so Maven cannot resolve it.
VERSION = "5.5.0"
_ARTIFACTS = tuple(f"org.apache.rocketmq:rocketmq-{m}:{VERSION}" for m in ("namesrv", "broker", "proxy", "tools"))
CLASSIC_CLIENT = f"org.apache.rocketmq:rocketmq-client:{VERSION}"  # the Java client of the classic protocol

MESSAGE_TYPES = frozenset({"NORMAL", "FIFO", "DELAY", "TRANSACTION"})
CLUSTER = "DefaultCluster"  # RocketMQ's default, so tools and clients need no cluster name
# RocketMQ's scripts ask for 4 GB (name server) and 8 GB (broker) with AlwaysPreTouch; a test
# broker's resident set stays well under these (measured: name server about 280 MB, broker and
# proxy about 480 MB after start-up, about 1 GB once clients have used it).
NAMESRV_HEAP_MB = 256
BROKER_HEAP_MB = 1024
# Measured on 2 cores: the broker and proxy answer about 20 s after the JVMs start, and the broker
# registers with the name server 10 s later (its first registration usually finds no connection
# to the name server yet, and the next one is scheduled 10 s after start-up). The margin is for
# a machine busy with a test run.
START_TIMEOUT = 180.0
# A topic is routable at once; through the proxy it can take up to its route cache's refresh
# (20 s) when a client asked for the topic's route before it existed.
TOPIC_TIMEOUT = 60.0
_ADMIN_TIMEOUT = 120.0
_PROBE_TIMEOUT = 3.0
# A name that no topic has: the proxy answers TOPIC_NOT_FOUND for it only once it serves routes.
_PROBE_TOPIC = "halfmq-peers-ready-probe"

# RocketMQ's remoting request codes (org.apache.rocketmq.remoting.protocol.RequestCode).
_UPDATE_AND_CREATE_TOPIC = 17
_GET_ROUTEINFO_BY_TOPIC = 105
_GET_BROKER_CLUSTER_INFO = 106
_UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
_SUCCESS = 0
_PERM_READ_WRITE = 6

# The lines that place the processes (ports, addresses, data, cluster): start writes them, and a
# setting that changed one would leave `endpoints` or the ready check wrong.
_BROKER_PLACEMENT = frozenset(
    {
        "namesrvAddr",
        "brokerClusterName",
        "brokerIP1",
        "brokerIP2",
        "bindAddress",
        "listenPort",
        "haListenPort",
        "storePathRootDir",
        "storePathCommitLog",
    }
)
_PROXY_PLACEMENT = frozenset(
    {"grpcServerPort", "remotingListenPort", "namesrvAddr", "rocketMQClusterName", "brokerConfigPath", "proxyMode"}
)


def broker_classpath() -> str:
    """The classpath of the name server, broker, proxy and tools, fetched from Maven Central on first use."""
    return maven.classpath(f"rocketmq-{VERSION}", _ARTIFACTS)


class RocketMQ:
    """Apache RocketMQ 5: a name server and a broker with its proxy in local mode (one JVM), on
    free ports, with a data directory of its own under ``workdir``.

    ``broker_config`` are extra ``broker.conf`` lines (``{"flushDiskType": "SYNC_FLUSH",
    "transactionCheckInterval": "1000"}``) and ``proxy_config`` extra ``rmq-proxy.json`` entries
    (``{"grpcClientConsumerMinLongPollingTimeoutMillis": 1000}``); they override everything but
    the lines that place the processes (ports, addresses, data, cluster), which raise ValueError.

    ``workdir`` holds ``namesrv.conf``, ``broker.conf``, ``rmq-proxy.json``, the JVMs' output
    (``namesrv.log``, ``broker.log``), RocketMQ's own logs under ``namesrv/logs/rocketmqlogs`` and
    ``broker/logs/rocketmqlogs`` (each JVM's ``user.home``), and the broker's data in ``store/``.
    ``start`` after ``stop`` brings the same topics, groups and messages back, on the same ports.

    Unlike halfmq, a consumer group must exist before a RocketMQ 5 client uses it (the proxy
    answers "group not found"): create it with ``set_group``. The proxy keeps its defaults: a
    receive long-polls 5 s at least (a client's ``await_duration`` under about 5 s gets "deadline
    time remaining is not enough") and takes invisible durations of 10 s at least; proxy_config's
    ``grpcClientConsumerMinLongPollingTimeoutMillis`` and ``minInvisibleTimeMillsForRecv`` lower
    them.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        broker_config: Mapping[str, str] | None = None,
        proxy_config: Mapping[str, Any] | None = None,
    ) -> None:
        placing = sorted(_BROKER_PLACEMENT.intersection(broker_config or {}))
        placing += sorted(_PROXY_PLACEMENT.intersection(proxy_config or {}))
        if placing:
            raise ValueError(f"settings may not change where RocketMQ listens or keeps its data: {placing}")
        _properties(broker_config or {})  # refuses what broker.conf cannot hold, now rather than at start
        self.workdir = Path(workdir)
        self.broker_config = dict(broker_config or {})
        self.proxy_config = dict(proxy_config or {})
        # namesrv: the name server; proxy: the gRPC endpoint of RocketMQ 5 clients; broker: the
        # broker's remoting port (RocketMQ 4 clients and admin tools).
        self.endpoints: dict[str, str] = {}
        self.pids: list[int] = []
        self._ports: dict[str, int] = {}  # kept across restarts
        self._jvms: list[Jvm] = []
        self._classpath = ""

    @classmethod
    def running_at(cls, endpoints: Mapping[str, str]) -> RocketMQ:
        """The RocketMQ that ``halfmq peers run`` (or the ``rocketmq_peer`` fixture) started at
        ``endpoints``, for ``create_topic`` and ``set_group``; it neither starts nor stops it."""
        peer = cls(Path(tempfile.gettempdir()))
        peer.endpoints = dict(endpoints)
        return peer

    @property
    def store_dir(self) -> Path:
        return self.workdir / "store"

    def start(self) -> RocketMQ:
        """Fetch RocketMQ (once per machine), write its configuration, start the name server and
        the broker with its proxy, and return once a RocketMQ 5 client can send: the broker is
        registered with the name server, so a topic created now is routable, and the proxy serves
        routes. Starting a running peer does nothing. Raises PeerFailed when a step fails or the
        peer does not answer within START_TIMEOUT seconds, with the logs' ends."""
        if self._jvms and all(jvm.alive() for jvm in self._jvms):
            return self
        self.stop()
        protocol.load()  # the ready check's gRPC call needs the client's modules: fail now, not at the timeout
        self._classpath = broker_classpath()
        self.workdir.mkdir(parents=True, exist_ok=True)
        ports = self._ports = self._ports or _choose_ports()
        self.endpoints = {
            "namesrv": f"127.0.0.1:{ports['namesrv']}",
            "proxy": f"127.0.0.1:{ports['grpc']}",
            "broker": f"127.0.0.1:{ports['broker']}",
        }
        self._write_configs()
        try:
            self._jvms.append(self._jvm("namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup", NAMESRV_HEAP_MB))
            self._jvms.append(self._jvm("broker", "org.apache.rocketmq.proxy.ProxyStartup", BROKER_HEAP_MB))
            self.pids = [jvm.pid for jvm in self._jvms]
            wait_ready(self._ready, self._jvms, timeout=START_TIMEOUT, what=f"Apache RocketMQ {VERSION}")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop both JVMs by PID, at once (SIGTERM: the broker and proxy shut down in about 12 s,
        the name server in about 5 s; SIGKILL after 30 s). ``store/`` stays."""
        stopping = [threading.Thread(target=jvm.stop) for jvm in self._jvms]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()
        self._jvms = []
        self.pids = []
        self.endpoints = {}

    def __enter__(self) -> RocketMQ:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    def create_topic(self, name: str, queues: int = 4, message_type: str = "NORMAL") -> None:
        """Create (or update) topic ``name`` with ``queues`` read and write queues, accepting
        ``message_type`` messages only (NORMAL, FIFO, DELAY or TRANSACTION: RocketMQ 5's
        ``message.type`` attribute, which the proxy enforces), as ``mqadmin updateTopic -a
        +message.type=TYPE`` does, in milliseconds rather than a JVM's start. Returns once the
        name server routes it and the proxy answers its route. Raises ValueError for another type,
        PeerFailed when the broker refuses or the route does not come within TOPIC_TIMEOUT."""
        if message_type not in MESSAGE_TYPES:
            raise ValueError(f"message_type must be one of {sorted(MESSAGE_TYPES)}, not {message_type!r}")
        header = {
            "topic": name,
            "defaultTopic": "TBW102",  # what mqadmin sends; the broker ignores it
            "readQueueNums": queues,
            "writeQueueNums": queues,
            "perm": _PERM_READ_WRITE,
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": 0,
            "order": "false",
            "attributes": f"+message.type={message_type}",
        }
        self._admin(_UPDATE_AND_CREATE_TOPIC, header, what=f"creating topic {name}")
        # The broker registers the topic with the name server after answering; the proxy loads
        # routes from the name server.
        queue_count = f'"writeQueueNums":{queues}'.encode()

        def routed() -> bool:
            code, body = _remoting(self.endpoints["namesrv"], _GET_ROUTEINFO_BY_TOPIC, {"topic": name})
            return code == _SUCCESS and queue_count in body and self._proxy_route(name) == _code("OK")

        self._until(routed, timeout=TOPIC_TIMEOUT, what=f"RocketMQ route of topic {name}")

    def set_group(self, group: str, *, max_attempts: int | None = None, fifo: bool = False) -> None:
        """Create or replace consumer group ``group``, as ``mqadmin updateSubGroup -g GROUP [-r
        RETRIES] -o FIFO`` does: ``max_attempts`` deliveries of a message at most (RocketMQ keeps
        the retries after the first, ``retryMaxTimes`` = ``max_attempts`` - 1; by default 16 retries)
        and ``fifo`` (``consumeMessageOrderly``: a message group's next message is delivered once
        the one before is acknowledged). The proxy reads groups from the broker: the next client
        of the group gets these settings."""
        config: dict[str, Any] = {
            "groupName": group,
            # mqadmin's updateSubGroup sets these two against the class's defaults
            "consumeBroadcastEnable": False,
            "consumeFromMinEnable": False,
            "consumeMessageOrderly": fifo,
        }
        if max_attempts is not None:
            if max_attempts < 1:
                raise ValueError(f"max_attempts must be at least 1, not {max_attempts}")
            config["retryMaxTimes"] = max_attempts - 1
        self._admin(
            _UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, json.dumps(config).encode(), what=f"setting group {group}"
        )

    def mqadmin(self, *args: str) -> str:
        """Run RocketMQ's ``mqadmin`` (``org.apache.rocketmq.tools.command.MQAdminStartup``, same
        version) with ``args`` against this name server and return its stdout, then its stderr:
        mqadmin reports a failed command there and still exits with 0. Each run is a JVM of its own
        (measured on 2 cores: 6 s, 12 s beside a test run). Raises PeerFailed when it cannot run."""
        if not self.endpoints:
            raise PeerFailed("RocketMQ is not running")
        home = self.workdir / "mqadmin"
        command = [
            "java",
            "-Xmx256m",
            f"-Duser.home={home}",  # its logs go under user.home
            "-Drmq.logback.configurationFile=rmq.tools.logback.xml",
            "-cp",
            self._classpath,
            "org.apache.rocketmq.tools.command.MQAdminStartup",
            *args,
            "-n",
            self.endpoints["namesrv"],
        ]
        try:
            done = subprocess.run(
                command,
                cwd=self.workdir,
                env={**os.environ, **self._env()},
                capture_output=True,
                text=True,
                timeout=_ADMIN_TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PeerFailed(f"mqadmin {' '.join(args)}: {exc}") from exc
        if done.returncode != 0:
            raise PeerFailed(f"mqadmin {' '.join(args)} failed:\n{(done.stdout + done.stderr)[-4000:]}")
        return done.stdout + done.stderr

    def _write_configs(self) -> None:
        ports, store = self._ports, self.store_dir
        # The name server's own client scans its name server list, which is its address on the
        # host's interface: bound to 127.0.0.1 it would fail to connect every 3 s. It only sends
        # one-way notices to brokers, which need no scan.
        namesrv = {"listenPort": str(ports["namesrv"]), "bindAddress": "127.0.0.1", "scanAvailableNameSrv": "false"}
        broker = {
            "brokerClusterName": CLUSTER,
            "brokerName": "broker-a",
            "brokerId": "0",
            "namesrvAddr": self.endpoints["namesrv"],
            "brokerIP1": "127.0.0.1",
            "brokerIP2": "127.0.0.1",
            "bindAddress": "127.0.0.1",  # the HA port binds every interface whatever this says
            # The broker also listens on listenPort - 2 (its "fast" remoting port), and on
            # listenPort + 1 for HA unless haListenPort is set.
            "listenPort": str(ports["broker"]),
            "haListenPort": str(ports["ha"]),
            "storePathRootDir": str(store),
            "storePathCommitLog": str(store / "commitlog"),
            "autoCreateTopicEnable": "true",
            "enablePropertyFilter": "true",  # SQL92 filters, off by default
            # RecallMessage, off by default ("recall failed, operation is forbidden"); halfmq serves it.
            "recallMessageEnable": "true",
            # Files are mapped at full size: 16 MB commit log files (1 GB by default; a message
            # is 4 MB at most), consume queues of 30,000 entries (300,000), 4 MB timer logs (100
            # MB) and index files of 40,000 entries (about 1 MB, not 420 MB).
            "mappedFileSizeCommitLog": str(16 << 20),
            "mappedFileSizeConsumeQueue": str(30_000 * 20),
            "mappedFileSizeTimerLog": str(4 << 20),
            "maxHashSlotNum": "10000",
            "maxIndexNum": "40000",
            **self.broker_config,
        }
        proxy = {
            "rocketMQClusterName": CLUSTER,
            "namesrvAddr": self.endpoints["namesrv"],
            "grpcServerPort": ports["grpc"],  # binds every interface: the proxy has no bind address
            "remotingListenPort": ports["proxy_remoting"],  # the same
            **self.proxy_config,
        }
        (self.workdir / "namesrv.conf").write_text(_properties(namesrv))
        (self.workdir / "broker.conf").write_text(_properties(broker))
        (self.workdir / "rmq-proxy.json").write_text(json.dumps(proxy, indent=2))

    def _jvm(self, name: str, main_class: str, heap_mb: int) -> Jvm:
        if name == "namesrv":
            args = ["-c", "namesrv.conf"]
            logback = "rmq.namesrv.logback.xml"
        else:  # the proxy starts the broker in its JVM from the broker's configuration (-bc)
            args = ["-pc", "rmq-proxy.json", "-pm", "local", "-bc", "broker.conf"]
            logback = "rmq.proxy.logback.xml"
        home = self.workdir / name
        home.mkdir(exist_ok=True)
        options = (
            # RocketMQ logs to files under ${user.home}/logs/rocketmqlogs: each JVM gets a home of its
            # own, or both would write the same files.
            f"-Duser.home={home}",
            # All jars share one classpath, and RocketMQ picks the first of its logback files it
            # finds there (the proxy's, for every process): name each one's own, through the
            # property of the logback RocketMQ shades (not logback.configurationFile).
            f"-Drmq.logback.configurationFile={logback}",
        )
        return Jvm(
            name,
            main_class,
            args,
            classpath=self._classpath,
            heap_mb=heap_mb,
            workdir=self.workdir,
            env=self._env(),
            options=options,
        )

    def _env(self) -> dict[str, str]:
        # Without ROCKETMQ_HOME the broker exits (-2); nothing is read from it.
        return {"ROCKETMQ_HOME": str(self.workdir)}

    def _ready(self) -> bool:
        """Whether the name server lists the broker's address (its first registration, about 10 s
        after start-up; a topic created before it is not routed until the next one) and the
        proxy, which starts after the broker, serves routes."""
        code, body = _remoting(self.endpoints["namesrv"], _GET_BROKER_CLUSTER_INFO)
        registered = code == _SUCCESS and f'"{self.endpoints["broker"]}"'.encode() in body
        return registered and self._proxy_route(_PROBE_TOPIC) == _code("TOPIC_NOT_FOUND")

    def _proxy_route(self, topic: str) -> int:
        """The status code of a gRPC QueryRoute for ``topic`` through the proxy, as a RocketMQ 5
        client's first call asks it."""
        definition, service, stubs = protocol.load()
        host, port = self.endpoints["proxy"].rsplit(":", 1)
        request = service.QueryRouteRequest(
            topic=definition.Resource(name=topic),
            endpoints=definition.Endpoints(
                scheme=definition.AddressScheme.IPv4, addresses=[definition.Address(host=host, port=int(port))]
            ),
        )
        with grpc.insecure_channel(self.endpoints["proxy"]) as channel:
            # The proxy refuses calls without a client id.
            response = stubs.MessagingServiceStub(channel).QueryRoute(
                request, timeout=_PROBE_TIMEOUT, metadata=(("x-mq-client-id", "halfmq-peers"),)
            )
        return int(response.status.code)

    def _admin(self, request_code: int, header: Mapping[str, object], body: bytes = b"", *, what: str) -> None:
        if not self.endpoints:
            raise PeerFailed(f"{what}: RocketMQ is not running")
        try:
            code, answer = _remoting(self.endpoints["broker"], request_code, header, body)
        except OSError as exc:
            raise PeerFailed(f"{what}: {exc}") from exc
        if code != _SUCCESS:
            raise PeerFailed(f"{what}: the broker answered code {code}: {answer.decode(errors='replace')}")

    def _until(self, ready: Callable[[], bool], *, timeout: float, what: str) -> None:
        # Most answers come within a few milliseconds: poll fast for a second before wait_ready's
        # half-second steps.
        for _ in range(50):
            try:
                if ready():
                    return
            except Exception:  # not answering yet: wait_ready below reports what stays wrong
                pass
            time.sleep(0.02)
        wait_ready(ready, self._jvms, timeout=timeout, what=what)


def _choose_ports() -> dict[str, int]:
    """Free ports for every listener, the broker's two included: its remoting port and, fixed
    at two below it, its fast remoting port (which free_port does not know it handed out, so it
    is kept apart from the others here)."""
    ports = {name: free_port() for name in ("namesrv", "ha", "grpc", "proxy_remoting")}
    while True:
        broker = free_port()
        if broker - 2 in ports.values():
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", broker - 2))
            except OSError:
                continue
        return {**ports, "broker": broker}


def _code(name: str) -> int:
    """The value of ``apache.rocketmq.v2.Code`` ``name``."""
    definition, _, _ = protocol.load()
    return int(definition.Code.Value(name))


def _remoting(
    address: str, request_code: int, header: Mapping[str, object] | None = None, body: bytes = b""
) -> tuple[int, bytes]:
    """One request in RocketMQ's remoting protocol (JSON headers, as its Java clients send them)
    on a connection of its own: ``(response code, remark or body)``.

    A frame is its length (4 bytes), the header's length (4 bytes, serialization type 0 = JSON in
    the high byte), the header and the body, big-endian."""
    request = {
        "code": request_code,
        "language": "PYTHON",
        "version": 0,
        "opaque": 1,
        "flag": 0,
        "extFields": {key: str(value) for key, value in (header or {}).items()},
        "serializeTypeCurrentRPC": "JSON",
    }
    head = json.dumps(request).encode()
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=_PROBE_TIMEOUT) as sock:
        sock.sendall(struct.pack(">II", 4 + len(head) + len(body), len(head)) + head + body)
        (length,) = struct.unpack(">I", _receive(sock, 4))
        frame = _receive(sock, length)
    head_length = struct.unpack(">I", frame[:4])[0] & 0xFFFFFF
    response = json.loads(frame[4 : 4 + head_length])
    answer = frame[4 + head_length :] or str(response.get("remark", "")).encode()
    return int(response["code"]), answer


def _receive(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("RocketMQ closed the connection")
        chunks += chunk
    return bytes(chunks)


def _properties(settings: Mapping[str, str]) -> str:
    """``settings`` as a file java.util.Properties reads (ISO-8859-1, backslash escapes): plain
    printable ASCII is all RocketMQ's settings need, anything else is refused."""
    for key, value in settings.items():
        plain = f"{key}{value}".isascii() and f"{key}{value}".isprintable() and "\\" not in f"{key}{value}"
        if not plain or any(c in key for c in "=: #!") or value != value.strip():
            raise ValueError(f"not a plain RocketMQ setting: {key!r}={value!r}")
    return "".join(f"{key}={value}\n" for key, value in settings.items())
