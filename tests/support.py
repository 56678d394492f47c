"""Helpers shared by the tests: a broker on its own loop thread, a fake clock, store inspection."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import trustme

from broker.app import Broker
from broker.config import Settings
from broker.model import Topic
from broker.store import DB_FILE
from broker.store.segments import SEGMENTS_FILE
from halfmq_proto.v1 import halfmq_pb2 as pb
from producer_sdk import LocalTransactionState, TransactionListener

T = TypeVar("T")


class FakeClock:
    """A broker clock the test moves by hand (seconds)."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def broker_settings(data_dir: Path, **overrides: Any) -> Settings:
    """Settings for an in-process broker on a free port, with check rounds run by the test."""
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "grpc_port": 0,
        "http_port": 0,
        "rocketmq_port": 0,
        "kafka_port": 0,
        "namesrv_port": 0,
        "remoting_port": 0,
        "check_interval": 3600.0,
        "transaction_timeout": 1.0,
        "check_timeout": 0.5,
        "topics": (Topic("orders", 4),),
    }
    values.update(overrides)
    return Settings(**values)


class BrokerThread:
    """A real broker serving real gRPC on 127.0.0.1, its event loop on a thread of the test process."""

    def __init__(self, settings: Settings, clock: Any = None) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.broker = self.run(self._build(settings, clock))
        self.run(self.broker.start())
        self.address = f"127.0.0.1:{self.broker.grpc_port}"
        self.http = f"http://127.0.0.1:{self.broker.http_port}"

    @staticmethod
    async def _build(settings: Settings, clock: Any) -> Broker:
        return Broker(settings) if clock is None else Broker(settings, clock=clock)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=60)

    def check_once(self, now: float | None = None) -> Any:
        return self.run(self.broker.checks.check_once(now))

    def stop(self) -> None:
        self.run(self.broker.stop(grace=0.5))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


class PortForwarder:
    """A TCP forwarder on a port of its own to ``target``, as a container's port mapping or a NAT:
    the client knows only this port. Counts the connections it carried."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            self.connections += 1
            upstream = socket.create_connection(self._target)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._listener.close()


def send_half(stub: Any, message: Any, producer_group: str) -> Any:
    """One half message over the native protocol (a batch of one); its SendHalfMessageResponse.
    Fails the test if the broker refused it."""
    request = pb.SendHalfMessagesRequest(
        items=[pb.SendHalfMessageRequest(message=message, producer_group=producer_group)]
    )
    (outcome,) = stub.SendHalfMessages(request).outcomes
    assert outcome.WhichOneof("outcome") == "result", outcome.error
    return outcome.result


def end_transaction(stub: Any, request: Any) -> Any:
    """One end over the native protocol (a batch of one); its EndTransactionOutcome."""
    (outcome,) = stub.EndTransactions(pb.EndTransactionsRequest(items=[request])).outcomes
    return outcome


def topic_rows(data_dir: Path, topic: str) -> list[tuple[str, int, int, bytes]]:
    """(message_id, queue_id, queue_offset, body) of every stored message of ``topic``, read from the file."""
    with sqlite3.connect(data_dir / DB_FILE) as conn:
        return conn.execute(
            "SELECT message_id, queue_id, queue_offset, body FROM messages WHERE topic = ? ORDER BY store_offset",
            (topic,),
        ).fetchall()


def half_log(data_dir: Path) -> list[tuple[int, str, bytes]]:
    """(half offset, message_id, body) of every half message in the half log, read from the file."""
    with sqlite3.connect(data_dir / DB_FILE) as conn:
        return conn.execute("SELECT half_offset, message_id, body FROM transactions ORDER BY half_offset").fetchall()


def op_log(data_dir: Path) -> list[tuple[int, int]]:
    """(op offset, half offset) of every record in the op log, read from the file."""
    with sqlite3.connect(data_dir / DB_FILE) as conn:
        return conn.execute("SELECT op_offset, half_offset FROM op_log ORDER BY op_offset").fetchall()


def write_jobs(broker: BrokerThread) -> float:
    """How many jobs the broker's writer has run (its group-commit metric)."""
    jobs: float = broker.broker.metrics.registry.get_sample_value("halfmq_store_group_commit_jobs_sum")
    return jobs


def store_snapshot(data_dir: Path) -> dict[str, list[Any]]:
    """Every row of every table the store holds, and of the segments file's (``segments.db:``),
    to show that a refused request changed nothing."""
    snapshot = _tables(data_dir / DB_FILE, "")
    assert {"messages", "transactions", "checks", "deliveries", "consumer_offsets"} <= set(snapshot)
    if (data_dir / SEGMENTS_FILE).exists():
        snapshot |= _tables(data_dir / SEGMENTS_FILE, f"{SEGMENTS_FILE}:")
    return snapshot


def _tables(path: Path, prefix: str) -> dict[str, list[Any]]:
    with sqlite3.connect(path) as conn:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {prefix + table: sorted(conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr) for table in tables}


def wait_until(predicate: Any, timeout: float = 10.0, interval: float = 0.01) -> None:
    """Poll ``predicate`` until it is true; fail the test after ``timeout`` seconds."""

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


class ScriptedListener(TransactionListener):
    """A listener whose local transactions are a dict in memory: message key -> outcome."""

    def __init__(self, execute: Any = "COMMIT", check: Any = None) -> None:
        self.outcomes: dict[str, LocalTransactionState] = {}
        self._execute = LocalTransactionState[execute]
        self._check_default = None if check is None else LocalTransactionState[check]
        self.checked: list[str] = []

    def execute_local_transaction(self, msg: Any, arg: Any) -> Any:
        return self.outcomes.get(msg.keys[0], self._execute) if msg.keys else self._execute

    def check_local_transaction(self, msg: Any) -> Any:
        self.checked.append(msg.transaction_id)
        key = msg.keys[0] if msg.keys else ""
        return self._check_default or self.outcomes.get(key, LocalTransactionState.UNKNOWN)


class Pki:
    """A throwaway CA, the broker's certificate for 127.0.0.1, and a client certificate, as files."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir()  # the files are 0644: a container's own user must read them too
        authority = trustme.CA()
        self.ca = folder / "ca.pem"
        self.server = folder / "server.pem"
        self.client = folder / "client.pem"
        authority.cert_pem.write_to_path(str(self.ca))
        authority.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(self.server))
        authority.issue_cert("client@halfmq.test").private_key_and_cert_chain_pem.write_to_path(str(self.client))


def npm_install(folder: Path, package: str) -> Path | str:
    """``package`` installed from npm into ``folder`` (Node.js and npm from apt if missing): its
    node_modules, or why it could not be had."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "nodejs", "npm"],
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, capture_output=True, timeout=900,
        )  # fmt: skip
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "Node.js and npm could not be installed on this machine"
    installed = subprocess.run(
        ["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund", package],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if installed.returncode != 0:
        return f"npm could not install {package}: {installed.stderr[-500:]}"
    return folder / "node_modules"
