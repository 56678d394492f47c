"""Broker settings: one frozen object, built once at the entry point from CLI flags and HALFMQ_* env vars.

A flag wins over its environment variable, which wins over the default.
"""

from __future__ import annotations

import argparse
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.model import MAX_WIRE_BYTES, WIRE_ENVELOPE_BYTES, MessageType, Topic
from broker.retention import RetentionPolicy
from broker.store import Flush
from broker.tls import TlsFiles
from broker.transaction.check import CheckPolicy

# A pull process is a whole Python interpreter: more than the cores is wasted memory.
MAX_PULL_PROCESSES = 64


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path("./halfmq-data")
    host: str = "127.0.0.1"
    grpc_port: int = 10911
    http_port: int = 8080
    rocketmq_port: int = 8081
    kafka_port: int = 9092
    namesrv_port: int = 9876
    remoting_port: int = 10921
    advertised_address: tuple[str, int] | None = None
    kafka_advertised_address: tuple[str, int] | None = None
    auto_create_topics: bool = True
    group_initial_rebalance_delay: float = 0.0
    pull_processes: int = 0
    pull_port: int = 0
    segments: bool = True
    check_interval: float = 30.0
    transaction_timeout: float = 6.0
    check_max: int = 5
    check_timeout: float = 3.0
    max_half_age: float = 72 * 3600.0
    batch_timeout: float = 600.0
    max_delay: float = 72 * 3600.0
    max_delivery_attempts: int = 17
    retention: float = 72 * 3600.0
    retention_bytes: int | None = None
    flush: Flush = Flush.SYNC
    max_body_bytes: int = 4 * 1024 * 1024
    topics: tuple[Topic, ...] = ()
    auth_token: str | None = None
    tls: TlsFiles | None = None
    metrics_open: bool = False
    test_controls: bool = False

    @property
    def retention_policy(self) -> RetentionPolicy:
        return RetentionPolicy(self.retention, self.retention_bytes)

    @property
    def check_policy(self) -> CheckPolicy:
        return CheckPolicy(
            transaction_timeout=self.transaction_timeout,
            check_max=self.check_max,
            check_timeout=self.check_timeout,
            max_half_age=self.max_half_age,
        )


def parse_topic(spec: str) -> Topic:
    """``NAME[:QUEUES[:TYPE]]`` (queues default to 4, TYPE one of NORMAL, FIFO, DELAY,
    TRANSACTION; none accepts every type) → Topic."""
    name, _, rest = spec.strip().partition(":")
    queues, _, kind = rest.partition(":")
    try:
        return Topic(name, int(queues) if queues else 4, message_type=MessageType(kind.upper()) if kind else None)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"topic must be NAME[:QUEUES[:TYPE]], TYPE one of {', '.join(t.value for t in MessageType)}; got {spec!r}"
        ) from None


def parse_address(spec: str) -> tuple[str, int]:
    """``HOST:PORT`` → ``(host, port)``."""
    host, _, port = spec.strip().rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"must be HOST:PORT, got {spec!r}")
    return host, int(port)


def _positive(kind: type[int] | type[float], *, zero: bool = False) -> Callable[[str], int | float]:
    def convert(text: str) -> int | float:
        value = kind(text)
        if value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(f"must be {'>=' if zero else '>'} 0, got {text}")
        return value

    convert.__name__ = kind.__name__
    return convert


def _on_off(text: str) -> bool:
    if text not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"must be on or off, got {text!r}")
    return text == "on"


_OPTIONS: tuple[tuple[str, Callable[[str], Any], str], ...] = (
    ("data_dir", Path, "directory of the SQLite store (default ./halfmq-data)"),
    ("host", str, "address to bind (default 127.0.0.1)"),
    ("grpc_port", int, "native gRPC port (default 10911)"),
    ("http_port", int, "HTTP admin port (default 8080)"),
    ("rocketmq_port", int, "RocketMQ 5 gRPC port, served when halfmq[rocketmq] is installed (default 8081)"),
    ("kafka_port", int, "Kafka protocol port (default 9092)"),
    (
        "namesrv_port",
        int,
        "RocketMQ name server port, for RocketMQ's remoting clients (setNamesrvAddr) (default 9876)",
    ),
    (
        "remoting_port",
        int,
        "RocketMQ remoting broker port, which the name server routes remoting clients to (default 10921)",
    ),
    (
        "advertised_address",
        parse_address,
        "HOST:PORT that RocketMQ 5 routes name for this broker, and whose host Kafka metadata and the RocketMQ name"
        " server's routes (with --remoting-port) name"
        " (default: the address each client connected to)",
    ),
    (
        "kafka_advertised_address",
        parse_address,
        "HOST:PORT that Kafka metadata names for this broker, as clients outside a container or behind a remapped"
        " port reach it, like Kafka's advertised.listeners (default: --advertised-address's host, else the address"
        " each client connected to, with the port it connected to)",
    ),
    (
        "auto_create_topics",
        _on_off,
        "on: a Kafka client's first use of a topic nobody created creates it, with one partition, as Kafka's"
        " auto.create.topics.enable and num.partitions, and a RocketMQ remoting producer's first send with the queues"
        " it asks for, as RocketMQ's autoCreateTopicEnable; off: UNKNOWN_TOPIC_OR_PARTITION, TOPIC_NOT_EXIST"
        " (default on)",
    ),
    (
        "group_initial_rebalance_delay",
        _positive(float, zero=True),
        "seconds a new Kafka consumer group's first rebalance waits for more members, and again after each one"
        " joins, within the rebalance timeout: Kafka's group.initial.rebalance.delay.ms (default 0, as Kafka's"
        " shipped server.properties; Kafka's built-in default is 3)",
    ),
    (
        "pull_processes",
        _positive(int, zero=True),
        "processes serving pulls beside the broker, each on its own port, advertised to clients (default 0: none)",
    ),
    ("pull_port", _positive(int, zero=True), "first pull process's port, the next ones follow (default 0: any free)"),
    (
        "segments",
        _on_off,
        "on: keep committed messages also packed, a pull's worth per segment, for fast pulls (up to twice the"
        " disk of committed topics); off: rows only (default on)",
    ),
    ("check_interval", _positive(float), "seconds between check rounds (default 30)"),
    ("transaction_timeout", _positive(float), "seconds before an unresolved half message is checked (default 6)"),
    ("check_max", _positive(int), "checks before a half message is discarded (default 5)"),
    ("check_timeout", _positive(float), "seconds to wait for a check's answer (default 3)"),
    ("max_half_age", _positive(float), "seconds after which a half message is discarded regardless (default 259200)"),
    (
        "batch_timeout",
        _positive(float),
        "seconds an exactly-once batch may stay open before its messages are rolled back (default 600)",
    ),
    (
        "max_delay",
        _positive(float),
        "seconds ahead a delayed message may be due; later ones are refused (default 259200, 72 h, as RocketMQ)",
    ),
    (
        "max_delivery_attempts",
        _positive(int),
        "deliveries of a message to a consumer group before it goes to the group's dead-letter topic %%DLQ%%<group>,"
        " for groups without their own (default 17: RocketMQ's 16 retries after the first)",
    ),
    (
        "retention",
        _positive(float, zero=True),
        "seconds committed messages and resolved transactions are kept; 0 keeps everything (default 259200, 72 h)",
    ),
    (
        "retention_bytes",
        _positive(int),
        "most bytes the store may use: the oldest messages go first (default: no limit)",
    ),
    ("flush", Flush, "sync: fsync before acknowledging (default); async: survive a process crash only"),
    ("max_body_bytes", _positive(int), "largest accepted message: body, keys, tags and properties (default 4 MiB)"),
    (
        "auth_token",
        str,
        "shared token: every native gRPC call and HTTP call but /healthz carries it as a bearer token, RocketMQ 5"
        " clients sign their calls with it as the secret key, Kafka clients give it as the SASL PLAIN password"
        " (default: none)",
    ),
    ("auth_token_file", Path, "file holding the auth token, e.g. a mounted secret (instead of --auth-token)"),
    (
        "tls_cert",
        Path,
        "PEM certificate chain: every port (native gRPC, HTTP, RocketMQ 5, Kafka, the pull processes') serves TLS",
    ),
    ("tls_key", Path, "PEM private key of --tls-cert"),
    ("tls_client_ca", Path, "PEM CA bundle: clients must present a certificate it signed (mutual TLS)"),
)


def load_settings(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Build the settings from ``argv`` (flags) over ``env`` (``HALFMQ_<NAME>``) over defaults.

    Raises SystemExit with a usage message on a bad flag or variable.
    """
    env = env or {}
    parser = argparse.ArgumentParser(prog="halfmq-broker", description="halfmq transactional message broker")
    for name, kind, help_text in _OPTIONS:
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, help=help_text)
    parser.add_argument(
        "--test-controls",
        action="store_true",
        help="serve the test controls under /test: a movable clock, fault injection, check rounds on demand",
    )
    parser.add_argument(
        "--metrics-open",
        action="store_true",
        help="serve /metrics without the auth token, for scrapers on a trusted network",
    )
    parser.add_argument(
        "--topic",
        dest="topics",
        action="append",
        type=parse_topic,
        help="NAME[:QUEUES[:TYPE]], created at start-up; a TYPE (NORMAL, FIFO, DELAY, TRANSACTION) makes it"
        " accept that type only; repeatable",
    )
    args = parser.parse_args(argv)
    values: dict[str, object] = {}
    for name, kind, _ in _OPTIONS:
        raw = env.get(f"HALFMQ_{name.upper()}")
        if raw is not None:
            try:
                values[name] = kind(raw)
            except (ValueError, argparse.ArgumentTypeError) as exc:
                parser.error(f"HALFMQ_{name.upper()}={raw!r}: {exc}")
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    topics = list(args.topics or [])
    if not topics and env.get("HALFMQ_TOPICS"):
        try:
            topics = [parse_topic(spec) for spec in env["HALFMQ_TOPICS"].split(",") if spec.strip()]
        except argparse.ArgumentTypeError as exc:
            parser.error(f"HALFMQ_TOPICS: {exc}")
    switches = {name: getattr(args, name) or _switched_on(env, name) for name in ("test_controls", "metrics_open")}
    token_file = values.pop("auth_token_file", None)
    if token_file is not None:
        if "auth_token" in values:
            parser.error("give the auth token or a file holding it, not both")
        try:
            values["auth_token"] = Path(str(token_file)).read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            parser.error(f"cannot read the auth token file: {exc}")
    if values.get("auth_token") == "":
        parser.error(
            "the auth token is empty: give a token, or leave --auth-token(-file) and HALFMQ_AUTH_TOKEN(_FILE) unset"
        )
    cert, key, client_ca = (values.pop(f"tls_{name}", None) for name in ("cert", "key", "client_ca"))
    if cert is not None or key is not None or client_ca is not None:
        if cert is None or key is None:
            parser.error("TLS needs both --tls-cert and --tls-key (HALFMQ_TLS_CERT, HALFMQ_TLS_KEY)")
        tls = TlsFiles(Path(str(cert)), Path(str(key)), None if client_ca is None else Path(str(client_ca)))
        try:
            tls.check()
        except (OSError, ssl.SSLError) as exc:
            parser.error(f"cannot use the TLS files: {exc}")
        values["tls"] = tls
    if values.get("max_body_bytes", 0) > MAX_WIRE_BYTES - WIRE_ENVELOPE_BYTES:  # type: ignore[operator]
        parser.error(
            f"--max-body-bytes must leave room for the envelope under the {MAX_WIRE_BYTES}-byte gRPC transport"
            f" limit: at most {MAX_WIRE_BYTES - WIRE_ENVELOPE_BYTES}"
        )
    processes, first_port = values.get("pull_processes", 0), values.get("pull_port", 0)
    if processes > MAX_PULL_PROCESSES:  # type: ignore[operator]
        parser.error(f"--pull-processes must be at most {MAX_PULL_PROCESSES}, got {processes}")
    if first_port and first_port + processes - 1 > 65535:  # type: ignore[operator]
        parser.error(f"--pull-port {first_port} leaves no room for {processes} pull processes below port 65536")
    return Settings(**values, topics=tuple(topics), **switches)  # type: ignore[arg-type]


def _switched_on(env: Mapping[str, str], name: str) -> bool:
    return env.get(f"HALFMQ_{name.upper()}", "").lower() in ("1", "true", "yes", "on")
