"""The clients connected now, by protocol: ``/clients`` and ``halfmq clients`` list a native
transactional producer, an official RocketMQ 5 producer, a classic RocketMQ client's producer and
consumer groups and a Kafka consumer group's member while they are connected, and none once they
have gone. The dashboard's table is checked in test_dashboard.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
from kafka import KafkaConsumer

from producer_sdk import RocketMQTransactionProducer
from tests.processes import official
from tests.support import BrokerThread, ScriptedListener, broker_settings, wait_until
from tests.test_remoting import HEART_BEAT
from tests.test_remoting import Client as RemotingClient

LISTED = {
    ("grpc", "native-app", "producer"),
    ("kafka", "kafka-readers", "consumer"),
    ("remoting", "classic-app", "producer"),
    ("remoting", "classic-readers", "consumer"),
    ("rocketmq", "RMQ5%orders", "producer"),
}


def listed(broker: BrokerThread) -> set[tuple[str, str, str]]:
    clients = httpx.get(f"{broker.http}/clients").raise_for_status().json()
    return {(c["protocol"], c["group"], c["role"]) for c in clients}


def test_every_protocol_s_clients_are_listed_by_group_while_they_are_connected(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data"))
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    rmq5 = official(f"127.0.0.1:{broker.broker.rocketmq_port}", "checker", env, stdin=subprocess.PIPE)
    try:
        assert rmq5.stdout is not None and rmq5.stdout.readline().strip() == "CHECKER READY"
        classic = RemotingClient(broker.broker.remoting_port)
        heartbeat = {"clientID": "127.0.0.1@classic", "producerDataSet": [{"groupName": "classic-app"}],
                     "consumerDataSet": [{"groupName": "classic-readers", "subscriptionDataSet": []}]}  # fmt: skip
        assert classic.call(HEART_BEAT, json.dumps(heartbeat).encode()).code == 0
        kafka = KafkaConsumer("orders", bootstrap_servers=f"127.0.0.1:{broker.broker.kafka_port}",
                              group_id="kafka-readers", client_id="kafka-reader-1")  # fmt: skip
        kafka.partitions_for_topic("orders")
        while not kafka.assignment():
            kafka.poll(timeout_ms=200)
        with RocketMQTransactionProducer(
            group="native-app", broker=broker.address, listener=ScriptedListener("COMMIT")
        ):
            wait_until(lambda: listed(broker) == LISTED, 30)
            shown = subprocess.run([sys.executable, "-m", "halfmq_cli", "--url", broker.http, "clients"],
                                   capture_output=True, text=True, timeout=60)  # fmt: skip
            assert shown.returncode == 0, shown.stderr
            rows = [line.split() for line in shown.stdout.splitlines()[1:]]  # after the header
            assert {tuple(row[:3]) for row in rows} == LISTED
            assert ["remoting", "classic-app", "producer", "127.0.0.1@classic"] in [row[:4] for row in rows]
            assert ["kafka", "kafka-readers", "consumer", "kafka-reader-1", "127.0.0.1"] in rows
        kafka.close()
        classic.sock.close()
        assert rmq5.stdin is not None
        rmq5.stdin.close()
        rmq5.wait(60)
        wait_until(lambda: listed(broker) == set(), 30)
    finally:
        if rmq5.poll() is None:
            rmq5.kill()
        broker.stop()
