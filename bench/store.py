"""The store alone: prepare + commit per second through TransactionService, no gRPC.

    .venv/bin/python -m bench.store --seconds 5 --flush sync

Separates the cost of the store path (validation, group-commit writer, SQLite, fsync) from the
cost of gRPC in bench/txn.py. Message ids are time-ordered, as the SDK makes them. Two ways in
the same run: 64 concurrent tasks each preparing and committing one transaction at a time (the
single-item RPCs' path), then the batched path the batch RPCs take (prepare_many / end_many, 64
items per call, two calls in flight).

With ``--gil-busy SHARE`` (0-1), a thread beside the store runs Python code holding the GIL that
share of the time, as the broker's event loop does while it serves gRPC: the writer's thread
then waits for the GIL after each SQLite step it made without it. The batched path runs both
without and with it, so the figures show what the shared GIL costs the writer.

With ``--writer-process``, the batched path also runs with the store in a process of its own:
the same batches go to it pickled over a pipe, and its results come back the same way, beside
the busy thread when ``--gil-busy`` is given. That is the upper bound of a broker whose writer
runs in its own process (issue 9), IPC included.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import multiprocessing
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from broker.metrics import Metrics
from broker.model import Message, Resolution, Source, new_transaction_id
from broker.store import Flush, Store
from broker.transaction.service import TransactionService


def hold_gil(share: float, stop: threading.Event) -> None:
    """Hold the GIL ``share`` of the time, in slices of 0.5 ms, until ``stop`` is set."""
    while not stop.is_set():
        until = time.perf_counter() + 0.0005 * share
        while time.perf_counter() < until:
            pass
        time.sleep(0.0005 * (1 - share))


async def batched(
    prepare_many: Callable[[list[Any]], Awaitable[list[Any]]],
    end_many: Callable[[list[Any]], Awaitable[list[Any]]],
    batch: int,
    body: bytes,
    stop_at: float,
) -> int:
    """The batched path: two batches of ``batch`` transactions in flight, each prepared then
    committed, until ``stop_at``; how many transactions were committed."""
    count = 0

    async def batches() -> None:
        nonlocal count
        while time.perf_counter() < stop_at:
            txns = await prepare_many([(Message("bench", body, new_transaction_id()), "bench") for _ in range(batch)])
            await end_many([(t.transaction_id, "bench", Resolution.COMMIT, Source.CLIENT) for t in txns])
            count += batch

    await asyncio.gather(batches(), batches())
    return count


async def run(seconds: float, concurrency: int, body: bytes, flush: Flush, batch: int, gil_busy: float = 0) -> None:
    stop = threading.Event()
    if gil_busy:
        threading.Thread(target=hold_gil, args=(gil_busy, stop), daemon=True).start()
    store = Store(Path(tempfile.mkdtemp(prefix="halfmq-bench-store-")), flush=flush)
    await store.create_topic("bench", 4)
    service = TransactionService(store, max_body_bytes=len(body), metrics=Metrics())
    count = 0
    stop_at = time.perf_counter() + seconds

    async def one_at_a_time() -> None:
        nonlocal count
        while time.perf_counter() < stop_at:
            txn = await service.prepare(Message(topic="bench", body=body, message_id=new_transaction_id()), "bench")
            await service.end(txn.transaction_id, "bench", Resolution.COMMIT, Source.CLIENT)
            count += 1

    began = time.perf_counter()
    if batch == 1:
        await asyncio.gather(*(one_at_a_time() for _ in range(concurrency)))
    else:
        count = await batched(service.prepare_many, service.end_many, batch, body, stop_at)
    elapsed = time.perf_counter() - began
    stop.set()
    how = f"{concurrency} tasks, one at a time" if batch == 1 else f"batches of {batch}, two in flight"
    how += f", a thread holding the GIL {gil_busy:.0%} of the time" if gil_busy else ""
    print(f"store alone ({flush.value}, {how}): {count / elapsed:.0f} txn/s;"
          f" {count / store.write_batches:.1f} transactions per group commit")  # fmt: skip
    store.close()


def serve_store(pipe: Connection, flush: Flush, max_body_bytes: int) -> None:
    """The writer process: run each (id, kind, items) request that comes down ``pipe`` on a store
    of its own, several at a time, and send (id, results) back."""

    async def serve() -> None:
        store = Store(Path(tempfile.mkdtemp(prefix="halfmq-bench-store-")), flush=flush)
        await store.create_topic("bench", 4)
        service = TransactionService(store, max_body_bytes=max_body_bytes, metrics=Metrics())
        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        async def handle(request_id: int, kind: str, items: Any) -> None:
            results = await (service.prepare_many(items) if kind == "prepare" else service.end_many(items))
            pipe.send((request_id, results))

        def receive() -> None:
            while (request := pipe.recv()) is not None:
                loop.call_soon_threadsafe(lambda request=request: loop.create_task(handle(*request)))
            loop.call_soon_threadsafe(done.set)

        threading.Thread(target=receive, daemon=True).start()
        await done.wait()
        pipe.send(("batches", store.write_batches))
        store.close()

    asyncio.run(serve())


async def run_remote(seconds: float, body: bytes, flush: Flush, batch: int, gil_busy: float) -> None:
    """The batched path of ``run``, with the store in a writer process (``serve_store``)."""
    stop = threading.Event()
    if gil_busy:
        threading.Thread(target=hold_gil, args=(gil_busy, stop), daemon=True).start()
    ours, theirs = multiprocessing.Pipe()
    child = multiprocessing.get_context("spawn").Process(target=serve_store, args=(theirs, flush, len(body)))
    child.start()
    loop = asyncio.get_running_loop()
    waiting: dict[int, asyncio.Future[Any]] = {}
    ids = itertools.count()
    finished: asyncio.Future[int] = loop.create_future()

    def receive() -> None:
        while True:
            request_id, results = ours.recv()
            if request_id == "batches":
                loop.call_soon_threadsafe(finished.set_result, results)
                return
            loop.call_soon_threadsafe(waiting.pop(request_id).set_result, results)

    threading.Thread(target=receive, daemon=True).start()

    async def call(kind: str, items: Any) -> Any:
        request_id = next(ids)
        waiting[request_id] = loop.create_future()
        ours.send((request_id, kind, items))
        return await waiting[request_id]

    began = time.perf_counter()
    count = await batched(
        functools.partial(call, "prepare"), functools.partial(call, "end"), batch, body, began + seconds
    )
    elapsed = time.perf_counter() - began
    ours.send(None)
    group_commits = await finished
    child.join()
    stop.set()
    how = f"batches of {batch}, two in flight, the store in a writer process fed through a pipe"
    how += f", a thread holding the GIL {gil_busy:.0%} of the time" if gil_busy else ""
    print(f"store alone ({flush.value}, {how}): {count / elapsed:.0f} txn/s;"
          f" {count / group_commits:.1f} transactions per group commit")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--flush", choices=["sync", "async"], default="sync")
    parser.add_argument("--gil-busy", type=float, default=0, help="also run the batched path beside a thread"
                        " holding the GIL this share of the time (0-1)")  # fmt: skip
    parser.add_argument("--writer-process", action="store_true", help="also run the batched path with the store"
                        " in a process of its own")  # fmt: skip
    args = parser.parse_args()
    body, flush = b"x" * args.body, Flush(args.flush)
    for batch in (1, args.concurrency):
        asyncio.run(run(args.seconds, args.concurrency, body, flush, batch))
    if args.gil_busy:
        asyncio.run(run(args.seconds, args.concurrency, body, flush, args.concurrency, args.gil_busy))
    if args.writer_process:
        asyncio.run(run_remote(args.seconds, body, flush, args.concurrency, args.gil_busy))


if __name__ == "__main__":
    main()
