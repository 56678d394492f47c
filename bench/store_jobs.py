"""What a group commit's jobs cost apart from their items (issue 9, point 3: one job per group commit).

    .venv/bin/python -m bench.store_jobs --items 32 --rounds 300

The same ``--items`` transactions (prepare, then commit) go through the store's writer as one
job of each kind, or split into 2 or 4 jobs of each kind, each in its own savepoint as the
writer runs them, in one group commit. The time of the jobs alone (not COMMIT) is timed inside
the writer's thread; the splits alternate, and the first fifth of the rounds is warm-up. The
difference is what merging the jobs of a group commit into one lookup and one ``executemany``
per statement kind would save.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from broker.model import Message, TransactionState, new_transaction_id
from broker.store import Flush, Store

SPLITS = (1, 2, 4)


async def run(items: int, rounds: int) -> None:
    store = Store(Path(tempfile.mkdtemp(prefix="halfmq-bench-jobs-")), flush=Flush.SYNC)
    await store.create_topic("bench", 4)
    body = b"x" * 1024

    def jobs(conn: sqlite3.Connection, split: int) -> float:
        parts = [
            [
                (Message("bench", body, new_transaction_id()), "bench", i % 4, new_transaction_id())
                for i in range(items // split)
            ]
            for _ in range(split)
        ]
        began = time.perf_counter()
        for part in parts:
            conn.execute("SAVEPOINT job")
            txns = store._prepare_many(conn, part, 1, None)
            conn.execute("RELEASE job")
            conn.execute("SAVEPOINT job")
            store._resolve_many(
                conn, [(t.transaction_id, TransactionState.COMMITTED, "CLIENT", "bench") for t in txns], 2
            )  # type: ignore[union-attr]
            conn.execute("RELEASE job")
        return time.perf_counter() - began

    times: dict[int, list[float]] = {split: [] for split in SPLITS}
    for _ in range(rounds):
        for split in SPLITS:
            times[split].append(await store._writer.run(lambda conn, split=split: jobs(conn, split)))
    one = statistics.median(times[1][rounds // 5 :])
    for split in SPLITS:
        median = statistics.median(times[split][rounds // 5 :])
        extra = (median - one) / (split - 1) if split > 1 else 0.0
        print(f"{items} transactions as {split} job(s) of each kind: {median * 1e6:5.0f} µs of jobs per group commit,"
              f" {median / items * 1e6:5.1f} µs per transaction; {extra * 1e6:4.0f} µs per extra pair")  # fmt: skip
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(run(args.items, args.rounds))


if __name__ == "__main__":
    main()
