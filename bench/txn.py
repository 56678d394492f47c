"""Transaction throughput, as RocketMQ's TransactionProducer benchmark reports it, beside a bare gRPC echo.

    .venv/bin/python -m bench.txn --producers 64 --seconds 15 --body 1024 --flush sync

Reports send TPS, avg/p99/max latency of the whole send-execute-commit, checks sent, unexpected
checks (for transactions the client had already resolved) and duplicated checks; then, in the
same run, the rate of a bare grpc.aio unary echo of the same payload with the same concurrency,
and the ratio of transactions per second to the two-RPC echo limit (echo RPC/s / 2).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import grpc

from bench import _rabbitmq
from producer_sdk import AsyncTransactionProducer, LocalTransactionState, Message, TransactionListener

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(args: list[str], ready: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        if ready in line:
            return process
    raise RuntimeError(f"{args} exited before it was ready")


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


async def run_transactions(address: str, producers: int, seconds: float, body: bytes, listener: Listener) -> dict:
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def one_producer(index: int) -> None:
        async with AsyncTransactionProducer(group="bench", broker=address, listener=listener) as producer:
            while time.perf_counter() < stop_at:
                began = time.perf_counter()
                result = await producer.send_message_in_transaction(Message(topic="bench", body=body))
                latencies.append(time.perf_counter() - began)
                if result.local_state is not LocalTransactionState.UNKNOWN:
                    listener.resolved_by_client.add(result.transaction_id)

    began = time.perf_counter()
    await asyncio.gather(*(one_producer(i) for i in range(producers)))
    elapsed = time.perf_counter() - began
    latencies.sort()
    return {
        "tps": len(latencies) / elapsed,
        "count": len(latencies),
        "avg_ms": 1000 * sum(latencies) / len(latencies),
        "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)],
        "max_ms": 1000 * latencies[-1],
    }


async def run_echo(address: str, concurrency: int, seconds: float, body: bytes) -> float:
    async with grpc.aio.insecure_channel(address) as channel:
        echo = channel.unary_unary("/bench.Echo/Echo")
        count = 0
        stop_at = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal count
            while time.perf_counter() < stop_at:
                await echo(body)
                count += 1

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return count / (time.perf_counter() - began)


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
    args = parser.parse_args()
    body = os.urandom(args.body)

    data = Path(tempfile.mkdtemp(prefix="halfmq-bench-"))
    port = free_port()
    broker = start(
        [sys.executable, "-m", "broker", "--data-dir", str(data), "--grpc-port", str(port),
         "--http-port", "0", "--rocketmq-port", "0",
         "--topic", "bench:4",
         "--flush", args.flush, "--check-interval", "1", "--transaction-timeout", "2", "--check-timeout", "3"],
        "halfmq broker ready",
    )  # fmt: skip
    listener = Listener(args.unknown_ratio)
    try:
        txn = asyncio.run(run_transactions(f"127.0.0.1:{port}", args.producers, args.seconds, body, listener))
        time.sleep(4)  # let the last UNKNOWN transactions be checked
    finally:
        broker.terminate()
        broker.wait()
    echo_port = free_port()
    echo_server = start([sys.executable, "-m", "bench._echo_server", str(echo_port)], "ready")
    try:
        echo_rps = asyncio.run(run_echo(f"127.0.0.1:{echo_port}", args.producers, args.seconds, body))
    finally:
        echo_server.terminate()
        echo_server.wait()

    skip_peer = "--no-rabbitmq given" if args.no_rabbitmq else _rabbitmq.unavailable_reason()
    rabbit_tps = None
    if skip_peer is None:
        rabbit_tps = asyncio.run(_rabbitmq.measure(free_port(), free_port(), args.producers, args.seconds, body))

    checks = sum(listener.checks.values())
    unexpected = sum(n for t, n in listener.checks.items() if t in listener.resolved_by_client)
    duplicated = sum(n - 1 for n in listener.checks.values() if n > 1)
    print(f"config: producers={args.producers} body={args.body}B flush={args.flush} seconds={args.seconds}"
          f" unknown_ratio={args.unknown_ratio} cpus={os.cpu_count()}")  # fmt: skip
    print(f"transactions: {txn['count']}  send TPS: {txn['tps']:.0f}")
    print(
        f"latency send-execute-commit: avg {txn['avg_ms']:.2f} ms"
        f"  p99 {txn['p99_ms']:.2f} ms  max {txn['max_ms']:.2f} ms"
    )
    print(f"checks: {checks}  unexpected checks: {unexpected}  duplicated checks: {duplicated}")
    print(f"bare gRPC echo: {echo_rps:.0f} RPC/s  -> two-RPC limit {echo_rps / 2:.0f} txn/s")
    print(f"ratio TPS / two-RPC echo limit: {txn['tps'] / (echo_rps / 2):.2f}")
    if rabbit_tps is None:
        print(f"RabbitMQ AMQP transactions: not run ({skip_peer})")
    else:
        print(f"RabbitMQ AMQP transactions (tx.select, publish, tx.commit; durable queue): {rabbit_tps:.0f} txn/s")
        print(f"ratio halfmq / RabbitMQ: {txn['tps'] / rabbit_tps:.2f}")


if __name__ == "__main__":
    main()
