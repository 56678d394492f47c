"""FIFO producers and consumers using the official RocketMQ 5 Python client, for the FIFO tests.

python -m tests.programs.rmq5_fifo ENDPOINT send GROUPS COUNT
    send COUNT messages per message group (``a,b,c``), interleaved: a1 b1 a2 b2 ...
python -m tests.programs.rmq5_fifo ENDPOINT simple GROUP
    a SimpleConsumer: each round receives, acknowledges the first half of what came and keeps
    the rest in flight over the next receive; prints ``GOT body attempt`` per delivery and
    ``OVERLAP body`` when a message came while another of its message group was in flight
python -m tests.programs.rmq5_fifo ENDPOINT push GROUP MODE SECONDS
    a PushConsumer whose listener answers SUCCESS (MODE ``ok``) or FAILURE (``failing``),
    prints ``GOT body attempt`` per call and ``OVERLAP body`` when it runs beside another
    call for the same message group
"""

from __future__ import annotations

import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
)

TOPIC = "line"


def send(config: ClientConfiguration, groups: list[str], count: int) -> None:
    producer = Producer(config, (TOPIC,))
    producer.startup()
    try:
        for n in range(1, count + 1):
            for group in groups:
                message = Message()
                message.topic = TOPIC
                message.body = f"{group}{n}".encode()
                message.message_group = group
                receipt = producer.send(message)
                print(f"SENT {group}{n} {receipt.message_id}", flush=True)
    finally:
        producer.shutdown()


def simple(config: ClientConfiguration, group: str) -> None:
    consumer = SimpleConsumer(config, group, {TOPIC: FilterExpression()}, await_duration=1)
    consumer.startup()
    in_flight: dict[str, object] = {}  # message group -> message
    try:
        empty = 0
        while empty < 3 or in_flight:
            messages = consumer.receive(16, 20)
            empty = 0 if messages else empty + 1
            for message in messages:
                body = message.body.decode()
                print(f"GOT {body} {message.delivery_attempt}", flush=True)
                if message.message_group in in_flight:
                    print(f"OVERLAP {body}", flush=True)
                in_flight[message.message_group] = message
            held = list(in_flight.items())
            for message_group, message in held[: (len(held) + 1) // 2]:
                consumer.ack(message)
                del in_flight[message_group]
    finally:
        consumer.shutdown()


class Listener(MessageListener):
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.lock = threading.Lock()
        self.running: set[str] = set()

    def consume(self, message) -> ConsumeResult:
        body = message.body.decode()
        with self.lock:
            if message.message_group in self.running:
                print(f"OVERLAP {body}", flush=True)
            self.running.add(message.message_group)
            print(f"GOT {body} {message.delivery_attempt}", flush=True)
        time.sleep(0.05)
        with self.lock:
            self.running.discard(message.message_group)
        return ConsumeResult.SUCCESS if self.mode == "ok" else ConsumeResult.FAILURE


def push(config: ClientConfiguration, group: str, mode: str, seconds: float) -> None:
    consumer = PushConsumer(config, group, Listener(mode), {TOPIC: FilterExpression()})
    consumer.startup()
    time.sleep(seconds)
    consumer.shutdown()


def main(endpoint: str, mode: str, *args: str) -> None:
    config = ClientConfiguration(endpoint, Credentials())
    if mode == "send":
        send(config, args[0].split(","), int(args[1]))
    elif mode == "simple":
        simple(config, args[0])
    else:
        push(config, args[0], args[1], float(args[2]))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *sys.argv[3:])
