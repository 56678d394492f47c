"""halfmq beside the real brokers it emulates, on this machine, in one run, with the same clients:

- start-up: from starting the broker's processes to the first acknowledged send, and the memory
  (RSS) of every process of the broker after it;
- RocketMQ (the official Python client, 1 KB, 64 in flight): transactional sends (send, local
  transaction, commit) and normal sends, against Apache RocketMQ and halfmq's RocketMQ 5 port;
  both flushing synchronously (SYNC_FLUSH, --flush sync), then both asynchronously;
- Kafka (confluent-kafka, 1 KB, acks=all): producing, consuming them back, transactions of 1 and
  of 10 records; Kafka with log.flush.interval.messages=1 against halfmq --flush sync, then
  Kafka's default (the page cache) against --flush async. halfmq's consume starts once its packer
  has packed what the produce wrote (as in bench.kafka; Kafka leaves no such work behind).

    .venv/bin/python -m bench.peers --messages 100000 --seconds 15 --transactions 300

Goals: start-up at most 0.1 and memory at most 0.25 of each real broker; RocketMQ transactional
sends at least 1.0 of the real broker's under the same flush policy; Kafka produce and consume at
least 0.5 of Kafka's, Kafka transactions at least 1.0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from rocketmq import ClientConfiguration, Credentials, Message, Producer, TransactionChecker, TransactionResolution

from bench.fresh_backlog import wait_packed
from bench.kafka import PARTITIONS, kafka_consume, kafka_produce, kafka_transactions
from bench.produce import distinct_bodies
from bench.txn import start_broker
from halfmq_peers.kafka import Kafka
from halfmq_peers.rocketmq import RocketMQ
from halfmq_testing import free_port

BODY = b"x" * 1024
IN_FLIGHT = 64


def rss_mib(pids: list[int]) -> float:
    """The resident memory of the processes, in MiB."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as status:
            total += next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return total / 1024


def ask_until(send: Callable[[], None], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            send()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class Commit(TransactionChecker):
    def check(self, message: Message) -> TransactionResolution:
        return TransactionResolution.COMMIT


def rocketmq_producer(endpoint: str, topic: str) -> Producer:
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (topic,), Commit())
    producer.startup()
    return producer


def rmq_message(topic: str) -> Message:
    message = Message()
    message.topic, message.body = topic, BODY
    return message


def rocketmq_rate(endpoint: str, topic: str, seconds: float, transactional: bool) -> float:
    """Sends a second from IN_FLIGHT threads of one official producer."""
    producer = rocketmq_producer(endpoint, topic)
    done = [0] * IN_FLIGHT
    stop_at = time.monotonic() + seconds

    def sender(slot: int) -> None:
        while time.monotonic() < stop_at:
            if transactional:
                transaction = producer.begin_transaction()
                producer.send(rmq_message(topic), transaction)
                transaction.commit()
            else:
                producer.send(rmq_message(topic))
            done[slot] += 1

    began = time.monotonic()
    threads = [threading.Thread(target=sender, args=(slot,)) for slot in range(IN_FLIGHT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    producer.shutdown()
    return sum(done) / elapsed


@contextmanager
def halfmq(flush: str) -> Iterator[dict[str, Any]]:
    """A halfmq broker: its endpoints, start-up to the first acknowledged send of each protocol, RSS."""
    data = Path(tempfile.mkdtemp(prefix="halfmq-peers-bench-"))
    rocketmq_port, kafka_port = free_port(), free_port()
    began = time.monotonic()
    process, _ = start_broker(data / "store", "--flush", flush, "--rocketmq-port", str(rocketmq_port),
                              "--kafka-port", str(kafka_port), "--topic", "bench:4", "--topic", "txn:4")  # fmt: skip
    endpoint, bootstrap = f"127.0.0.1:{rocketmq_port}", f"127.0.0.1:{kafka_port}"
    try:
        first = first_sends(endpoint, bootstrap, began)
        yield {"endpoint": endpoint, "bootstrap": bootstrap, "data": data / "store", **first,
               "rss_mib": rss_mib([process.pid])}  # fmt: skip
    finally:
        process.terminate()
        process.wait(60)
        shutil.rmtree(data, ignore_errors=True)


def first_sends(endpoint: str | None, bootstrap: str | None, began: float) -> dict[str, float]:
    """Seconds from ``began`` to the first acknowledged send of each protocol given."""
    found = {}
    if bootstrap is not None:
        from confluent_kafka import Producer as KafkaProducer

        def kafka_send() -> None:
            producer = KafkaProducer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 2000})
            producer.produce("bench", BODY)
            assert producer.flush(5) == 0

        ask_until(kafka_send)
        found["kafka_first_send_s"] = time.monotonic() - began
    if endpoint is not None:

        def rocketmq_send() -> None:
            producer = rocketmq_producer(endpoint, "bench")
            try:
                producer.send(rmq_message("bench"))
            finally:
                producer.shutdown()

        ask_until(rocketmq_send)
        found["rocketmq_first_send_s"] = time.monotonic() - began
    return found


def kafka_figures(
    bootstrap: str, messages: int, transactions: int, packed: Callable[[str], float] | None = None
) -> dict[str, float]:
    """``packed(topic)``, for halfmq, waits until its packer is done with what the produce wrote."""
    topic = f"bench-{time.time_ns()}"
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(60)
    bodies = distinct_bodies(messages, len(BODY))
    figures = {"produce": kafka_produce(bootstrap, topic, bodies, {})}
    if packed is not None:
        figures["packing_s"] = packed(topic)
    return figures | {
        "consume": kafka_consume(bootstrap, topic, messages),
        "txn_1": kafka_transactions(bootstrap, topic, transactions, BODY, size=1),
        "txn_10": kafka_transactions(bootstrap, topic, transactions, BODY, size=10),
    }


def rocketmq_figures(endpoint: str, seconds: float) -> dict[str, float]:
    return {
        "transactional": rocketmq_rate(endpoint, "txn", seconds, transactional=True),
        "normal": rocketmq_rate(endpoint, "bench", seconds, transactional=False),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000, help="records produced and consumed per run")
    parser.add_argument("--transactions", type=int, default=300, help="Kafka transactions of each size per run")
    parser.add_argument("--seconds", type=float, default=15, help="seconds of each RocketMQ send run")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for policy, (kafka_flush, rocketmq_flush, ours) in {
        "sync": ({"log.flush.interval.messages": "1"}, "SYNC_FLUSH", "sync"),
        "async": ({}, "ASYNC_FLUSH", "async"),
    }.items():
        work = Path(tempfile.mkdtemp(prefix="halfmq-peers-bench-"))
        try:
            began = time.monotonic()
            with Kafka(work / "kafka", settings=kafka_flush) as kafka:
                first = first_sends(None, kafka.endpoints["bootstrap"], began)
                results[f"kafka-{policy}"] = {**first, "rss_mib": rss_mib(kafka.pids),
                                              **kafka_figures(kafka.endpoints["bootstrap"], args.messages,
                                                              args.transactions)}  # fmt: skip
            print(json.dumps({f"kafka-{policy}": results[f"kafka-{policy}"]}), flush=True)
            began = time.monotonic()
            with RocketMQ(work / "rocketmq", broker_config={"flushDiskType": rocketmq_flush}) as rocketmq:
                proxy = rocketmq.endpoints["proxy"]
                for topic in ("bench", "txn"):  # its proxy routes no topic before it is created
                    rocketmq.create_topic(topic, 4, "NORMAL" if topic == "bench" else "TRANSACTION")
                first = first_sends(proxy, None, began)
                results[f"rocketmq-{policy}"] = {**first, "rss_mib": rss_mib(rocketmq.pids),
                                                 **rocketmq_figures(proxy, args.seconds)}  # fmt: skip
            print(json.dumps({f"rocketmq-{policy}": results[f"rocketmq-{policy}"]}), flush=True)
            with halfmq(ours) as broker:
                results[f"halfmq-{policy}"] = {
                    **{k: v for k, v in broker.items() if k not in ("endpoint", "bootstrap", "data")},
                    **kafka_figures(
                        broker["bootstrap"],
                        args.messages,
                        args.transactions,
                        partial(wait_packed, broker["data"], messages=args.messages, queues=PARTITIONS),
                    ),
                    **rocketmq_figures(broker["endpoint"], args.seconds),
                }
            print(json.dumps({f"halfmq-{policy}": results[f"halfmq-{policy}"]}), flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print_ratios(results)


def print_ratios(results: dict[str, Any]) -> None:
    def line(what: str, ours: float, theirs: float, unit: str = "") -> None:
        print(f"  {what:<34} {ours:>10,.2f}{unit} / {theirs:>10,.2f}{unit} = {ours / theirs:.2f}")

    for policy in ("sync", "async"):
        ours, kafka, rmq = (results[f"{name}-{policy}"] for name in ("halfmq", "kafka", "rocketmq"))
        print(f"\n{policy} flush: halfmq / the real broker")
        for key in ("produce", "consume", "txn_1", "txn_10"):
            line(f"Kafka {key} /s", ours[key], kafka[key])
        for key in ("transactional", "normal"):
            line(f"RocketMQ {key} sends /s", ours[key], rmq[key])
        line("start to first send, Kafka", ours["kafka_first_send_s"], kafka["kafka_first_send_s"], " s")
        line("start to first send, RocketMQ", ours["rocketmq_first_send_s"], rmq["rocketmq_first_send_s"], " s")
        line("memory against Kafka", ours["rss_mib"], kafka["rss_mib"], " MiB")
        line("memory against RocketMQ", ours["rss_mib"], rmq["rss_mib"], " MiB")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
