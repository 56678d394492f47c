"""A RocketMQ 5 SimpleConsumer using the official Python client, for the compat tests.

    python -m tests.programs.rmq5_consumer ENDPOINT GROUP MODE
MODE ``drain``: receive until a receive comes back empty; ack each message; print ``GOT body attempt``.
MODE ``never-ack``: receive one message at a time with a 1 s invisible duration for 15 s, never
acknowledging; print ``GOT body attempt``.
MODE ``redeliver``: receive one message with a 30 s invisible duration, change it to 1 s without
acking, receive until it comes again and print it with its delivery attempt; ack everything.
"""

from __future__ import annotations

import os
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer


def main(endpoint: str, group: str, mode: str) -> None:
    # RMQ_SK: the broker's auth token, used as the secret key that signs every call.
    credentials = Credentials("halfmq", os.environ["RMQ_SK"]) if "RMQ_SK" in os.environ else Credentials()
    consumer = SimpleConsumer(
        ClientConfiguration(endpoint, credentials),
        group,
        {"orders": FilterExpression()},
        await_duration=1,
        tls_enable="RMQ_TLS" in os.environ,  # the CA comes through GRPC_DEFAULT_SSL_ROOTS_FILE_PATH
    )
    consumer.startup()
    try:
        if mode == "drain":
            empty = 0
            while empty < 8:  # two empty rounds over the four queues
                messages = consumer.receive(16, 15)
                empty = 0 if messages else empty + 1
                for message in messages:
                    print(f"GOT {message.body.decode()} {message.delivery_attempt}", flush=True)
                    consumer.ack(message)
        elif mode == "never-ack":
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                for message in consumer.receive(1, 1):
                    print(f"GOT {message.body.decode()} {message.delivery_attempt}", flush=True)
        else:
            first = None
            while first is None:  # each receive polls one queue, in turn
                first = next(iter(consumer.receive(1, 30)), None)
            print(f"FIRST {first.body.decode()} {first.delivery_attempt}", flush=True)
            consumer.change_invisible_duration(first, 1)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                for message in consumer.receive(1, 30):
                    consumer.ack(message)
                    if message.message_id == first.message_id:
                        print(f"AGAIN {message.body.decode()} {message.delivery_attempt}", flush=True)
                        return
    finally:
        consumer.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
