"""The store alone: prepare + commit per second through TransactionService, no gRPC, 64 concurrent tasks.

    .venv/bin/python -m bench.store --seconds 5 --flush sync

Separates the cost of the store path (validation, group-commit writer, SQLite, fsync) from
the cost of gRPC in bench/txn.py.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path

from broker.metrics import Metrics
from broker.model import Message, Resolution, Source
from broker.store import Flush, Store
from broker.transaction.service import TransactionService


async def run(seconds: float, concurrency: int, body: bytes, flush: Flush) -> None:
    store = Store(Path(tempfile.mkdtemp(prefix="halfmq-bench-store-")), flush=flush)
    await store.create_topic("bench", 4)
    service = TransactionService(store, max_body_bytes=len(body), metrics=Metrics())
    count = 0
    stop_at = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal count
        while time.perf_counter() < stop_at:
            txn = await service.prepare(Message(topic="bench", body=body, message_id=uuid.uuid4().hex), "bench")
            await service.end(txn.transaction_id, "bench", Resolution.COMMIT, Source.CLIENT)
            count += 1

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - began
    per_commit = 2 * count / store.write_batches
    print(f"store alone ({flush.value}): {count / elapsed:.0f} txn/s; {per_commit:.1f} jobs per group commit")
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--flush", choices=["sync", "async"], default="sync")
    args = parser.parse_args()
    asyncio.run(run(args.seconds, args.concurrency, b"x" * args.body, Flush(args.flush)))


if __name__ == "__main__":
    main()
