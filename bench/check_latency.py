"""gRPC latency while the broker works hard: a check round of 100,000 pending messages against one
silent session, then a loop of 1,024-message pulls (issue 8). Goal: p99 under 50 ms in both.

    .venv/bin/python -m bench.check_latency --pending 100000

The store is filled through the store's own API, then ``python -m broker`` serves it. A separate
process opens a session of the messages' producer group that reads every check and never
answers (or, in the second phase, pulls 1,024 messages at a time in a loop). Meanwhile this
process times a small unary RPC (GetQueueOffsets) every 10 ms. The broker's own log gives each
round's duration; /proc gives its memory.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from broker.model import Message
from broker.store import Flush, Store
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from halfmq_testing import free_port

PULL_MESSAGES = 20_000
GROUP = "bench"


async def build(path: Path, pending: int) -> None:
    store = Store(path, flush=Flush.ASYNC)
    await store.create_topic("orders", 4)
    now_ms = int(time.time() * 1000)
    for start in range(0, pending, 5000):
        items = [(Message("orders", b"half-body-16b...", f"p{i}"), GROUP, i % 4, f"{i:032x}")
                 for i in range(start, min(start + 5000, pending))]  # fmt: skip
        await store.prepare_many(items, now_ms)
    for start in range(0, PULL_MESSAGES, 1000):
        await store.append([(Message("orders", b"b" * 1024, f"n{i}"), 0) for i in range(start, start + 1000)], now_ms)
    store.close()


def silent_session(address: str) -> None:
    async def run() -> None:
        async with grpc.aio.insecure_channel(address) as channel:
            call = pb_grpc.BrokerStub(channel).ProducerSession()
            await call.write(pb.SessionUp(hello=pb.Hello(producer_group=GROUP, client_id="silent")))
            while await call.read() is not grpc.aio.EOF:
                pass

    asyncio.run(run())


def pull_loop(address: str) -> None:
    with grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 64 << 20)]) as channel:
        broker_stub = pb_grpc.BrokerStub(channel)
        while True:
            offset = 0
            while offset < PULL_MESSAGES:
                offset = broker_stub.Pull(
                    pb.PullRequest(topic="orders", queue_id=0, offset=offset, max_messages=1024)
                ).next_offset


def probe(address: str, seconds: float) -> list[float]:
    """Latencies (ms) of GetQueueOffsets, one every 10 ms for ``seconds``."""
    latencies = []
    with grpc.insecure_channel(address) as channel:
        broker_stub = pb_grpc.BrokerStub(channel)
        broker_stub.GetQueueOffsets(pb.GetQueueOffsetsRequest(topic="orders"))
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            began = time.perf_counter()
            broker_stub.GetQueueOffsets(pb.GetQueueOffsetsRequest(topic="orders"), timeout=30)
            latencies.append((time.perf_counter() - began) * 1000)
            time.sleep(0.01)
    return latencies


def summary(name: str, latencies: list[float]) -> float:
    cuts = statistics.quantiles(latencies, n=100)
    print(f"{name:>34}: {len(latencies):5d} calls, p50 {cuts[49]:6.1f} ms, p99 {cuts[98]:6.1f} ms,"
          f" max {max(latencies):7.1f} ms")  # fmt: skip
    return cuts[98]


def memory_kib(pid: int, field: str) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+)", status, re.M).group(1))  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=15)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="halfmq-check-latency-")) / "data"
    began = time.perf_counter()
    asyncio.run(build(data, args.pending))
    print(f"store: {args.pending:,} pending half messages of one group, {PULL_MESSAGES:,} 1 KB messages in"
          f" orders/0 (built in {time.perf_counter() - began:.0f}s)")  # fmt: skip
    port, log = free_port(), data.parent / "broker.log"
    broker = subprocess.Popen(
        [sys.executable, "-m", "broker", "--data-dir", str(data), "--grpc-port", str(port), "--http-port",
         str(free_port()), "--rocketmq-port", str(free_port()), "--kafka-port", str(free_port()), "--namesrv-port", "0",
         "--remoting-port", "0",
         "--check-interval", "5", "--transaction-timeout",
         "1", "--check-timeout", "3", "--flush", "sync"],
        stdout=log.open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:
        while b"broker ready" not in log.read_bytes():
            time.sleep(0.1)
        p99 = {"idle": summary("idle broker", probe(address, 3))}
        rss_before = memory_kib(broker.pid, "VmRSS")
        load = multiprocessing.Process(target=silent_session, args=(address,), daemon=True)
        load.start()
        p99["rounds"] = summary("check rounds, one silent session", probe(address, args.seconds))
        load.terminate()
        rounds = re.findall(r"check round took ([\d.]+)s: (.*)", log.read_text())
        for seconds, report in rounds:
            print(f"{'round':>34}: {float(seconds):6.2f} s  {report}")
        print(f"{'broker memory':>34}: {rss_before / 1024:.0f} MiB before the rounds,"
              f" peak {memory_kib(broker.pid, 'VmHWM') / 1024:.0f} MiB")  # fmt: skip
        load = multiprocessing.Process(target=pull_loop, args=(address,), daemon=True)
        load.start()
        p99["pulls"] = summary("1,024-message pull loop", probe(address, args.seconds))
        load.terminate()
    finally:
        broker.terminate()
        broker.wait()
    missed = [name for name, value in p99.items() if value >= 50]
    print("goal p99 < 50 ms:", "met" if not missed else f"missed in {', '.join(missed)}")


if __name__ == "__main__":
    main()
