"""The real brokers as session fixtures (``rocketmq_peer``, ``kafka_peer``), started once per
test run and shared by every pytest-xdist worker.

The first worker that asks starts ``halfmq peers run NAME`` as a process of its own, under a lock
in a folder the controlling pytest process made; the others read its endpoints from there. The
controlling process stops every peer at the end of the run, and each peer also stops when that
process ends, however it ends.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from halfmq_peers.jvm import PeerFailed

SHARED = "HALFMQ_PEERS_SHARED"  # the folder, set by the controlling process for its workers
OWNER = "HALFMQ_PEERS_OWNER"  # the controlling process's pid
# A fresh machine fetches a broker's jars through Maven first; a JVM on a busy machine starts slowly.
START_TIMEOUT = 900.0


@dataclass(frozen=True)
class RunningPeer:
    """A real broker started by ``halfmq peers run``: its name, version, endpoints (RocketMQ:
    ``namesrv``, ``proxy``; Kafka: ``bootstrap``) and the folder of its data and logs."""

    name: str
    version: str
    endpoints: Mapping[str, str]
    workdir: Path
    pids: tuple[int, ...] = field(default=())


def open_run() -> Path:
    """In the controlling process: the folder peers of this run are shared through."""
    folder = Path(tempfile.mkdtemp(prefix="halfmq-peers-"))
    os.environ[SHARED], os.environ[OWNER] = str(folder), str(os.getpid())
    return folder


def close_run(folder: Path) -> None:
    """In the controlling process, at the end of the run: stop every peer started, remove the folder."""
    for started in folder.glob("*/peer.json"):
        os.kill(json.loads(started.read_text())["pids"][0], signal.SIGTERM)
    for started in folder.glob("*/peer.json"):
        _wait_gone(json.loads(started.read_text())["pids"], 60)
    shutil.rmtree(folder, ignore_errors=True)


def shared_peer(name: str, config: Mapping[str, str]) -> RunningPeer:
    """The run's peer ``name``, started with ``config`` by the first caller. Raises PeerFailed."""
    folder = Path(os.environ[SHARED]) / name
    folder.mkdir(exist_ok=True)
    with (folder.parent / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        started = folder / "peer.json"
        if not started.exists():
            started.write_text(json.dumps(_start(name, folder / "work", config)))
    found: dict[str, Any] = json.loads(started.read_text())
    endpoints = {k: v for k, v in found.items() if k not in ("peer", "version", "pids")}
    return RunningPeer(name, found["version"], endpoints, folder / "work", tuple(found["pids"]))


def _start(name: str, workdir: Path, config: Mapping[str, str]) -> dict[str, Any]:
    output = workdir.parent / "run.out"
    settings = [argument for key, value in config.items() for argument in ("--config", f"{key}={value}")]
    command = [sys.executable, "-m", "halfmq_cli", "peers", "run", name, "--workdir", str(workdir), *settings,
               "--exit-with", os.environ[OWNER]]  # fmt: skip
    with output.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        text = output.read_text(errors="replace")
        for line in text.splitlines():
            if line.startswith("{"):
                announced: dict[str, Any] = json.loads(line)
                return announced
        if process.poll() is not None:
            raise PeerFailed(f"halfmq peers run {name} exited with {process.returncode}:\n{text[-4000:]}")
        time.sleep(0.5)
    process.terminate()
    raise PeerFailed(f"halfmq peers run {name}: no endpoints within {START_TIMEOUT:g} s\n{output.read_text()[-4000:]}")


def _wait_gone(pids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
