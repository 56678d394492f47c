"""``EmbeddedBroker``: a real ``python -m broker`` process on free 127.0.0.1 ports with its own
data directory and ``--test-controls`` on, driven through its admin API."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from producer_sdk import PullConsumer, ReceivedMessage

READY = "halfmq broker ready"
START_TIMEOUT = 60.0
PORTS_FROM = 20000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_handed_out: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, not handed out before by this process.

    It is taken below the system's ephemeral range, so no outgoing connection can take it before
    the server it is meant for binds it (a port the kernel handed out as free could be). Under
    pytest-xdist each worker takes its ports from a slice of its own, so no two workers hand out
    the same one.
    """
    start, end = _worker_slice(PORTS_FROM, _ephemeral_start())
    while True:
        port = random.randrange(start, end)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port


def _worker_slice(start: int, end: int) -> tuple[int, int]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    width = (end - start) // count
    return start + int(worker) * width, start + (int(worker) + 1) * width


def _ephemeral_start() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


class EmbeddedFaults:
    """The faults the broker injects into the next calls (they add up until ``clear``)."""

    def __init__(self, broker: EmbeddedBroker) -> None:
        self._broker = broker

    def drop_end_transactions(self, n: int) -> None:
        """The next ``n`` ends of transactions (of either model) are lost before the broker records them; the client
        gets UNAVAILABLE, as from a broken connection, and each retry is one of the ``n``."""
        self._set(drop_end_transactions=n)

    def lose_half_acks(self, n: int) -> None:
        """The next ``n`` half messages are stored, but their acknowledgements are lost."""
        self._set(lose_half_acks=n)

    def drop_txn_sends(self, n: int) -> None:
        """The next ``n`` sends of Kafka-model transactions are lost before the broker stores
        them, as when their producer dies between sends; each retry is one of the ``n``."""
        self._set(drop_txn_sends=n)

    def crash_in_commits(self, n: int) -> None:
        """The next ``n`` commits of Kafka-model transactions are stored, then the broker is
        SIGKILLed before it answers each; ``restart()`` brings it back."""
        self._set(crash_in_commits=n)

    def delay_checks(self, seconds: float) -> None:
        """Each check round, periodic or ``check_now``, waits ``seconds`` before delivering."""
        self._set(delay_checks=seconds)

    def clear(self) -> None:
        self._broker.request("PUT", "/test/faults", {})

    def _set(self, **fault: float) -> None:
        self._broker.request("PUT", "/test/faults", {**self._broker.request("GET", "/test/faults"), **fault})


class EmbeddedBroker:
    """A real broker for tests. ``topics`` are ``NAME[:QUEUES]`` specs created at start; ``flags``
    are more broker flags (``{"check_max": 3}`` becomes ``--check-max 3``). Use as ``with``."""

    def __init__(
        self, *, topics: Iterable[str] = (), data_dir: Path | None = None, flags: dict[str, object] | None = None
    ) -> None:
        self._own_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="halfmq-")) if data_dir is None else data_dir
        self.grpc_port, self.http_port, self.rocketmq_port = free_port(), free_port(), free_port()
        self.kafka_port, self.namesrv_port, self.remoting_port = free_port(), free_port(), free_port()
        self.address = f"127.0.0.1:{self.grpc_port}"
        self.rocketmq_endpoint = f"127.0.0.1:{self.rocketmq_port}"
        self.kafka_bootstrap = f"127.0.0.1:{self.kafka_port}"
        self.namesrv_endpoint = f"127.0.0.1:{self.namesrv_port}"
        self.http_url = f"http://127.0.0.1:{self.http_port}"
        self.faults = EmbeddedFaults(self)
        self.log: list[str] = []
        self._args = [
            sys.executable, "-m", "broker", "--test-controls", "--data-dir", str(self.data_dir / "store"),
            "--grpc-port", str(self.grpc_port), "--http-port", str(self.http_port),
            "--rocketmq-port", str(self.rocketmq_port), "--kafka-port", str(self.kafka_port),
            "--namesrv-port", str(self.namesrv_port), "--remoting-port", str(self.remoting_port),
            *(arg for topic in topics for arg in ("--topic", topic)),
            *(arg for name, value in (flags or {}).items() for arg in (f"--{name.replace('_', '-')}", str(value))),
        ]  # fmt: skip
        self._process: subprocess.Popen[str] | None = None
        self._offset = 0.0

    # --- life cycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the broker and wait until it serves (its clock as far ahead as it was moved)."""
        process = subprocess.Popen(self._args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        ready = threading.Event()
        threading.Thread(target=self._drain, args=(process, ready), daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT
        while not ready.wait(0.05):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait()
                raise RuntimeError(f"the broker did not become ready: {''.join(self.log[-20:])}")
        self._process = process
        if self._offset:
            self.request("POST", "/test/clock", {"advance_seconds": self._offset})
        return self

    def stop(self) -> None:
        """Stop the broker cleanly (SIGTERM), and remove its data directory if it made it."""
        self._end(kill=False)
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def discard(self) -> None:
        """Kill the broker and remove its data directory: a throwaway broker needs no clean stop."""
        self._end(kill=True)
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def crash(self) -> None:
        """SIGKILL the broker, then start it again on the same data directory and ports."""
        self._end(kill=True)
        self.start()

    def restart(self) -> None:
        """Stop the broker with SIGTERM, then start it again on the same data directory and ports."""
        self._end(kill=False)
        self.start()

    def reset(self) -> None:
        """Start again from an empty store, a clock in step with the system's, and no faults."""
        self._end(kill=False)
        shutil.rmtree(self.data_dir / "store", ignore_errors=True)
        self._offset = 0.0
        self.start()

    def _end(self, *, kill: bool) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.kill() if kill else process.terminate()
        process.wait(30)

    def _drain(self, process: subprocess.Popen[str], ready: threading.Event) -> None:
        """Keep the broker's output (so its pipe never fills) and say when it serves."""
        assert process.stdout is not None
        for line in process.stdout:
            self.log.append(line)
            if READY in line:
                ready.set()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- controls -----------------------------------------------------------------------------

    def advance_clock(self, seconds: float) -> float:
        """Move the broker's clock ``seconds`` forward (it stays ahead across restarts); return it."""
        self._offset += seconds
        return float(self.request("POST", "/test/clock", {"advance_seconds": seconds})["now"])

    def check_now(self) -> dict[str, int]:
        """Run a check round now; return once its checks were answered (and the answers recorded)
        or ``--check-timeout`` passed, with its counts: checked, answered, unanswered, waiting,
        orphaned, discarded, undelivered."""
        report: dict[str, int] = self.request("POST", "/test/checks")
        return report

    def create_topic(self, name: str, queues: int = 4) -> None:
        self.request("POST", "/topics", {"name": name, "queues": queues})

    def committed(self, topic: str) -> list[ReceivedMessage]:
        """Every committed message of ``topic`` the broker holds, in queue and offset order."""
        with PullConsumer(group="halfmq-embedded", broker=self.address) as consumer:
            messages: list[ReceivedMessage] = []
            for queue, (low, high) in sorted(consumer.queue_offsets(topic).items()):
                offset = low
                while offset < high:
                    pulled = consumer.pull(topic, queue_id=queue, offset=offset, max_messages=1024)
                    messages += pulled.messages
                    offset = pulled.next_offset
            return messages

    def transaction(self, transaction_id: str) -> dict[str, Any]:
        """The transaction's recorded state and its check history (as the admin API shows them)."""
        found: dict[str, Any] = self.request("GET", f"/transactions/{transaction_id}")
        return found

    def request(self, method: str, path: str, body: object = None) -> Any:
        """Call the broker's admin API; raise RuntimeError with its error when it refuses."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        call = urllib.request.Request(self.http_url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(call, timeout=120) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{method} {path}: HTTP {exc.code} {exc.read().decode(errors='replace')}") from None
