"""``halfmq peers run``: the real brokers as a user starts them, one JSON line of endpoints once
they answer, every process gone after SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_peers_run_kafka_announces_a_bootstrap_that_takes_records_and_stops_on_sigterm(tmp_path):
    from confluent_kafka import Producer

    peer = subprocess.Popen([sys.executable, "-m", "halfmq_cli", "peers", "run", "kafka", "--workdir", str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert peer.stdout is not None
        announced = json.loads(peer.stdout.readline())
        assert (announced["peer"], announced["version"]) == ("kafka", "4.4.0")
        producer = Producer({"bootstrap.servers": announced["bootstrap"]})
        producer.produce("first-use", b"x")  # Kafka creates the topic on first use
        assert producer.flush(60) == 0
    finally:
        peer.send_signal(signal.SIGTERM)
        assert peer.wait(120) == 0
    deadline = time.monotonic() + 30
    while not all(gone(pid) for pid in announced["pids"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(gone(pid) for pid in announced["pids"]), "every JVM of the peer stopped"
