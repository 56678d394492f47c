"""What carrying batches on an open stream would save against unary batch calls (issue 9, point 2).

    .venv/bin/python -m bench.carry --seconds 4 --items 1,17 --rounds 2

Against the bare echo server, ``--in-flight`` requests at a time, each carrying ``--items`` 1 KB
items in one message, either as unary calls (what the SDK's batch RPCs are) or as messages on
one open bidirectional stream per worker (what carrying them on the session stream would be).
For each: calls per second, and the CPU time per call of the server and of the client process,
alternating the two ways ``--rounds`` times.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time

import grpc

from bench.delays import cpu_seconds
from bench.txn import start
from halfmq_testing import free_port


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def calls(address: str, way: str, in_flight: int, payload: bytes, seconds: float) -> int:
    """How many requests ``in_flight`` workers complete in ``seconds``, one way or the other."""
    async with grpc.aio.insecure_channel(address) as channel:
        count = 0
        stop_at = time.perf_counter() + seconds

        async def unary() -> None:
            nonlocal count
            echo = channel.unary_unary("/bench.Echo/Echo")
            while time.perf_counter() < stop_at:
                await echo(payload)
                count += 1

        async def stream() -> None:
            nonlocal count
            call = channel.stream_stream("/bench.Echo/Stream")()
            while time.perf_counter() < stop_at:
                await call.write(payload)
                await call.read()
                count += 1
            await call.done_writing()

        await asyncio.gather(*((unary if way == "unary" else stream)() for _ in range(in_flight)))
        return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument("--items", default="1,17", help="1 KB items per request, comma-separated")
    parser.add_argument("--in-flight", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    port = free_port()
    server = start([sys.executable, "-m", "bench._echo_server", str(port)], "ready")
    try:
        for items in map(int, args.items.split(",")):
            payload = b"x" * (1024 * items)
            for _ in range(args.rounds):
                for way in ("unary", "stream"):
                    server_cpu, client_cpu, began = cpu_seconds(server.pid), own_cpu(), time.perf_counter()
                    n = asyncio.run(calls(f"127.0.0.1:{port}", way, args.in_flight, payload, args.seconds))
                    elapsed = time.perf_counter() - began
                    server_us = (cpu_seconds(server.pid) - server_cpu) / n * 1e6
                    client_us = (own_cpu() - client_cpu) / n * 1e6
                    print(f"{items:3d} items per request, {way:6s}: {n / elapsed:6.0f} calls/s,"
                          f" {n * items / elapsed:7.0f} items/s; CPU per call: server {server_us:4.0f} µs,"
                          f" client {client_us:4.0f} µs", flush=True)  # fmt: skip
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
