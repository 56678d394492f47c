"""Transaction throughput, as RocketMQ's RocketMQTransactionProducer benchmark reports it, beside a bare gRPC echo.

    .venv/bin/python -m bench.txn --producers 64 --seconds 15 --body 1024 --flush sync
    .venv/bin/python -m bench.txn --shapes shared-async --retention 0,2 --rounds 4 --no-rabbitmq
    .venv/bin/python -m bench.txn --shapes shared-async --segments on,off --rounds 3 --no-rabbitmq
    .venv/bin/python -m bench.txn --shapes shared-async --baseline ../base --rounds 3 --no-rabbitmq

Runs each client shape against one broker process, one after the other (one broker per
``--retention`` and ``--segments`` value, and per source tree with ``--baseline``, ``--rounds``
times, alternating):
- ``single``: one producer, one transaction in flight (the latency floor);
- ``shared-async`` (a): one AsyncRocketMQTransactionProducer shared by ``--producers`` asyncio tasks;
- ``shared-threads`` (b): one blocking RocketMQTransactionProducer shared by ``--producers`` threads;
- ``processes`` (c): 8 client processes, each one producer with ``--producers``/8 tasks;
- ``producers``: ``--producers`` AsyncTransactionProducers, one transaction in flight each;
- ``kafka-1``, ``kafka-10``, ``kafka-100``: Kafka-model transactions of 1, 10 or 100 messages,
  ``--producers`` AsyncTransactionalProducers (a transactional id each), one transaction in
  flight each, its sends concurrent; their committed messages per second are compared with the
  RocketMQ model's (``shared-async``, one message per transaction) of the same run.
For each: send TPS, avg/p50/p99/max latency of the whole send-execute-commit. Then checks sent,
unexpected checks (for transactions the client had already resolved) and duplicated checks; then,
in the same run, a bare grpc.aio unary echo of the same payload with the same concurrency (the
ratio to its two-RPC limit), and RabbitMQ's AMQP transactions and publisher confirms.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from bench import _rabbitmq
from halfmq_testing import free_port
from producer_sdk import (
    AsyncKafkaTransactionProducer,
    AsyncRocketMQTransactionProducer,
    LocalTransactionState,
    Message,
    RocketMQTransactionProducer,
    TransactionListener,
)

ROOT = Path(__file__).resolve().parent.parent


def start(args: list[str], ready: str, cwd: Path = ROOT) -> subprocess.Popen[bytes]:
    """Start a process in ``cwd`` whose output goes to a log file, and return it once the log says ``ready``.
    Not a pipe: once nobody read it, a pipe would fill with the broker's log, and its next log
    line would stop the broker's event loop in the middle of a measurement."""
    with tempfile.NamedTemporaryFile(prefix="halfmq-bench-", suffix=".log", delete=False) as log:
        process = subprocess.Popen(args, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    path = Path(log.name)
    while ready not in path.read_text(errors="replace"):
        if process.poll() is not None:
            raise RuntimeError(f"{args} exited before it was ready; its output is in {path}")
        time.sleep(0.05)
    print(f"{' '.join(args[1:3])} logs to {path}", flush=True)
    return process


def start_broker(data: Path, *flags: str, tree: Path = ROOT) -> tuple[subprocess.Popen[bytes], str]:
    """A broker process on ``data`` with ``flags``, its gRPC port free and its HTTP, RocketMQ and
    Kafka ports on 0 (unless ``flags`` name them), once it serves; and its gRPC address.
    ``tree``: the source tree whose broker runs (``python -m broker`` in it imports its own)."""
    port = free_port()
    args = ["--data-dir", str(data), "--grpc-port", str(port), "--http-port", "0", "--rocketmq-port", "0"]
    if (tree / "broker" / "kafka_api").is_dir():  # an older tree's broker has no Kafka port
        args += ["--kafka-port", "0"]
    if (tree / "broker" / "remoting").is_dir():
        args += ["--namesrv-port", "0", "--remoting-port", "0"]
    args += flags
    return start([sys.executable, "-m", "broker", *args], "halfmq broker ready", tree), f"127.0.0.1:{port}"


class SyncListener(TransactionListener):
    """The same decisions for the blocking producer (its listener methods run in its thread pool)."""

    def __init__(self, inner: Listener) -> None:
        self.inner = inner

    def execute_local_transaction(self, msg, arg):
        if random.random() < self.inner.unknown_ratio:
            return LocalTransactionState.UNKNOWN
        return LocalTransactionState.COMMIT

    def check_local_transaction(self, msg):
        self.inner.checks[msg.transaction_id] += 1
        return LocalTransactionState.COMMIT


class Listener(TransactionListener):
    def __init__(self, unknown_ratio: float) -> None:
        self.unknown_ratio = unknown_ratio
        self.resolved_by_client: set[str] = set()
        self.checks: Counter[str] = Counter()

    async def execute_local_transaction(self, msg, arg):
        if random.random() < self.unknown_ratio:
            return LocalTransactionState.UNKNOWN
        return LocalTransactionState.COMMIT

    async def check_local_transaction(self, msg):
        self.checks[msg.transaction_id] += 1
        return LocalTransactionState.COMMIT


KAFKA_SHAPES = {"kafka-1": 1, "kafka-10": 10, "kafka-100": 100}  # shape -> messages per transaction
SHAPES = ("single", "shared-async", "shared-threads", "processes", "producers", *KAFKA_SHAPES)
PROCESSES = 8


def stats(latencies: list[float], elapsed: float) -> dict[str, float]:
    latencies.sort()
    return {
        "tps": len(latencies) / elapsed,
        "count": len(latencies),
        "avg_ms": 1000 * sum(latencies) / len(latencies),
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)],
        "max_ms": 1000 * latencies[-1],
    }


async def transact(producer: Any, listener: Listener, body: bytes, stop_at: float, latencies: list[float]) -> None:
    """Loop over send_message_in_transaction on ``producer`` until ``stop_at``."""
    while time.perf_counter() < stop_at:
        began = time.perf_counter()
        result = await producer.send_message_in_transaction(Message(topic="bench", body=body))
        latencies.append(time.perf_counter() - began)
        if result.local_state is not LocalTransactionState.UNKNOWN:
            listener.resolved_by_client.add(result.transaction_id)


async def run_async(
    address: str, producers: int, tasks: int, seconds: float, body: bytes, listener: Listener
) -> list[float]:
    """``producers`` async producers with ``tasks`` concurrent transactions each; returns latencies."""
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def one_producer() -> None:
        async with AsyncRocketMQTransactionProducer(group="bench", broker=address, listener=listener) as producer:
            await asyncio.gather(*(transact(producer, listener, body, stop_at, latencies) for _ in range(tasks)))

    await asyncio.gather(*(one_producer() for _ in range(producers)))
    return latencies


async def run_kafka(address: str, producers: int, size: int, seconds: float, body: bytes) -> list[float]:
    """``producers`` Kafka-model producers, each committing transactions of ``size`` messages one
    after another (the sends of one transaction concurrent); returns each transaction's latency."""
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def one_producer(n: int) -> None:
        transactional_id = f"bench-{os.getpid()}-{n}"
        async with AsyncKafkaTransactionProducer(transactional_id=transactional_id, broker=address) as producer:
            while (began := time.perf_counter()) < stop_at:
                async with producer.transaction():
                    await asyncio.gather(*(producer.send(Message(topic="bench", body=body)) for _ in range(size)))
                latencies.append(time.perf_counter() - began)

    await asyncio.gather(*(one_producer(n) for n in range(producers)))
    return latencies


def run_threads(address: str, threads: int, seconds: float, body: bytes, listener: Listener) -> list[float]:
    """One blocking RocketMQTransactionProducer shared by ``threads`` threads; returns latencies."""
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds
    with RocketMQTransactionProducer(group="bench", broker=address, listener=SyncListener(listener)) as producer:

        def loop() -> None:
            while time.perf_counter() < stop_at:
                began = time.perf_counter()
                result = producer.send_message_in_transaction(Message(topic="bench", body=body))
                latencies.append(time.perf_counter() - began)
                if result.local_state is not LocalTransactionState.UNKNOWN:
                    listener.resolved_by_client.add(result.transaction_id)

        with ThreadPoolExecutor(threads) as pool:
            for future in [pool.submit(loop) for _ in range(threads)]:
                future.result()
    return latencies


def shape_main(shape: str, address: str, concurrency: int, seconds: float, body: bytes, unknown_ratio: float,
               out: Any) -> None:  # fmt: skip
    """One client process: run ``shape`` (``processes`` runs its 8 children's share) and report."""
    listener = Listener(unknown_ratio)
    began = time.perf_counter()
    if shape == "single":
        latencies = asyncio.run(run_async(address, 1, 1, seconds, body, listener))
    elif shape in ("shared-async", "processes"):
        latencies = asyncio.run(run_async(address, 1, concurrency, seconds, body, listener))
    elif shape == "shared-threads":
        latencies = run_threads(address, concurrency, seconds, body, listener)
    elif shape in KAFKA_SHAPES:
        latencies = asyncio.run(run_kafka(address, concurrency, KAFKA_SHAPES[shape], seconds, body))
    else:
        latencies = asyncio.run(run_async(address, concurrency, 1, seconds, body, listener))
    out.put((latencies, time.perf_counter() - began, dict(listener.checks), listener.resolved_by_client))


def run_shape(shape: str, address: str, concurrency: int, seconds: float, body: bytes, listener: Listener) -> dict:
    """Run a shape in fresh client processes (gRPC's asyncio support wants one event loop per
    process): one, or PROCESSES for ``processes``, each with its share of the concurrency."""
    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    count, share = (PROCESSES, concurrency // PROCESSES) if shape == "processes" else (1, concurrency)
    children = [
        spawn.Process(target=shape_main, args=(shape, address, share, seconds, body, listener.unknown_ratio, out))
        for _ in range(count)
    ]
    for child in children:
        child.start()
    latencies: list[float] = []
    elapsed = 0.0
    for _ in children:
        got, took, checks, resolved = out.get(timeout=seconds + 120)
        latencies += got
        elapsed = max(elapsed, took)
        listener.checks.update(checks)
        listener.resolved_by_client |= resolved
    for child in children:
        child.join()
    measured = stats(latencies, elapsed)
    measured["msg_per_s"] = measured["tps"] * KAFKA_SHAPES.get(shape, 1)
    return measured


async def run_echo(address: str, concurrency: int, seconds: float, body: bytes) -> dict[str, float]:
    """``concurrency`` loops of unary echo calls: ``stats`` of them (``tps`` is RPCs per second)."""
    async with grpc.aio.insecure_channel(address) as channel:
        echo = channel.unary_unary("/bench.Echo/Echo")
        latencies: list[float] = []
        stop_at = time.perf_counter() + seconds

        async def worker() -> None:
            while (began := time.perf_counter()) < stop_at:
                await echo(body)
                latencies.append(time.perf_counter() - began)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return stats(latencies, time.perf_counter() - began)


def echo_main(address: str, concurrency: int, seconds: float, body: bytes) -> dict[str, float]:
    return asyncio.run(run_echo(address, concurrency, seconds, body))


# A broker under comparison: its --retention (seconds), its --segments and its source tree.
Variant = tuple[float, str, Path]


def describe(variant: Variant) -> str:
    return f"retention {variant[0]:g} s, segments {variant[1]}" + ("" if variant[2] == ROOT else f", {variant[2]}")


def run_broker(args: argparse.Namespace, variant: Variant, body: bytes, listener: Listener) -> dict[str, dict]:
    """Start a broker with ``variant``'s retention and segments, run the shapes against it, and
    stop it; each result carries the size of the store's files (database and WAL) at the end."""
    retention, segments, tree = variant
    data = Path(tempfile.mkdtemp(prefix="halfmq-bench-"))
    broker, address = start_broker(
        data, "--topic", "bench:4", "--retention", str(retention), "--segments", segments, "--flush", args.flush,
        "--check-interval", "1", "--transaction-timeout", "2", "--check-timeout", "3", tree=tree,
    )  # fmt: skip
    results = {}
    try:
        for shape in args.shapes.split(","):
            results[shape] = run_shape(shape, address, args.producers, args.seconds, body, listener)
            results[shape]["store_mb"] = sum(f.stat().st_size for f in data.glob("halfmq.db*")) / 1e6
        time.sleep(4)  # let the last UNKNOWN transactions be checked
    finally:
        broker.terminate()
        broker.wait()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--producers", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--flush", choices=["sync", "async"], default="sync")
    parser.add_argument(
        "--unknown-ratio", type=float, default=0.01, help="share of local transactions answering UNKNOWN"
    )
    parser.add_argument("--no-rabbitmq", action="store_true", help="skip the RabbitMQ peer")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument(
        "--retention",
        default="259200",
        help="the broker's --retention in seconds; a comma-separated list runs one broker per value, and compares"
        " each to the first (default: the broker's 72 h, which deletes nothing in a run)",
    )
    parser.add_argument(
        "--segments",
        default="on",
        help="the broker's --segments; a comma-separated list (on,off) runs one broker per value, and compares",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another source tree (a git worktree of an earlier commit, say) whose broker also runs, and compares",
    )
    parser.add_argument("--rounds", type=int, default=1, help="times each broker variant is run, alternating")
    args = parser.parse_args()
    unknown = set(args.shapes.split(",")) - set(SHAPES)
    if unknown:
        parser.error(f"unknown shapes {', '.join(sorted(unknown))}: choose from {', '.join(SHAPES)}")
    body = os.urandom(args.body)

    listener = Listener(args.unknown_ratio)
    trees = [ROOT] if args.baseline is None else [ROOT, args.baseline.resolve()]
    variants = [(float(r), segments, tree) for r in args.retention.split(",") for segments in args.segments.split(",")
                for tree in trees]  # fmt: skip
    runs: dict[Variant, dict[str, list[dict]]] = {variant: {} for variant in variants}
    for _ in range(args.rounds):  # alternating, so that drift of the machine hits every setting alike
        for variant in variants:
            for shape, txn in run_broker(args, variant, body, listener).items():
                runs[variant].setdefault(shape, []).append(txn)
    echo_port = free_port()
    echo_server = start([sys.executable, "-m", "bench._echo_server", str(echo_port)], "ready")
    try:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            echoed = pool.submit(echo_main, f"127.0.0.1:{echo_port}", args.producers, args.seconds, body).result()
    finally:
        echo_server.terminate()
        echo_server.wait()
    echo_rps = echoed["tps"]

    skip_peer = "--no-rabbitmq given" if args.no_rabbitmq else _rabbitmq.unavailable_reason()
    rabbit = None
    if skip_peer is None:
        rabbit = asyncio.run(_rabbitmq.measure(free_port(), free_port(), args.producers, args.seconds, body))

    checks = sum(listener.checks.values())
    unexpected = sum(n for t, n in listener.checks.items() if t in listener.resolved_by_client)
    duplicated = sum(n - 1 for n in listener.checks.values() if n > 1)
    print(f"config: concurrency={args.producers} body={args.body}B flush={args.flush} seconds={args.seconds}"
          f" unknown_ratio={args.unknown_ratio} cpus={os.cpu_count()}")  # fmt: skip
    for (retention, segments, tree), shapes in runs.items():
        for shape, measured in shapes.items():
            for txn in measured:
                print(f"{shape:>15}: {txn['count']:7d} txn, {txn['tps']:6.0f} txn/s, {txn['msg_per_s']:6.0f} msg/s;"
                      f" transaction avg"
                      f" {txn['avg_ms']:6.2f} ms, p50 {txn['p50_ms']:6.2f} ms, p99 {txn['p99_ms']:6.2f} ms,"
                      f" max {txn['max_ms']:7.2f} ms; {describe((retention, segments, tree))},"
                      f" store {txn['store_mb']:.0f} MB")  # fmt: skip
    results = {shape: measured[-1] for shape, measured in runs[variants[0]].items()}
    print(f"checks: {checks}  unexpected checks: {unexpected}  duplicated checks: {duplicated}")
    print(f"bare gRPC echo: {echo_rps:.0f} RPC/s  -> two-RPC limit {echo_rps / 2:.0f} txn/s")
    main_shape = "shared-async" if "shared-async" in results else next(iter(results))
    main_tps = results[main_shape]["tps"]
    print(f"ratio {main_shape} TPS / two-RPC echo limit: {main_tps / (echo_rps / 2):.2f}")
    for variant in variants[1:]:
        mean = {v: statistics.mean(t["tps"] for t in runs[v][main_shape]) for v in (variants[0], variant)}
        print(f"ratio {main_shape} TPS, {describe(variant)} / {describe(variants[0])}, mean of {args.rounds}:"
              f" {mean[variant] / mean[variants[0]]:.3f}")  # fmt: skip
    if "shared-async" in results:
        for shape in (s for s in KAFKA_SHAPES if s in results):
            print(f"ratio committed msg/s, {shape} / shared-async (RocketMQ model):"
                  f" {results[shape]['msg_per_s'] / results['shared-async']['msg_per_s']:.2f}")  # fmt: skip
    if rabbit is None:
        print(f"RabbitMQ: not run ({skip_peer})")
    else:
        tx_tps, confirms_tps = rabbit
        print(f"RabbitMQ AMQP transactions ({args.producers} connections; durable queue): {tx_tps:.0f} txn/s")
        print(f"RabbitMQ publisher confirms ({args.producers} in flight; durable queue): {confirms_tps:.0f} msg/s")
        print(f"ratio halfmq {main_shape} / RabbitMQ tx: {main_tps / tx_tps:.2f};"
              f" / RabbitMQ confirms: {main_tps / confirms_tps:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
