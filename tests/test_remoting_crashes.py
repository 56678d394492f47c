"""SIGKILLs under RocketMQ's classic Java client: the broker, serving its name server and remoting
broker, is killed three times and started again on the same data directory and ports while a
TransactionMQProducer sends from 64 threads (some local transactions answered UNKNOW, so the
broker checks them back) and a DefaultMQPushConsumer consumes the topic
(tests/conformance/programs/RmqClassicCrashJava.java). No acknowledged message is lost, none is
stored or committed twice, nothing rolled back is ever delivered, and every pending transaction
is checked and resolved."""

from __future__ import annotations

import collections
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from halfmq_peers.java import java_program
from halfmq_peers.rocketmq import CLASSIC_CLIENT
from halfmq_testing import free_port
from producer_sdk import PullConsumer
from tests.kafka_clients import wait_for
from tests.processes import BrokerProcess, started_broker

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROGRAM = Path(__file__).resolve().parent / "conformance" / "programs" / "RmqClassicCrashJava.java"
TOPIC = "txn-crash"
COUNT = 3000
# Each SIGKILL comes once this many transactions are acknowledged, the later two also once the
# restarted broker has had a check of its own answered: mid-send, and mid-check as well.
KILLS = ((200, False), (700, True), (1200, True))


def rule(key: str) -> str:
    """The program's local transaction of t-i: committed when i is even, rolled back when odd."""
    return "COMMIT_MESSAGE" if int(key.removeprefix("t-")) % 2 == 0 else "ROLLBACK_MESSAGE"


def late(key: str) -> bool:
    """Whether the program answers UNKNOW at first (every 5th), to be checked back."""
    return int(key.removeprefix("t-")) % 5 == 0


class JavaApplication:
    """One run of RmqClassicCrashJava; ``lines`` fills with its JSON lines as they come."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(json.loads(line))

    def acked(self) -> int:
        self._running()
        return max((line["acked"] for line in self.lines if "acked" in line), default=0)

    def done_sending(self) -> bool:
        self._running()
        return any("all_acked" in line for line in self.lines)

    def _running(self) -> None:
        assert self.process.poll() is None, f"the program exited early with {self.process.returncode}"

    def finish(self, timeout: float = 120) -> dict[str, Any]:
        """Tell it to stop (it waits for its consumer to have every committed key); its result."""
        assert self.process.stdin is not None
        self.process.stdin.write("stop\n")
        self.process.stdin.flush()
        assert self.process.wait(timeout) == 0, f"the program exited with {self.process.returncode}"
        self._reader.join(timeout)
        (result,) = [line["result"] for line in self.lines if "result" in line]
        return result  # type: ignore[no-any-return]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def transactions(broker: BrokerProcess, state: str) -> list[dict[str, Any]]:
    """Every transaction in ``state``, through the admin API."""
    items: list[dict[str, Any]] = []
    while True:
        page = httpx.get(
            f"http://127.0.0.1:{broker.http_port}/transactions",
            params={"state": state, "limit": 1000, "offset": len(items)},
            timeout=10,
        ).json()
        items += page["items"]
        if len(items) >= page["total"] or not page["items"]:
            return items


def answered_checks(broker: BrokerProcess) -> float:
    """Check answers this broker process has had (its metrics start from zero at each start)."""
    try:
        text = httpx.get(f"http://127.0.0.1:{broker.http_port}/metrics", timeout=10).text
    except httpx.HTTPError:  # just restarted, not serving yet
        return 0
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith('halfmq_checks_total{outcome="answered_')
    )


def none_pending(broker: BrokerProcess) -> bool:
    try:
        return not transactions(broker, "PENDING")
    except httpx.HTTPError:  # just restarted, not serving yet
        return False


def topic_keys(broker: BrokerProcess) -> collections.Counter[str]:
    """How often each key is readable in the topic, read through the native API."""
    keys: collections.Counter[str] = collections.Counter()
    with PullConsumer(group="crash-audit", broker=broker.address) as consumer:
        for queue_id, (low, high) in consumer.queue_offsets(TOPIC).items():
            offset = low
            while offset < high:
                pulled = consumer.pull(TOPIC, queue_id=queue_id, offset=offset, max_messages=256)
                keys.update(",".join(m.keys) for m in pulled.messages)
                offset = pulled.next_offset
    return keys


def test_a_broker_killed_three_times_under_a_java_transactional_producer_and_push_consumer_loses_and_doubles_nothing(
    tmp_path: Path,
) -> None:
    namesrv_port, remoting_port = free_port(), free_port()
    broker = started_broker(
        tmp_path,
        "--namesrv-port", str(namesrv_port), "--remoting-port", str(remoting_port), "--topic", f"{TOPIC}:4",
        "--check-interval", "1", "--transaction-timeout", "2",
    )  # fmt: skip
    command = [*java_program(PROGRAM, [CLASSIC_CLIENT]), f"127.0.0.1:{namesrv_port}", TOPIC, str(COUNT)]
    application = JavaApplication(command)
    acked_at_kill = []
    try:
        for threshold, mid_check in KILLS:

            def time_to_kill(threshold: int = threshold, mid_check: bool = mid_check) -> bool:
                return application.acked() >= threshold and (not mid_check or answered_checks(broker) > 0)

            wait_for(time_to_kill, 120, f"{threshold} acks{' and a check answered' if mid_check else ''}")
            acked_at_kill.append(application.acked())
            broker.kill()
            time.sleep(0.5)
            broker.start()
        wait_for(application.done_sending, 120, "every transaction to be acknowledged")
        wait_for(lambda: none_pending(broker), 60, "no transaction to be pending")
        result = application.finish()
        stored = topic_keys(broker)
        states = {state: transactions(broker, state) for state in ("PENDING", "COMMITTED", "ROLLED_BACK", "DISCARDED")}
    finally:
        application.kill()
        broker.stop()

    keys = [f"t-{i}" for i in range(COUNT)]
    acked: dict[str, str] = result["acked"]  # key: the message id of its acknowledged attempt
    committed = {key for key in acked if rule(key) == "COMMIT_MESSAGE"}
    assert sorted(acked) == sorted(keys), "every transaction was acknowledged in the end"
    assert result["local_states"] == {key: rule(key) for key in keys}

    # The topic: every acknowledged committed key exactly once, nothing rolled back.
    assert sorted(committed - set(stored)) == [], "acknowledged committed keys are missing from the topic"
    assert sorted(set(stored) - committed) == [], "keys not committed are in the topic"
    assert [key for key, n in stored.items() if n > 1] == [], "no key is in the topic twice"

    # The push consumer: at least once (a restart may deliver again), never a rolled-back key.
    delivered = collections.Counter(result["delivered"])
    assert sorted(committed - set(delivered)) == [], "committed keys never delivered"
    assert sorted(set(delivered) - committed) == [], "keys not committed were delivered"

    # Every transaction resolved: the acknowledged attempts by their rule, the failed ones rolled back.
    assert states["PENDING"] == [] and states["DISCARDED"] == []
    by_id = {t["message_id"]: t for t in states["COMMITTED"] + states["ROLLED_BACK"]}
    assert {t["message_id"] for t in states["COMMITTED"]} == {acked[key] for key in committed}
    assert {t["message_id"] for t in states["ROLLED_BACK"]} <= {acked[key] for key in set(keys) - committed} | set(
        result["failed"]
    )
    assert all(acked[key] in by_id for key in keys), "every acknowledged half message is resolved"
    # Every late transaction (UNKNOW at first) was checked back and resolved by its check. (Not
    # by its check_times: a round counts the checks it delivered once it has written them all,
    # so a kill during the round leaves checks answered but not counted.)
    for key in filter(late, keys):
        assert by_id[acked[key]]["resolution_source"] == "CHECK", (key, by_id[acked[key]])
        assert f"EXECUTED:{rule(key)}" in result["checks"][key], (key, result["checks"][key])
    # The kills came while the producer was sending, and failed some of its sends.
    assert all(n < COUNT for n in acked_at_kill) and result["failed"], acked_at_kill
    orphans = {t["message_id"] for t in states["ROLLED_BACK"]} & set(result["failed"])
    print(
        f"acked at the kills {acked_at_kill}; {len(result['failed'])} failed sends, {len(orphans)} of them stored"
        f" and rolled back by a check; {sum(delivered.values()) - len(delivered)} repeated deliveries"
    )
