"""A RocketMQ 5 transactional producer using the official Python client, for the compat tests.

    python -m tests.programs.rmq5_producer ENDPOINT MODE
MODE ``send``: commit "rmq-commit", roll back "rmq-rollback", send "rmq-normal"; print each receipt, exit.
MODE ``async``: send "rmq-async" with ``send_async``, print its receipt, exit.
MODE ``orphan``: send "rmq-orphan" as a half message, print ORPHANED, then wait to be killed.
MODE ``checker``: stay online answering checks with COMMIT until stdin closes.
MODE ``delay``: send "rmq-delay-kept" and "rmq-delay-recalled" delivered RMQ_DELAY seconds from
now (default 3), recall the second, print ``SENT body message_id`` and ``RECALLED message_id``, exit.
MODE ``stream``: commit "rmq-stream-<n>" for n in 0..39, retrying each send for up to 30 s, print
``ACK <body>`` for every commit the broker confirmed, record each local transaction in the file
RMQ_LOCAL_STATE, then exit. Checks (any mode) answer from that file when it is given.
"""

from __future__ import annotations

import os
import sys
import time

from rocketmq import (
    ClientConfiguration,
    Credentials,
    Message,
    Producer,
    TransactionChecker,
    TransactionResolution,
)


class LocalChecker(TransactionChecker):
    """Answers from the durable local state when there is one (RMQ_LOCAL_STATE: a file of the
    message ids whose local transaction ran, one per line); without it every check answers COMMIT."""

    def __init__(self, state: str | None) -> None:
        self.state = state

    def record(self, message_id: str) -> None:
        assert self.state is not None
        with open(self.state, "a") as file:
            file.write(message_id + "\n")

    def check(self, message: Message) -> TransactionResolution:
        print(f"CHECKED {message.body.decode()}", flush=True)
        if self.state is None:
            return TransactionResolution.COMMIT
        with open(self.state) as file:
            committed = set(file.read().split())
        return TransactionResolution.COMMIT if message.message_id in committed else TransactionResolution.ROLLBACK


def message(body: str) -> Message:
    msg = Message()
    msg.topic = "orders"
    msg.body = body.encode()
    msg.tag = "rmq"
    msg.keys = body
    return msg


def main(endpoint: str, mode: str) -> None:
    # RMQ_SK: the broker's auth token, used as the secret key that signs every call.
    credentials = Credentials("halfmq", os.environ["RMQ_SK"]) if "RMQ_SK" in os.environ else Credentials()
    checker = LocalChecker(os.environ.get("RMQ_LOCAL_STATE"))
    # RMQ_TLS: connect with TLS; the CA comes through gRPC's GRPC_DEFAULT_SSL_ROOTS_FILE_PATH.
    tls = "RMQ_TLS" in os.environ
    producer = Producer(ClientConfiguration(endpoint, credentials), ("orders",), checker, tls_enable=tls)
    producer.startup()
    if mode == "send":
        for body, commit in (("rmq-commit", True), ("rmq-rollback", False)):
            transaction = producer.begin_transaction()
            receipt = producer.send(message(body), transaction)
            transaction.commit() if commit else transaction.rollback()
            print(f"SENT {body} {receipt.message_id} {receipt.transaction_id}", flush=True)
        normal = producer.send(message("rmq-normal"))
        print(f"SENT rmq-normal {normal.message_id}", flush=True)
        producer.shutdown()
    elif mode == "async":
        later = producer.send_async(message("rmq-async")).result(timeout=30)
        print(f"SENT rmq-async {later.message_id}", flush=True)
        producer.shutdown()
    elif mode == "delay":
        due = int(time.time()) + int(os.environ.get("RMQ_DELAY", "3"))
        receipts = {}
        for body in ("rmq-delay-kept", "rmq-delay-recalled"):
            delayed = message(body)
            delayed.delivery_timestamp = due
            receipts[body] = producer.send(delayed)
            print(f"SENT {body} {receipts[body].message_id}", flush=True)
        recalled = receipts["rmq-delay-recalled"]
        print(f"RECALLED {producer.recall_message('orders', recalled.recall_handle)}", flush=True)
        producer.shutdown()
    elif mode == "orphan":
        producer.send(message("rmq-orphan"), producer.begin_transaction())
        print("ORPHANED", flush=True)
        time.sleep(3600)
    elif mode == "stream":
        # A send that failed may still have stored its half message: the durable local state (the
        # message ids whose local transaction ran) lets a check roll such a one back.
        for n in range(40):
            body, deadline = f"rmq-stream-{n}", time.monotonic() + 30
            while True:
                try:
                    transaction = producer.begin_transaction()
                    receipt = producer.send(message(body), transaction)
                    checker.record(receipt.message_id)
                    break
                except Exception as exc:  # the broker is restarting: try again
                    if time.monotonic() > deadline:
                        raise
                    print(f"RETRY {body} {exc!r}", flush=True)
                    time.sleep(0.5)
            try:
                transaction.commit()
                print(f"ACK {body}", flush=True)
            except Exception as exc:  # unconfirmed: the broker's check will ask the checker
                print(f"UNCONFIRMED {body} {exc!r}", flush=True)
            time.sleep(0.05)
        print("DONE", flush=True)
        producer.shutdown()
    else:
        print("CHECKER READY", flush=True)
        sys.stdin.read()
        producer.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
