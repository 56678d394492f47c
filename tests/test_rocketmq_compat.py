"""The official RocketMQ 5 Python client against halfmq's apache.rocketmq.v2 front end (issue 5).

The client runs unmodified in subprocesses (its own logs under a private HOME).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from producer_sdk import PullConsumer
from tests.support import BrokerThread, broker_settings, topic_rows, wait_until

pytest.importorskip("rocketmq", reason="the rocketmq extra (official RocketMQ 5 Python client) is not installed")
pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def compat(tmp_path):
    broker = BrokerThread(
        broker_settings(tmp_path / "data", check_interval=0.3, transaction_timeout=1.0, check_timeout=1.0)
    )
    yield broker, f"127.0.0.1:{broker.broker.rocketmq_port}", {**os.environ, "HOME": str(tmp_path / "home")}
    broker.stop()


def official(endpoint: str, mode: str, env: dict[str, str], **popen: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.programs.rmq5_producer", endpoint, mode],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, **popen,  # type: ignore[call-overload]
    )  # fmt: skip


def readable(broker) -> list[bytes]:
    with PullConsumer(group="audit", broker=broker.address) as consumer:
        return sorted(
            m.body
            for q in consumer.queue_offsets("orders")
            for m in consumer.pull("orders", queue_id=q, offset=0).messages
        )


def test_the_official_producer_commits_rolls_back_and_sends_normal_messages(compat):
    broker, endpoint, env = compat
    producer = official(endpoint, "send", env)
    out, _ = producer.communicate(timeout=120)
    assert producer.returncode == 0, out
    sent = {line.split()[1]: line.split()[2:] for line in out.splitlines() if line.startswith("SENT")}
    assert set(sent) == {"rmq-commit", "rmq-rollback", "rmq-normal"}
    assert readable(broker) == [b"rmq-commit", b"rmq-normal"]
    with PullConsumer(group="audit", broker=broker.address) as consumer:
        committed = next(
            m
            for q in range(4)
            for m in consumer.pull("orders", queue_id=q, offset=0).messages
            if m.body == b"rmq-commit"
        )
    assert (committed.message_id, committed.transaction_id) == tuple(sent["rmq-commit"])
    assert (committed.tags, committed.keys) == ("rmq", ("rmq-commit",))


def test_a_killed_producers_orphaned_transaction_is_committed_once_by_another_producer_of_the_topic(compat):
    broker, endpoint, env = compat
    orphan = official(endpoint, "orphan", env)
    try:
        assert orphan.stdout is not None and orphan.stdout.readline().strip() == "ORPHANED"
    finally:
        os.kill(orphan.pid, signal.SIGKILL)
        orphan.wait()
    checker = official(endpoint, "checker", env, stdin=subprocess.PIPE)
    try:
        assert checker.stdout is not None and checker.stdout.readline().strip() == "CHECKER READY"
        wait_until(lambda: [r[3] for r in topic_rows(broker.broker.settings.data_dir, "orders")] == [b"rmq-orphan"], 60)
    finally:
        assert checker.stdin is not None
        checker.stdin.close()
        out = checker.stdout.read() if checker.stdout else ""
        checker.wait(60)
    assert "CHECKED rmq-orphan" in out
    assert readable(broker) == [b"rmq-orphan"]
    assert broker.broker.store.pending_count() == 0


def test_routes_answer_with_typed_statuses_and_unsupported_rpcs_are_unimplemented(compat):
    from broker.rocketmq_api.protocol import load

    definition, service, service_grpc = load()
    broker, endpoint, _ = compat
    with grpc.insecure_channel(endpoint) as channel:
        stub = service_grpc.MessagingServiceStub(channel)
        route = stub.QueryRoute(service.QueryRouteRequest(topic=definition.Resource(name="orders")))
        assert route.status.code == definition.OK
        assert [q.id for q in route.message_queues] == [0, 1, 2, 3]
        queue = route.message_queues[0]
        assert (queue.permission, list(queue.accept_message_types)) == (
            definition.READ_WRITE,
            [definition.NORMAL, definition.TRANSACTION],
        )
        assert queue.broker.endpoints.addresses[0].port == broker.broker.rocketmq_port
        for topic, code in (
            ("nope", definition.TOPIC_NOT_FOUND),
            ("RMQ_SYS_TRANS_HALF_TOPIC", definition.ILLEGAL_TOPIC),
        ):
            refused = stub.QueryRoute(service.QueryRouteRequest(topic=definition.Resource(name=topic)))
            assert refused.status.code == code and refused.status.message
        for call in (
            lambda: stub.UpdateOffset(service.UpdateOffsetRequest()),
            lambda: list(stub.PullMessage(service.PullMessageRequest())),
        ):
            with pytest.raises(grpc.RpcError) as unimplemented:
                call()
            assert unimplemented.value.code() is grpc.StatusCode.UNIMPLEMENTED
