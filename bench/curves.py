"""Throughput and p99 latency against concurrency, in one run: halfmq transactions (one shared
AsyncRocketMQTransactionProducer, ``shared-async`` of bench/txn.py), a bare gRPC echo (the floor of any
gRPC call here; a transaction makes two), and RabbitMQ's AMQP transactions (one message each,
durable queue, one connection per concurrent producer). Prints the table and draws the chart.

    .venv/bin/python -m bench.curves --concurrency 1,4,16,64,256 --seconds 8 --chart docs/img/txn-concurrency.png
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import shutil
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench import _rabbitmq
from bench.charts import curves
from bench.txn import Listener, echo_main, run_shape, start, start_broker, stats
from halfmq_testing import free_port


def halfmq(levels: list[int], seconds: float, body: bytes) -> list[dict[str, float]]:
    data = Path(tempfile.mkdtemp(prefix="halfmq-bench-curves-"))
    broker, address = start_broker(data, "--topic", "bench:4", "--transaction-timeout", "60")
    try:
        return [run_shape("shared-async", address, level, seconds, body, Listener(0.0)) for level in levels]
    finally:
        broker.terminate()
        broker.wait()
        shutil.rmtree(data, ignore_errors=True)


def echo(levels: list[int], seconds: float, body: bytes) -> list[dict[str, float]]:
    port = free_port()
    server = start([sys.executable, "-m", "bench._echo_server", str(port)], "ready")
    try:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            return [pool.submit(echo_main, f"127.0.0.1:{port}", level, seconds, body).result() for level in levels]
    finally:
        server.terminate()
        server.wait()


async def rabbitmq(levels: list[int], seconds: float, body: bytes) -> list[dict[str, float]]:
    server = _rabbitmq.RabbitMQ(free_port(), free_port())
    try:
        await server.wait_ready()
        return [stats(*await _rabbitmq.run_transactions(server.port, level, seconds, body)) for level in levels]
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", default="1,4,16,64,256", help="comma-separated transactions in flight")
    parser.add_argument("--seconds", type=float, default=8, help="per point")
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--chart", type=Path, help="draw the chart to this PNG file")
    args = parser.parse_args()
    levels = [int(level) for level in args.concurrency.split(",")]
    body = os.urandom(args.body)
    measured = {
        "halfmq transactions": halfmq(levels, args.seconds, body),
        "gRPC echo calls": echo(levels, args.seconds, body),
    }
    skip = _rabbitmq.unavailable_reason()
    if skip is None:
        measured["RabbitMQ AMQP transactions"] = asyncio.run(rabbitmq(levels, args.seconds, body))
    print(f"config: body={args.body}B seconds={args.seconds} per point, cpus={os.cpu_count()}, flush sync")
    print(f"{'in flight':>10}" + "".join(f" | {name + ' /s':>28} {'p99 ms':>8}" for name in measured))
    for i, level in enumerate(levels):
        print(f"{level:>10}" + "".join(f" | {m[i]['tps']:>28,.0f} {m[i]['p99_ms']:>8.1f}" for m in measured.values()))
    ours = measured["halfmq transactions"]
    for name, theirs in list(measured.items())[1:]:
        ratios = ", ".join(f"{level}: {ours[i]['tps'] / theirs[i]['tps']:.2f}" for i, level in enumerate(levels))
        print(f"ratio halfmq transactions / {name}, by concurrency: {ratios}")
    if skip is not None:
        print(f"RabbitMQ: not run ({skip})")
    if args.chart:
        curves(
            args.chart,
            f"Against concurrency: 1 KB messages, sync flush, {os.cpu_count()} cores",
            "transactions (or calls) in flight",
            levels,
            {
                "per second": {name: [m["tps"] for m in points] for name, points in measured.items()},
                "p99 latency (ms)": {name: [m["p99_ms"] for m in points] for name, points in measured.items()},
            },
        )
        print(f"chart: {args.chart}")


if __name__ == "__main__":
    main()
