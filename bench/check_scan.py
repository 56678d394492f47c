"""Cost of one check round: 10,000 pending half messages with and without 1,000,000 resolved in history.

    .venv/bin/python -m bench.check_scan --history 1000000 --pending 10000

Both stores are real SQLite files filled through the store's own API. A round delivers a check
for every pending message to an in-process producer session and counts each one; the same
round is also timed with no producer online (scan and decide only). Guarantee 6: the two
stores' rounds must be within 2x of each other.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from broker.metrics import Metrics
from broker.model import Message, Transaction, TransactionState
from broker.store import Flush, Store
from broker.transaction.check import CheckPolicy, CheckService, RoundReport
from broker.transaction.outbox import Check, CheckRequest, Outbox
from broker.transaction.registry import ProducerRegistry
from broker.transaction.service import TransactionService

GROUP = "bench"
T0_MS = 1_800_000_000_000


class CollectingSession:
    """A producer session that counts what it is sent (the producer answers nothing)."""

    producer_group = GROUP
    client_id = "bench-session"

    def __init__(self) -> None:
        self.received = 0
        self.outbox = Outbox(self._write, write_timeout=3, on_stuck=lambda: None)

    def offer(self, check: Check) -> asyncio.Future[None] | None:
        return self.outbox.offer(check)

    async def _write(self, request: CheckRequest) -> None:
        self.received += 1


async def fill(store: Store, prefix: str, count: int, resolve: bool, chunk: int = 5000) -> None:
    for start in range(0, count, chunk):
        items = [
            (Message(topic="orders", body=b"history-body-16b", message_id=f"{prefix}{i}"), GROUP, i % 4,
             f"{ord(prefix):02x}{i:030x}")
            for i in range(start, min(start + chunk, count))
        ]  # fmt: skip
        txns = [t for t in await store.prepare_many(items, T0_MS) if isinstance(t, Transaction)]
        if resolve:
            target = (TransactionState.COMMITTED, TransactionState.ROLLED_BACK)
            await asyncio.gather(
                *(store.resolve(t.transaction_id, target[n % 2], T0_MS, source="CLIENT") for n, t in enumerate(txns))
            )


async def build_store(path: Path, history: int, pending: int) -> None:
    store = Store(path, flush=Flush.ASYNC)
    await store.create_topic("orders", 4)
    await fill(store, "h", history, resolve=True)
    await fill(store, "p", pending, resolve=False)
    store.close()


def build(path: Path, history: int, pending: int) -> float:
    began = time.perf_counter()
    asyncio.run(build_store(path, history, pending))
    return time.perf_counter() - began


def time_round(path: Path, with_producer: bool) -> tuple[float, int]:
    store = Store(path, flush=Flush.SYNC)
    registry = ProducerRegistry()
    session = CollectingSession()
    if with_producer:
        registry.register(session)
    metrics = Metrics()
    transactions = TransactionService(store, max_body_bytes=1024, metrics=metrics)
    checks = CheckService(store, transactions, registry, CheckPolicy(), metrics=metrics)

    async def one_round() -> RoundReport:
        writer = asyncio.create_task(session.outbox.run())
        report = await checks.check_once(T0_MS / 1000 + 3600)
        writer.cancel()
        return report

    began = time.perf_counter()
    report = asyncio.run(one_round())
    elapsed = time.perf_counter() - began
    store.close()
    return elapsed, report.checked if with_producer else report.orphaned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", type=int, default=1_000_000)
    parser.add_argument("--pending", type=int, default=10_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="halfmq-check-scan-"))
    stores = {"no history": work / "fresh", f"{args.history:,} resolved": work / "history"}
    for name, path in stores.items():
        seconds = build(path, args.history if "resolved" in name else 0, args.pending)
        size = (path / "halfmq.db").stat().st_size
        print(f"built store '{name}' in {seconds:.1f}s ({size / 1e6:.0f} MB)")
    results = {}
    for name, path in stores.items():
        # Scan only first (leaves the store as it was), then the full round that checks everything.
        scan, orphaned = time_round(path, with_producer=False)
        full, checked = time_round(path, with_producer=True)
        results[name] = (scan, full)
        print(f"{name:>20}: scan-only round {scan * 1000:8.1f} ms ({orphaned} orphaned);"
              f" full round {full * 1000:8.1f} ms ({checked} checks delivered and counted)")  # fmt: skip
    (fresh_scan, fresh_full), (hist_scan, hist_full) = results.values()
    print(
        f"ratio history/no-history: scan-only {hist_scan / fresh_scan:.2f}x, full round {hist_full / fresh_full:.2f}x"
    )


if __name__ == "__main__":
    main()
