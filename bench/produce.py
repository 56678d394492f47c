"""Plain sends per second from one client: ``Producer.send_batch`` of 1 KB messages, batches of
``--batch``, sync flush, against a broker process; one broker per ``--segments`` value, rounds
alternating between them (with segments on, the packer reads back what was just written).

    .venv/bin/python -m bench.produce --messages 100000 --batch 1024 --rounds 2 --segments on,off
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.txn import start_broker
from producer_sdk import Message, Producer


def send_batches(address: str, topic: str, count: int, batch: int, body: bytes) -> float:
    """Send ``count`` messages in batches; messages per second, building them included."""
    began = time.perf_counter()
    with Producer(broker=address) as producer:
        for start in range(0, count, batch):
            producer.send_batch([Message(topic=topic, body=body) for _ in range(min(batch, count - start))])
    return count / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--segments", default="on", help="the broker's --segments; on,off compares them")
    args = parser.parse_args()
    body = os.urandom(args.body)
    rates: dict[str, list[float]] = {segments: [] for segments in args.segments.split(",")}
    for _ in range(args.rounds):
        for segments, measured in rates.items():
            data = Path(tempfile.mkdtemp(prefix="halfmq-bench-produce-"))
            broker, address = start_broker(data, "--flush", "sync", "--segments", segments, "--topic", "produce:4")
            try:
                measured.append(send_batches(address, "produce", args.messages, args.batch, body))
            finally:
                broker.terminate()
                broker.wait()
                shutil.rmtree(data, ignore_errors=True)
    print(f"config: messages={args.messages} batch={args.batch} body={args.body}B flush=sync cpus={os.cpu_count()}")
    for segments, measured in rates.items():
        print(f"send_batch, segments {segments}: {' / '.join(f'{r:,.0f}' for r in measured)} msg/s,"
              f" mean {statistics.mean(measured):,.0f}")  # fmt: skip
    if len(rates) > 1:
        (first, a), (second, b) = list(rates.items())[:2]
        print(f"ratio segments {second} / segments {first}: {statistics.mean(b) / statistics.mean(a):.2f}")


if __name__ == "__main__":
    main()
