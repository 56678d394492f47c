"""``halfmq peers run rocketmq|kafka``: start a real broker, print one JSON line with its
endpoints once it answers, and stop it on SIGTERM or Ctrl-C (or when ``--exit-with``'s process
ends, so a test run killed outright leaves no broker behind)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from halfmq_peers.jvm import PeerFailed


class Peer(Protocol):
    endpoints: dict[str, str]
    pids: list[int]

    def start(self) -> Any: ...

    def stop(self) -> None: ...


def make(name: str, workdir: Path, config: Mapping[str, str]) -> tuple[Peer, str]:
    """The peer ``name`` (``rocketmq`` or ``kafka``) with extra settings, and its version. For
    RocketMQ, a key ``proxy.K`` is the proxy's setting K (rmq-proxy.json), any other the broker's."""
    if name == "rocketmq":
        from halfmq_peers import rocketmq

        proxy = {key.removeprefix("proxy."): _json(value) for key, value in config.items() if key.startswith("proxy.")}
        broker = {key: value for key, value in config.items() if not key.startswith("proxy.")}
        return rocketmq.RocketMQ(workdir, broker_config=broker, proxy_config=proxy), rocketmq.VERSION
    if name == "kafka":
        from halfmq_peers import kafka

        return kafka.Kafka(workdir, settings=config), kafka.VERSION
    raise ValueError(f"no such peer: {name!r} (rocketmq or kafka)")


def _json(value: str) -> Any:
    """A JSON setting's value: a number or boolean as such, anything else as the string."""
    try:
        return json.loads(value)
    except ValueError:
        return value


def run(
    name: str, workdir: Path, config: Mapping[str, str], *, exit_with: int | None, out: Callable[[str], None]
) -> None:
    """Run the peer until SIGTERM, SIGINT or the end of process ``exit_with``. Raises PeerFailed."""
    workdir.mkdir(parents=True, exist_ok=True)
    peer, version = make(name, workdir, config)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        peer.start()
        out(json.dumps({"peer": name, "version": version, **peer.endpoints, "pids": [os.getpid(), *peer.pids]}))
        sys.stdout.flush()  # the line is what a waiting reader of a pipe or file looks for
        while not stop.wait(1):
            if exit_with is not None and not _running(exit_with):
                break
    finally:
        peer.stop()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = ["PeerFailed", "make", "run"]
