"""Consume-transform-produce exactly once with a Kafka-model transaction: read ``orders``, write one
payment per order to ``payments``, and commit the consumer group's offsets in the same
transaction as the payments made from what was read.

Killed at any point and started again, it neither loses nor repeats a payment: the next instance
takes the same transactional id, which aborts the transaction the killed one left open (its
payments and its offsets together), and reads on from the group's committed offsets. It stops
once every queue of ``orders`` has been read to its end.

    python -m examples.etl --broker 127.0.0.1:10911
"""

from __future__ import annotations

import argparse
import json

from producer_sdk import KafkaTransactionProducer, Message, PullConsumer, ReceivedMessage


def payment(order: ReceivedMessage) -> Message:
    """The payment for an order: its amount, keyed by the order's message id."""
    amount = json.loads(order.body)["amount"]
    body = json.dumps({"order": order.message_id, "amount": amount}).encode()
    return Message(topic="payments", body=body, keys=order.message_id)


def run(broker: str, *, transactional_id: str = "orders-etl-1", group: str = "etl", batch: int = 16) -> int:
    """Move every order not yet moved; return how many were moved now."""
    moved = 0
    with (
        KafkaTransactionProducer(transactional_id=transactional_id, broker=broker) as producer,
        PullConsumer(group=group, broker=broker) as consumer,
    ):
        committed = consumer.committed_offsets("orders")
        for queue_id, (low, _) in consumer.queue_offsets("orders").items():
            offset = max(committed.get(queue_id, 0), low)
            # next_offset steps over gaps too (offsets of transactions aborted before they were read)
            while (
                pulled := consumer.pull("orders", queue_id=queue_id, offset=offset, max_messages=batch)
            ).next_offset > offset:
                with producer.transaction():
                    for order in pulled.messages:
                        producer.send(payment(order))
                    producer.send_offsets_to_transaction({("orders", queue_id): pulled.next_offset}, group=group)
                moved += len(pulled.messages)
                offset = pulled.next_offset
    return moved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", default="127.0.0.1:10911", help="the broker's gRPC address")
    parser.add_argument("--transactional-id", default="orders-etl-1")
    parser.add_argument("--group", default="etl", help="the consumer group whose offsets commit with the payments")
    parser.add_argument("--batch", type=int, default=16, help="orders per transaction")
    args = parser.parse_args()
    moved = run(args.broker, transactional_id=args.transactional_id, group=args.group, batch=args.batch)
    print(f"moved {moved} orders to payments")


if __name__ == "__main__":
    main()
