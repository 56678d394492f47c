"""Plain sends per second from one client, 1 KB messages (each body its own), sync flush,
against a broker process: ``Producer.send_batch`` (a Message object per message, made in the
timed loop, batches of ``--batch``) beside ``Producer.send_table`` (one Arrow table of them all,
built before the clock starts, as a table read from Parquet or handed over by Spark is), in
alternating rounds; one broker per ``--segments`` value (with segments on, the packer packs what
was just written). What building that table from a Python list of bodies costs is printed
beside, not counted.

    .venv/bin/python -m bench.produce --messages 100000 --batch 1024 --rounds 2 --segments on
    .venv/bin/python -m bench.produce --messages 400000 --rounds 3 --baseline ../base

With ``--baseline`` (another source tree, a git worktree of an earlier commit, say), that tree's
broker runs too, alternating with this one's in every round, and each way's ratio to it is printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from bench.txn import ROOT, start_broker
from producer_sdk import Message, Producer


def send_batches(producer: Producer, topic: str, bodies: list[bytes], batch: int) -> float:
    """Messages per second, making the Message objects included."""
    began = time.perf_counter()
    for start in range(0, len(bodies), batch):
        producer.send_batch([Message(topic=topic, body=body) for body in bodies[start : start + batch]])
    return len(bodies) / (time.perf_counter() - began)


def send_table(producer: Producer, topic: str, bodies: list[bytes], batch: int) -> float:
    """Messages per second of ``send_table`` on a table built before."""
    table = bodies_table(bodies)
    began = time.perf_counter()
    producer.send_table(topic, table)
    return len(bodies) / (time.perf_counter() - began)


def bodies_table(bodies: list[bytes]) -> pa.Table:
    return pa.table({"body": pa.array(bodies, pa.binary())})


def distinct_bodies(count: int, size: int) -> list[bytes]:
    """``count`` bodies of ``size`` random bytes, each its own (its number first), as real
    messages are: none is stored as a repeat of another."""
    tail = os.urandom(max(size - 8, 0))
    return [(i.to_bytes(8, "big") + tail)[:size] for i in range(count)]


WAYS: dict[str, Callable[[Producer, str, list[bytes], int], float]] = {
    "send_batch": send_batches,
    "send_table": send_table,
}


def measure(address: str, way: str, bodies: list[bytes], batch: int) -> float:
    with Producer(broker=address) as producer:
        return WAYS[way](producer, "produce", bodies, batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--segments", default="on", help="the broker's --segments; on,off runs both")
    parser.add_argument("--baseline", type=Path, help="another source tree whose broker also runs, and compares")
    args = parser.parse_args()
    bodies = distinct_bodies(args.messages, args.body)
    trees = [ROOT] if args.baseline is None else [ROOT, args.baseline.resolve()]
    runs = [(way, segments, tree) for segments in args.segments.split(",") for way in WAYS for tree in trees]
    rates: dict[tuple[str, str, Path], list[float]] = {run: [] for run in runs}
    for _ in range(args.rounds):
        for way, segments, tree in runs:
            data = Path(tempfile.mkdtemp(prefix="halfmq-bench-produce-"))
            broker, address = start_broker(
                data, "--flush", "sync", "--segments", segments, "--topic", "produce:4", tree=tree
            )
            try:
                rates[(way, segments, tree)].append(measure(address, way, bodies, args.batch))
            finally:
                broker.terminate()
                broker.wait()
                shutil.rmtree(data, ignore_errors=True)
    print(f"config: messages={args.messages} batch={args.batch} body={args.body}B flush=sync cpus={os.cpu_count()}")
    for (way, segments, tree), measured in rates.items():
        print(f"{way}, segments {segments}, {tree}: {' / '.join(f'{r:,.0f}' for r in measured)} msg/s,"
              f" mean {statistics.mean(measured):,.0f}")  # fmt: skip
    if args.baseline is not None:
        for way, segments, tree in runs:
            if tree != ROOT:
                ratio = statistics.mean(rates[(way, segments, ROOT)]) / statistics.mean(rates[(way, segments, tree)])
                print(f"ratio {way}, segments {segments}: this tree / {tree}: {ratio:.3f}")
    began = time.perf_counter()
    bodies_table(bodies)
    print(f"building the table from a Python list of bodies (not counted above):"
          f" {args.messages / (time.perf_counter() - began):,.0f} msg/s")  # fmt: skip
    for segments in args.segments.split(","):
        table, batch = (statistics.mean(rates[(way, segments, ROOT)]) for way in ("send_table", "send_batch"))
        print(f"segments {segments}: send_table / send_batch {table / batch:.2f}; send_table {table:,.0f} msg/s"
              " (goal: at least 100,000)")  # fmt: skip


if __name__ == "__main__":
    main()
