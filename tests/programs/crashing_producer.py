"""A producer process that commits its local transaction, then hangs before answering the broker.

Its local database is a SQLite file (argv[3]); the test SIGKILLs this process once it prints
LOCAL-COMMITTED, so the half message stays unresolved at the broker.
"""

from __future__ import annotations

import sqlite3
import sys
import time

from producer_sdk import LocalTransactionState, Message, RocketMQTransactionProducer, TransactionListener


class Orders(TransactionListener):
    def __init__(self, db: str) -> None:
        self.db = db

    def execute_local_transaction(self, msg, arg):
        with sqlite3.connect(self.db) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY)")
            conn.execute("INSERT INTO orders VALUES (?)", (msg.keys[0],))
        print("LOCAL-COMMITTED", flush=True)
        time.sleep(3600)
        return LocalTransactionState.COMMIT

    def check_local_transaction(self, msg):
        return LocalTransactionState.UNKNOWN


if __name__ == "__main__":
    broker, group, db = sys.argv[1:4]
    with RocketMQTransactionProducer(group=group, broker=broker, listener=Orders(db)) as producer:
        producer.send_message_in_transaction(Message(topic="orders", body=b"order-1", keys=["order-1"]))
