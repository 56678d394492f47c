"""Broker settings: one frozen object, built once at the entry point from CLI flags and HALFMQ_* env vars.

A flag wins over its environment variable, which wins over the default.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.model import MAX_WIRE_BYTES, WIRE_ENVELOPE_BYTES, Topic
from broker.store import Flush
from broker.transaction.check import CheckPolicy


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path("./halfmq-data")
    host: str = "127.0.0.1"
    grpc_port: int = 10911
    http_port: int = 8080
    rocketmq_port: int = 8081
    check_interval: float = 30.0
    transaction_timeout: float = 6.0
    check_max: int = 5
    check_timeout: float = 3.0
    max_half_age: float = 72 * 3600.0
    flush: Flush = Flush.SYNC
    max_body_bytes: int = 4 * 1024 * 1024
    topics: tuple[Topic, ...] = ()
    auth_token: str | None = None

    @property
    def check_policy(self) -> CheckPolicy:
        return CheckPolicy(
            transaction_timeout=self.transaction_timeout,
            check_max=self.check_max,
            check_timeout=self.check_timeout,
            max_half_age=self.max_half_age,
        )


def parse_topic(spec: str) -> Topic:
    """``NAME[:QUEUES]`` (queues default to 4) → Topic."""
    name, _, queues = spec.strip().partition(":")
    try:
        return Topic(name=name, queues=int(queues) if queues else 4)
    except ValueError:
        raise argparse.ArgumentTypeError(f"topic must be NAME[:QUEUES], got {spec!r}") from None


def _positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    def convert(text: str) -> int | float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    convert.__name__ = kind.__name__
    return convert


_OPTIONS: tuple[tuple[str, Callable[[str], Any], str], ...] = (
    ("data_dir", Path, "directory of the SQLite store"),
    ("host", str, "address to bind (default 127.0.0.1)"),
    ("grpc_port", int, "native gRPC port (default 10911)"),
    ("http_port", int, "HTTP admin port (default 8080)"),
    ("rocketmq_port", int, "RocketMQ 5 gRPC port, served when halfmq[rocketmq] is installed (default 8081)"),
    ("check_interval", _positive(float), "seconds between check rounds (default 30)"),
    ("transaction_timeout", _positive(float), "seconds before an unresolved half message is checked (default 6)"),
    ("check_max", _positive(int), "checks before a half message is discarded (default 5)"),
    ("check_timeout", _positive(float), "seconds to wait for a check's answer (default 3)"),
    ("max_half_age", _positive(float), "seconds after which a half message is discarded regardless (default 259200)"),
    ("flush", Flush, "sync: fsync before acknowledging (default); async: survive a process crash only"),
    ("max_body_bytes", _positive(int), "largest accepted message: body, keys, tags and properties (default 4 MiB)"),
    ("auth_token", str, "shared token every gRPC call and mutating HTTP call must carry (default: none)"),
    ("auth_token_file", Path, "file holding the auth token, e.g. a mounted secret (instead of --auth-token)"),
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
        "--topic",
        dest="topics",
        action="append",
        type=parse_topic,
        help="NAME[:QUEUES], created at start-up; repeatable",
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
    if values.get("max_body_bytes", 0) > MAX_WIRE_BYTES - WIRE_ENVELOPE_BYTES:  # type: ignore[operator]
        parser.error(
            f"--max-body-bytes must leave room for the envelope under the {MAX_WIRE_BYTES}-byte gRPC transport"
            f" limit: at most {MAX_WIRE_BYTES - WIRE_ENVELOPE_BYTES}"
        )
    return Settings(**values, topics=tuple(topics))  # type: ignore[arg-type]
