"""Delayed messages at scale, in one run: a broker holding ``--pending`` delayed messages (due a
day later) beside one holding none, both sync flush.

    .venv/bin/python -m bench.delays --pending 1000000 --latency 2000 --seconds 15 --rounds 4

Prints: the rate at which the delayed messages were held; the broker's memory (RSS) with none,
a tenth and all of them waiting; its CPU time over 5 idle seconds with none and with all waiting
(the timer must not scan them); the transaction benchmark's shape ``shared-async`` against each
broker, alternating, and the ratio (goal: within 10 %); then ``--latency`` messages due one every
5 ms, read by a consumer pulling every queue in a loop: how long after its due time each was
first seen, p50/p99/max (goal: p99 within 100 ms), and when the broker stored it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.txn import Listener, run_shape, start_broker
from producer_sdk import Message, Producer, PullConsumer

DAY_MS = 86_400_000
BATCH = 1024


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def idle_cpu(pid: int, seconds: float = 5.0) -> float:
    """CPU seconds the broker spends over ``seconds`` while no client calls it."""
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return cpu_seconds(pid) - before


def hold(address: str, count: int, body: bytes, rss_at: dict[int, float], pid: int) -> float:
    """Send ``count`` delayed messages due a day later; messages per second. Notes the RSS after
    a tenth and after all."""
    due = int(time.time() * 1000) + DAY_MS
    began = time.perf_counter()
    with Producer(broker=address) as producer:
        for start in range(0, count, BATCH):
            producer.send_batch([Message(topic="delays", body=body, deliver_at=due + start + n)
                                 for n in range(min(BATCH, count - start))])  # fmt: skip
            if start + BATCH >= count // 10 and count // 10 not in rss_at:
                rss_at[count // 10] = rss_mib(pid)
    rate = count / (time.perf_counter() - began)
    rss_at[count] = rss_mib(pid)
    return rate


def latency(address: str, count: int, body: bytes) -> tuple[list[float], list[float]]:
    """Send ``count`` messages due one every 5 ms from 2 s on; return, per message, how long after
    its due time a pulling consumer first saw it, and when the broker stored it (ms)."""
    first_due = int(time.time() * 1000) + 2000
    due = {f"l-{n}": first_due + 5 * n for n in range(count)}
    with Producer(broker=address) as producer:
        for start in range(0, count, BATCH):
            producer.send_batch([Message(topic="latency", body=body, message_id=i, deliver_at=due[i])
                                 for i in list(due)[start:start + BATCH]])  # fmt: skip
    seen: dict[str, float] = {}
    stored: dict[str, float] = {}
    offsets = dict.fromkeys(range(4), 0)
    deadline = time.monotonic() + 5 * count / 1000 + 30
    with PullConsumer(group="bench", broker=address) as consumer:
        while len(seen) < count and time.monotonic() < deadline:
            for queue_id, offset in offsets.items():
                pulled = consumer.pull("latency", queue_id=queue_id, offset=offset, max_messages=256)
                now = time.time() * 1000
                for message in pulled.messages:
                    seen[message.message_id] = now - due[message.message_id]
                    stored[message.message_id] = message.store_timestamp - due[message.message_id]
                offsets[queue_id] = pulled.next_offset
    if len(seen) < count:
        raise RuntimeError(f"only {len(seen)} of {count} delayed messages were delivered")
    return sorted(seen.values()), sorted(stored.values())


def percentiles(values: list[float]) -> str:
    return (f"p50 {values[len(values) // 2]:.1f} ms, p99 {values[int(len(values) * 0.99)]:.1f} ms,"
            f" max {values[-1]:.1f} ms")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pending", type=int, default=1_000_000)
    parser.add_argument("--latency", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--body", type=int, default=1024)
    args = parser.parse_args()
    body = os.urandom(args.body)
    dirs = [Path(tempfile.mkdtemp(prefix="halfmq-bench-delays-")) for _ in range(2)]
    flags = ("--flush", "sync", "--topic", "bench:4", "--topic", "delays:4", "--topic", "latency:4")
    (loaded, loaded_at), (empty, empty_at) = (start_broker(d, *flags) for d in dirs)
    try:
        rss_at = {0: rss_mib(loaded.pid)}
        idle_none = idle_cpu(loaded.pid)
        rate = hold(loaded_at, args.pending, body, rss_at, loaded.pid)
        idle_all = idle_cpu(loaded.pid)
        tps: dict[str, list[float]] = {"waiting": [], "none": []}
        for _ in range(args.rounds):  # alternating, so that drift of the machine hits both alike
            for name, address in (("waiting", loaded_at), ("none", empty_at)):
                tps[name].append(run_shape("shared-async", address, 64, args.seconds, body, Listener(0.0))["tps"])
        seen, stored = latency(loaded_at, args.latency, body)
    finally:
        for broker in (loaded, empty):
            broker.terminate()
            broker.wait()
        for folder in dirs:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"config: pending={args.pending} body={args.body}B flush=sync cpus={os.cpu_count()}")
    print(f"held {args.pending:,} delayed messages at {rate:,.0f} msg/s")
    print("broker RSS: " + ", ".join(f"{count:,} waiting {mib:.0f} MiB" for count, mib in sorted(rss_at.items())))
    print(f"broker CPU over 5 idle seconds: {idle_none:.2f} s with none waiting, {idle_all:.2f} s with"
          f" {args.pending:,} waiting")  # fmt: skip
    for name, measured in tps.items():
        held = f"{args.pending:,}" if name == "waiting" else "no"
        rates = " / ".join(f"{t:,.0f}" for t in measured)
        print(f"shared-async, a broker with {held} delayed messages waiting: {rates} txn/s")
    ratio = statistics.mean(tps["waiting"]) / statistics.mean(tps["none"])
    print(f"ratio shared-async TPS, {args.pending:,} waiting / none: {ratio:.3f} (goal: at least 0.9)")
    print(f"delivery of {args.latency:,} delayed messages, seen by a pulling consumer after their due time:"
          f" {percentiles(seen)} (goal: p99 within 100 ms)")  # fmt: skip
    print(f"stored by the broker after their due time: {percentiles(stored)}")


if __name__ == "__main__":
    main()
