"""Pull capacity of one broker process against the broker plus a second process serving pulls.

    .venv/bin/python -m bench.pull_split --messages 400000 --rounds 2

Measures the upper bound of a design not built yet (issues 9 and 10): pulls served by a process
of their own, beside the broker, on the same SQLite file (WAL lets readers in other processes
read it). The second process here is the least such a server needs: ``PullColumns`` over a
read-only connection, with the broker's own read and packing code, no checks, no TLS, no auth.

A store of committed 1 KB messages in 4 queues is built through the store's API, a broker serves
it, and a second process serves the same file. Client processes then pull ``PullColumns`` in a
loop (fetch 1024, one request ahead, no Arrow arrays), for ``--seconds`` each:
- one client on the broker;
- two clients on the broker;
- one client on the broker and one on the second process;
and the ratio of the last to the second: what a second serving process adds on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import threading
import time
from multiprocessing import Process, Queue
from pathlib import Path

import grpc

from bench.spark_ingest import fill
from bench.txn import start, start_broker
from broker.grpc_api.convert import columns_to_pb
from broker.model import PULL_BYTES, PullBatch, QueueColumns
from broker.store.reads import READ_MMAP_BYTES, read_columns_of
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from halfmq_testing import free_port
from spark_consumer.client import BrokerClient, Connection


class PullServicer(pb_grpc.BrokerServicer):
    """``PullColumns`` from a read-only connection per thread; every other RPC is unimplemented."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._local = threading.local()

    def _read(self, topic: str, queue_id: int, offset: int, limit: int) -> QueueColumns:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = sqlite3.connect(f"file:{self._path}?mode=ro", uri=True, check_same_thread=False)
            conn.execute(f"PRAGMA mmap_size={READ_MMAP_BYTES}")
        return read_columns_of(conn, topic, queue_id, offset, limit, PULL_BYTES)

    async def PullColumns(self, request: pb.PullRequest, context: object) -> pb.PullColumnsResponse:
        columns = await asyncio.to_thread(
            self._read, request.topic, request.queue_id, request.offset, request.max_messages
        )
        return columns_to_pb(PullBatch(columns, request.offset + len(columns), 0, 0))


async def serve(path: Path, port: int) -> None:
    server = grpc.aio.server(options=[("grpc.max_send_message_length", 256 * 1024 * 1024)])
    pb_grpc.add_BrokerServicer_to_server(PullServicer(path), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("pull server ready", flush=True)
    await server.wait_for_termination()


def pull_loop(address: str, queue_id: int, messages: int, seconds: float, out: Queue[float]) -> None:
    """Pull the queue over and over for ``seconds``; put the messages per second."""
    count = offset = 0
    with BrokerClient(Connection(address)) as client:
        began = time.perf_counter()
        pending = client.pull_columns_ahead("bench", queue_id, offset, 1024)
        while time.perf_counter() - began < seconds:
            reply = pending()
            count += reply.count
            offset = reply.next_offset if reply.next_offset < messages // 4 else 0
            pending = client.pull_columns_ahead("bench", queue_id, offset, 1024)
        out.put(count / (time.perf_counter() - began))


def pulls(addresses: list[str], messages: int, seconds: float) -> float:
    out: Queue[float] = Queue()
    clients = [Process(target=pull_loop, args=(a, q, messages, seconds, out)) for q, a in enumerate(addresses)]
    for client in clients:
        client.start()
    total = sum(out.get() for _ in clients)
    for client in clients:
        client.join()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=400_000)
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--serve", nargs=2, metavar=("DB", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(Path(args.serve[0]), int(args.serve[1])))
        return
    data = Path(tempfile.mkdtemp(prefix="halfmq-bench-split-"))
    asyncio.run(fill(data, args.messages, b"x" * 1024))
    broker, on_broker = start_broker(data)
    pull_port = free_port()
    puller = start(
        [sys.executable, "-m", "bench.pull_split", "--serve", str(data / "halfmq.db"), str(pull_port)], "ready"
    )
    on_puller = f"127.0.0.1:{pull_port}"
    try:
        for _ in range(args.rounds):
            one = pulls([on_broker], args.messages, args.seconds)
            two = pulls([on_broker, on_broker], args.messages, args.seconds)
            split = pulls([on_broker, on_puller], args.messages, args.seconds)
            print(f"one client on the broker: {one:,.0f} msg/s; two on the broker: {two:,.0f} msg/s;"
                  f" one on each process: {split:,.0f} msg/s; ratio {split / two:.2f}")  # fmt: skip
    finally:
        for process in (puller, broker):
            process.terminate()
            process.wait()


if __name__ == "__main__":
    main()
