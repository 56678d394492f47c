"""End-to-end demo: a broker, transactional producers, then a Spark job over what was committed.

Four orders commit, one rolls back, and one leaves its outcome UNKNOWN: the broker checks back
with the producer a moment later and the producer's local database says it committed. Then
the example Spark job (spark_consumer.jobs.order_totals) ingests the committed orders exactly
once into per-customer totals (SQLite) and Parquet.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from halfmq_testing import free_port
from producer_sdk import LocalTransactionState, Message, PullConsumer, RocketMQTransactionProducer, TransactionListener


class Orders(TransactionListener):
    """A service that stores orders in its own SQLite database and publishes an event per order."""

    def __init__(self, db: Path) -> None:
        self.db = db
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE orders (id TEXT PRIMARY KEY, amount INTEGER)")

    def execute_local_transaction(self, msg: Message, arg: dict) -> LocalTransactionState:
        if arg["amount"] <= 0:
            return LocalTransactionState.ROLLBACK
        with sqlite3.connect(self.db) as conn:
            conn.execute("INSERT INTO orders VALUES (?, ?)", (msg.keys[0], arg["amount"]))
        return LocalTransactionState.UNKNOWN if arg.get("slow_reply") else LocalTransactionState.COMMIT

    def check_local_transaction(self, msg) -> LocalTransactionState:
        with sqlite3.connect(self.db) as conn:
            found = conn.execute("SELECT 1 FROM orders WHERE id = ?", (msg.keys[0],)).fetchone()
        print(f"  broker checked back on {msg.keys[0]}: {'COMMIT' if found else 'ROLLBACK'}")
        return LocalTransactionState.COMMIT if found else LocalTransactionState.ROLLBACK


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="halfmq-demo-"))
    port = free_port()
    broker = subprocess.Popen(
        [sys.executable, "-m", "broker", "--data-dir", str(work / "data"), "--grpc-port", str(port),
         "--http-port", "0", "--rocketmq-port", "0", "--kafka-port", "0", "--namesrv-port", "0", "--remoting-port", "0",
         "--topic", "orders:4", "--check-interval", "0.5", "--transaction-timeout", "1"],
        stdout=(work / "broker.log").open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:
        orders = [
            ("o-1", "alice", 30, {}),
            ("o-2", "bob", 0, {}),
            ("o-3", "bob", 12, {}),
            ("o-4", "alice", 7, {"slow_reply": True}),
            ("o-5", "carol", 99, {}),
            ("o-6", "bob", 5, {}),
        ]
        with RocketMQTransactionProducer(
            group="orders-svc", broker=address, listener=Orders(work / "orders.db")
        ) as producer:
            for key, customer, amount, extra in orders:
                body = json.dumps({"order": key, "customer": customer, "amount": amount}).encode()
                msg = Message(topic="orders", body=body, keys=[key])
                result = producer.send_message_in_transaction(msg, {"amount": amount, **extra})
                print(
                    f"{key}: local={result.local_state.value:<8} broker={result.state.value if result.state else '?'}"
                )
            print("waiting for the broker to check o-4 ...")
            time.sleep(3)
        with PullConsumer(group="demo", broker=address) as consumer:
            committed = sorted(
                m.keys[0]
                for q in consumer.queue_offsets("orders")
                for m in consumer.pull("orders", queue_id=q, offset=0).messages
            )
        print(f"committed messages readable in topic 'orders': {committed}")
        assert committed == ["o-1", "o-3", "o-4", "o-5", "o-6"], committed
        print("running the Spark job spark_consumer.jobs.order_totals (a local Spark session) ...")
        job = subprocess.run(
            [sys.executable, "-m", "spark_consumer.jobs.order_totals", "--broker", address, "--topic", "orders",
             "--checkpoint", str(work / "checkpoint"), "--sink", str(work / "totals.db"),
             "--parquet", str(work / "parquet"), "--once"],
            env={**os.environ, "PYSPARK_PYTHON": sys.executable}, stdout=subprocess.PIPE,
            stderr=(work / "spark.log").open("w"), text=True, check=True,
        )  # fmt: skip
        print("per-customer totals of committed orders (o-2 was rolled back):")
        print("  " + job.stdout.strip().replace("\n", "\n  "))
    finally:
        broker.terminate()
        broker.wait(20)
    print(f"demo finished; broker log and data in {work}")


if __name__ == "__main__":
    main()
