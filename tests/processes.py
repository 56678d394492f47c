"""Real processes for tests: brokers started with ``python -m broker`` (killed with SIGKILL in
fault tests), and the official RocketMQ 5 Python client's programs under ``tests/programs``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from halfmq_testing import free_port

ROOT = Path(__file__).resolve().parent.parent


def official(endpoint: str, mode: str, env: dict[str, str], **popen: object) -> subprocess.Popen[str]:
    """The official RocketMQ 5 producer program in ``mode`` (see tests/programs/rmq5_producer.py)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.programs.rmq5_producer", endpoint, mode],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, **popen,  # type: ignore[call-overload]
    )  # fmt: skip


def consume(endpoint: str, group: str, mode: str, env: dict[str, str]) -> list[str]:
    """Run the official SimpleConsumer program to its end; its output lines."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.programs.rmq5_consumer", endpoint, group, mode],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


class BrokerProcess:
    """``python -m broker`` on a fixed port and data directory, so a restart is the same broker."""

    def __init__(self, data_dir: Path, *args: str) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.http_port = free_port()
        self.rocketmq_port = free_port()
        self.kafka_port = free_port()
        self.log = data_dir.parent / "broker.log"
        self._args = [
            sys.executable,
            "-m",
            "broker",
            "--data-dir",
            str(data_dir),
            "--grpc-port",
            str(self.port),
            "--http-port",
            str(self.http_port),
            "--rocketmq-port",
            str(self.rocketmq_port),
            "--kafka-port",
            str(self.kafka_port),
            "--namesrv-port",
            "0",
            "--remoting-port",
            "0",
            "--topic",
            "orders:4",
            *args,
        ]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> None:
        """Start and wait until the gRPC port accepts. A restart after SIGKILL recovers the store
        first; on a machine busy with the rest of the suite that has taken over 20 s."""
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self._args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}; see {self.log}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"broker not listening within {timeout}s; see {self.log}")

    def kill(self) -> None:
        """SIGKILL: no chance to flush or close anything."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def terminate(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; return the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def started_broker(tmp_path: Path, *args: str) -> BrokerProcess:
    """A broker process with ``args`` on a new data directory under ``tmp_path``, serving."""
    data = tmp_path / "data"
    data.mkdir()
    broker = BrokerProcess(data, *args)
    broker.start()
    return broker
