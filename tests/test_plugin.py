"""The pytest plugin and the test controls (issue 12). The plugin's tests run a user's project
with pytest's ``pytester``: the plugin comes from the installed ``pytest11`` entry point, the
broker is a real process with default timings (6 s transaction timeout, 30 s check interval),
and nothing sleeps: the clock is moved and check rounds are run on demand."""

from __future__ import annotations

import os
import subprocess
import time

import httpx
import pytest

from halfmq_testing import EmbeddedBroker
from tests.processes import official
from tests.support import BrokerThread, broker_settings, store_snapshot

pytest_plugins = ["pytester"]

USER_PROJECT = '''
import threading

import pytest

from producer_sdk import (
    BrokerUnavailable, LocalTransactionState, Message, TopicNotFound, TransactionListener, RocketMQTransactionProducer
)

COMMIT, ROLLBACK, UNKNOWN = LocalTransactionState.COMMIT, LocalTransactionState.ROLLBACK, LocalTransactionState.UNKNOWN


class Orders(TransactionListener):
    """A service whose database is a dict: an order is committed when its row exists."""

    def __init__(self, execute=COMMIT):
        self.rows, self.execute = set(), execute

    def execute_local_transaction(self, msg, arg):
        self.rows.add(msg.keys[0])
        return self.execute

    def check_local_transaction(self, msg):
        return COMMIT if msg.keys[0] in self.rows else ROLLBACK


def order(key):
    return Message(topic="orders", body=key.encode(), keys=[key])


def test_an_unknown_transaction_is_checked_and_committed(halfmq_broker):
    halfmq_broker.create_topic("orders")
    with RocketMQTransactionProducer(group="shop", broker=halfmq_broker.address, listener=Orders(UNKNOWN)) as producer:
        sent = producer.send_message_in_transaction(order("o-1"))
        assert halfmq_broker.check_now()["checked"] == 0, "not due: the transaction timeout is 6 s"
        halfmq_broker.advance_clock(7)
        assert halfmq_broker.check_now()["answered"] == 1
    assert [m.body for m in halfmq_broker.committed("orders")] == [b"o-1"]
    assert halfmq_broker.transaction(sent.transaction_id)["state"] == "COMMITTED"


def test_a_dropped_end_is_resolved_by_the_check_exactly_once(halfmq_broker):
    halfmq_broker.create_topic("orders")
    halfmq_broker.faults.drop_end_transactions(1000)
    shop = RocketMQTransactionProducer(group="shop", broker=halfmq_broker.address, listener=Orders(), timeout=1)
    with shop as producer:
        sent = producer.send_message_in_transaction(order("o-2"))
        assert sent.state is None, "the end and every retry of it were lost"
        halfmq_broker.faults.clear()
        halfmq_broker.advance_clock(7)
        assert halfmq_broker.check_now()["answered"] == 1
        assert halfmq_broker.check_now()["checked"] == 0, "resolved: never checked again"
    assert [m.body for m in halfmq_broker.committed("orders")] == [b"o-2"]
    assert halfmq_broker.transaction(sent.transaction_id)["resolution_source"] == "CHECK"


def test_a_lost_half_acknowledgement_is_rolled_back_on_check(halfmq_broker):
    halfmq_broker.create_topic("orders")
    halfmq_broker.faults.lose_half_acks(1000)
    orders = Orders()
    shop = RocketMQTransactionProducer(group="shop", broker=halfmq_broker.address, listener=orders, timeout=1)
    with shop as producer:
        with pytest.raises(BrokerUnavailable):
            producer.send_message_in_transaction(order("o-3"))
        assert orders.rows == set(), "the local transaction never ran"
        halfmq_broker.faults.clear()
        halfmq_broker.advance_clock(7)
        report = halfmq_broker.check_now()
    assert (report["checked"], report["answered"]) == (1, 1), "the broker had stored it, and asked"
    assert halfmq_broker.committed("orders") == []


def test_every_acknowledged_commit_survives_a_crash_once(halfmq_broker):
    halfmq_broker.create_topic("orders")
    orders, acknowledged, enough = Orders(), [], threading.Event()
    with RocketMQTransactionProducer(group="shop", broker=halfmq_broker.address, listener=orders) as producer:

        def load():
            for i in range(150):
                try:
                    if producer.send_message_in_transaction(order(f"o-{i}")).state is not None:
                        acknowledged.append(f"o-{i}".encode())
                except BrokerUnavailable:
                    pass
                if len(acknowledged) == 30:
                    enough.set()

        loader = threading.Thread(target=load)
        loader.start()
        enough.wait(60)
        halfmq_broker.crash()
        loader.join()
        halfmq_broker.advance_clock(7)
        halfmq_broker.check_now()  # ends lost in the crash are resolved as the database says
    bodies = [m.body for m in halfmq_broker.committed("orders")]
    assert len(bodies) == len(set(bodies)), "nothing twice"
    assert set(acknowledged) <= set(bodies), "nothing acknowledged lost"
    assert set(bodies) == {key.encode() for key in orders.rows}, "committed exactly when the database has the row"


def test_the_session_broker_starts_again_empty_when_reset(halfmq_broker_session):
    halfmq_broker_session.create_topic("orders")
    halfmq_broker_session.advance_clock(3600)
    halfmq_broker_session.reset()
    with pytest.raises(TopicNotFound):
        halfmq_broker_session.committed("orders")
'''


def test_a_user_project_reaches_each_failure_through_the_fixture(pytester):
    pytester.makepyfile(test_orders=USER_PROJECT)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--durations=0", "-q")
    result.assert_outcomes(passed=5)


TOPICS_PROJECT = """
import pytest


def queues(broker):
    return {t["name"]: t["queues"] for t in broker.request("GET", "/topics")["items"]}


def test_the_ini_topics_are_there(halfmq_broker):
    assert queues(halfmq_broker) == {"orders": 4, "payments": 2}


@pytest.mark.halfmq_topics("audit:1")
def test_a_marker_adds_topics(halfmq_broker):
    assert queues(halfmq_broker) == {"orders": 4, "payments": 2, "audit": 1}


def test_the_session_broker_has_the_ini_topics_again_after_a_reset(halfmq_broker_session):
    halfmq_broker_session.create_topic("scratch")
    halfmq_broker_session.reset()
    assert queues(halfmq_broker_session) == {"orders": 4, "payments": 2}
"""


def test_the_fixtures_start_with_the_topics_of_the_ini_option_and_the_marker(pytester):
    pytester.makeini("[pytest]\nhalfmq_topics = orders:4\n    payments:2\n")
    pytester.makepyfile(test_topics=TOPICS_PROJECT)
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "--strict-markers").assert_outcomes(passed=3)


CONTROLS = [
    ("post", "/test/clock", {"advance_seconds": 60}),
    ("post", "/test/checks", None),
    ("get", "/test/faults", None),
    ("put", "/test/faults", {"drop_end_transactions": 5}),
]


def test_with_the_controls_off_every_control_is_refused_and_nothing_changes(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data"))
    try:
        http = f"http://127.0.0.1:{broker.broker.http_port}"
        before = store_snapshot(tmp_path / "data")
        for method, path, body in CONTROLS:
            refused = httpx.request(method, http + path, json=body)
            assert refused.status_code == 403, (path, refused.text)
            assert refused.json()["error"]["code"] == "TEST_CONTROLS_OFF"
        assert store_snapshot(tmp_path / "data") == before
        assert broker.broker.clock is not broker.broker.controls and broker.broker.controls is None
    finally:
        broker.stop()


def test_an_official_rocketmq_5_producer_is_checked_through_check_now(tmp_path):
    with EmbeddedBroker(topics=["orders:4"], data_dir=tmp_path / "broker") as broker:
        env = {**os.environ, "HOME": str(tmp_path / "home")}
        orphan = official(broker.rocketmq_endpoint, "orphan", env)
        assert orphan.stdout is not None and "ORPHANED" in orphan.stdout.readline()
        orphan.kill()
        orphan.wait()
        checker = official(broker.rocketmq_endpoint, "checker", env, stdin=subprocess.PIPE)
        try:
            assert checker.stdout is not None and "CHECKER READY" in checker.stdout.readline()
            broker.advance_clock(7)
            report = broker.check_now()
            assert (report["checked"], report["answered"]) == (1, 1)
        finally:
            assert checker.stdin is not None
            checker.stdin.close()
            checker.wait(60)
        assert [m.body for m in broker.committed("orders")] == [b"rmq-orphan"]


def test_the_clock_stays_ahead_across_a_restart_and_check_rounds_can_be_delayed(tmp_path):
    with EmbeddedBroker(topics=["orders:1"], data_dir=tmp_path / "broker") as broker:
        ahead = broker.advance_clock(3600) - time.time()
        broker.restart()
        assert broker.request("POST", "/test/clock", {"advance_seconds": 0})["offset"] == pytest.approx(ahead, abs=5)
        broker.faults.delay_checks(0.5)
        began = time.monotonic()
        broker.check_now()
        assert time.monotonic() - began >= 0.5, "the round waited for the injected delay"
        assert broker.request("GET", "/test/faults")["delay_checks"] == 0.5
        broker.faults.clear()
        assert broker.request("GET", "/test/faults") == {
            "drop_end_transactions": 0, "lose_half_acks": 0, "drop_txn_sends": 0, "crash_in_commits": 0,
            "delay_checks": 0.0,
        }  # fmt: skip
