"""The official Kafka clients as processes: tests/programs/kafka_client.py (confluent-kafka,
kafka-python, aiokafka) and kafka_client.js (kafkajs), each mode printing JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "programs"
PYTHON_CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")
CLIENTS = (*PYTHON_CLIENTS, "kafkajs")


class ClientProcess:
    """One run of a client program; ``lines`` fills with its parsed output as it comes."""

    def __init__(self, client: str, bootstrap: str, node_modules: Path | None, *args: str) -> None:
        if client == "kafkajs":
            command = ["node", str(PROGRAMS / "kafka_client.js"), bootstrap, *args]
            env = {**os.environ, "NODE_PATH": str(node_modules)}
        else:
            command, env = [sys.executable, str(PROGRAMS / "kafka_client.py"), client, bootstrap, *args], None
        self.process = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(json.loads(line))

    def records(self) -> list[dict[str, Any]]:
        return [line["record"] for line in self.lines if "record" in line]

    def assignment(self) -> list[int] | None:
        """The partitions of its latest assignment (None before the first)."""
        assigned = [line["assigned"] for line in self.lines if "assigned" in line]
        return assigned[-1] if assigned else None

    def stop(self, timeout: float = 60) -> None:
        """Tell a consumer to close (leaving its group) and wait for it."""
        assert self.process.stdin is not None
        self.process.stdin.write("stop\n")
        self.process.stdin.flush()
        self.wait(timeout)

    def wait(self, timeout: float = 60) -> list[dict[str, Any]]:
        assert self.process.wait(timeout) == 0, f"the client exited with {self.process.returncode}"
        self._reader.join(timeout)
        return self.lines

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def run_client(client: str, bootstrap: str, node_modules: Path | None, *args: str) -> list[dict[str, Any]]:
    return ClientProcess(client, bootstrap, node_modules, *args).wait(120)


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


class Session(ClientProcess):
    """A ``transact`` run: a transactional producer doing what it is told, one line at a time."""

    def __init__(self, client: str, bootstrap: str, transactional_id: str) -> None:
        super().__init__(client, bootstrap, None, "transact", transactional_id)
        wait_for(lambda: {"ready": True} in self.lines, 60, "the transactional producer to start")

    def do(self, *commands: str) -> list[dict[str, Any]]:
        """Run ``commands``; their replies."""
        assert self.process.stdin is not None
        start = len(self.lines)
        for command in commands:
            self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        wait_for(lambda: len(self.lines) >= start + len(commands), 60, f"{commands} to be done")
        return self.lines[start:]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.wait()
