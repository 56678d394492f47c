"""The admin API over real HTTP against a running broker (issue 4)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import httpx
import pytest

from broker.model import HALF_TOPIC
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import KafkaTransactionProducer, Message, PullConsumer, RocketMQTransactionProducer
from tests.support import ScriptedListener, send_half, store_snapshot, topic_rows, wait_until


@pytest.fixture
def http(broker):
    with httpx.Client(base_url=broker.http, timeout=10) as client:
        yield client


def half(broker, body: bytes = b"x", group: str = "g") -> str:
    with grpc.insecure_channel(broker.address) as channel:
        message = pb.Message(topic="orders", body=body, message_id=body.hex(), keys=["k"])
        return send_half(pb_grpc.BrokerStub(channel), message, group).transaction_id


def assert_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["message"]


def test_health_and_openapi_are_served(http, broker):
    ports = {"grpc": broker.broker.grpc_port, "http": broker.broker.http_port,
             "rocketmq": broker.broker.rocketmq_port, "kafka": broker.broker.kafka_port,
             "namesrv": broker.broker.namesrv_port, "remoting": broker.broker.remoting_port}  # fmt: skip
    assert 0 not in ports.values()
    assert http.get("/healthz").json() == {
        "status": "ok", "pending_half_messages": 0, "producer_sessions": 0, "ports": ports
    }  # fmt: skip
    schema = http.get("/openapi.json").json()
    assert {"/topics", "/transactions", "/transactions/{transaction_id}/resume", "/consumers"} <= set(schema["paths"])
    assert http.get("/docs").status_code == 200


def test_topics_are_listed_created_and_inspected(http, broker):
    assert http.get("/topics").json() == {
        "items": [
            {
                "name": "orders",
                "queues": 4,
                "retention_seconds": None,
                "message_type": None,
                "delayed": 0,
                "next_due": None,
            }
        ],
        "total": 1,
        "limit": 100,
        "offset": 0,
    }
    created = http.post("/topics", json={"name": "payments", "queues": 2})
    assert (created.status_code, created.json()) == (201, {
        "name": "payments", "queues": 2, "retention_seconds": None, "message_type": None, "delayed": 0,
        "next_due": None, "created": True,
    })  # fmt: skip
    again = http.post("/topics", json={"name": "payments", "queues": 2, "retention_seconds": 0})
    assert (again.status_code, again.json()["retention_seconds"]) == (200, 0)
    assert http.post("/topics", json={"name": "payments", "queues": 2}).json()["retention_seconds"] == 0, "kept"
    assert http.get("/topics", params={"limit": 1, "offset": 1}).json()["items"] == [
        {"name": "payments", "queues": 2, "retention_seconds": 0, "message_type": None, "delayed": 0, "next_due": None}
    ]
    assert http.get("/topics/payments/queues").json() == [
        {"queue_id": 0, "min_offset": 0, "max_offset": 0},
        {"queue_id": 1, "min_offset": 0, "max_offset": 0},
    ]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("post", "/topics", {"name": "payments", "queues": 0}, 422, "INVALID_ARGUMENT"),
        ("post", "/topics", {"name": "a b"}, 422, "INVALID_ARGUMENT"),
        ("post", "/topics", {"queues": 2}, 422, "INVALID_ARGUMENT"),
        ("post", "/topics", {"name": "orders", "retention_seconds": -1}, 422, "INVALID_ARGUMENT"),
        ("post", "/topics", {"name": HALF_TOPIC, "queues": 1}, 403, "HIDDEN_TOPIC"),
        ("post", "/topics", {"name": "orders", "queues": 2}, 409, "TOPIC_EXISTS"),
        ("get", f"/topics/{HALF_TOPIC}/queues", None, 403, "HIDDEN_TOPIC"),
        ("get", "/topics/nope/queues", None, 404, "TOPIC_NOT_FOUND"),
        ("get", "/topics?limit=0", None, 422, "INVALID_ARGUMENT"),
        ("get", "/transactions?state=MAYBE", None, 422, "INVALID_ARGUMENT"),
        ("get", "/transactions/not-an-id", None, 422, "INVALID_ARGUMENT"),
        ("get", "/transactions?offset=22024125795660726182879428608", None, 422, "INVALID_ARGUMENT"),
        ("get", f"/transactions/{'0' * 32}", None, 404, "TRANSACTION_NOT_FOUND"),
        ("post", f"/transactions/{'0' * 32}/commit", None, 404, "TRANSACTION_NOT_FOUND"),
        ("post", "/transactions/xyz/rollback", None, 422, "INVALID_ARGUMENT"),
        ("post", f"/transactions/{'0' * 32}/resume", None, 404, "TRANSACTION_NOT_FOUND"),
        ("get", "/nothing-here", None, 404, "NOT_FOUND"),
        ("post", "/topics/nope/messages", {"body": "x"}, 404, "TOPIC_NOT_FOUND"),
        ("post", f"/topics/{HALF_TOPIC}/messages", {"body": "x"}, 403, "HIDDEN_TOPIC"),
        ("post", "/topics/orders/messages", {"keys": ["k"]}, 422, "INVALID_ARGUMENT"),
        ("post", "/topics/orders/messages", {"body": "x", "keys": [""]}, 400, "INVALID_ARGUMENT"),
        ("get", "/consumers?limit=5000", None, 422, "INVALID_ARGUMENT"),
        ("delete", "/topics", None, 405, "METHOD_NOT_ALLOWED"),
    ],
)
def test_bad_requests_get_a_json_error_with_a_stable_code_and_change_nothing(
    http, broker, method, path, body, status, code
):
    before = store_snapshot(broker.broker.settings.data_dir)
    assert_error(http.request(method, path, json=body), status, code)
    assert store_snapshot(broker.broker.settings.data_dir) == before


def test_a_malformed_json_body_is_refused(http, broker):
    response = http.post("/topics", content=b"{not json", headers={"content-type": "application/json"})
    assert_error(response, 422, "INVALID_ARGUMENT")


def test_pending_transactions_are_listed_with_age_group_and_checks(http, broker, clock):
    txids = [half(broker, f"t{i}".encode()) for i in range(5)]
    clock.advance(30)
    page = http.get("/transactions", params={"limit": 2, "offset": 1}).json()
    assert (page["total"], len(page["items"])) == (5, 2)
    first = http.get("/transactions").json()["items"][0]
    assert first["transaction_id"] == txids[0]
    assert (first["producer_group"], first["state"], first["check_times"]) == ("g", "PENDING", 0)
    assert first["age_seconds"] == pytest.approx(30, abs=0.01)
    assert first["orphaned"] is True
    max_age_ms = broker.broker.settings.max_half_age * 1000
    assert (first["next_check_at"], first["discard_at"]) == (None, first["half_stored_at"] + max_age_ms)
    assert http.get("/stats").json()["time"] == first["half_stored_at"] + 30_000  # epoch milliseconds throughout
    assert http.get("/transactions", params={"state": "COMMITTED"}).json()["total"] == 0


def test_a_transactions_detail_shows_the_history_of_its_checks(http, broker, clock):
    listener = ScriptedListener(check="UNKNOWN")
    with RocketMQTransactionProducer(group="g", broker=broker.address, listener=listener, client_id="checker-1"):
        txid = half(broker)
        for n in (1, 2):
            clock.advance(5)
            assert broker.check_once().checked == 1
            wait_until(lambda n=n: len(listener.checked) == n)
        detail = http.get(f"/transactions/{txid}").json()
        assert detail["orphaned"] is False
    assert [c["check_no"] for c in detail["checks"]] == [1, 2]
    assert {c["client_id"] for c in detail["checks"]} == {"checker-1"}
    assert detail["check_times"] == 2 and detail["keys"] == ["k"] and detail["body_size"] == 1
    assert detail["next_check_at"] == detail["last_check_at"] + broker.broker.settings.check_timeout * 1000


def test_an_operator_commits_once_and_a_conflicting_rollback_is_refused(http, broker):
    txid = half(broker, b"operated")
    committed = http.post(f"/transactions/{txid}/commit")
    assert committed.status_code == 200
    assert (committed.json()["state"], committed.json()["resolution_source"]) == ("COMMITTED", "OPERATOR")
    assert http.post(f"/transactions/{txid}/commit").json()["state"] == "COMMITTED"
    before = store_snapshot(broker.broker.settings.data_dir)
    assert_error(http.post(f"/transactions/{txid}/rollback"), 409, "RESOLUTION_CONFLICT")
    assert store_snapshot(broker.broker.settings.data_dir) == before
    assert [r[3] for r in topic_rows(broker.broker.settings.data_dir, "orders")] == [b"operated"]


def test_an_operator_resumes_a_discarded_message_with_a_fresh_check_budget(http, broker, clock):
    txid = half(broker, b"again")
    clock.advance(broker.broker.settings.max_half_age + 1)
    assert broker.check_once().discarded == 1
    assert_error(http.post(f"/transactions/{txid}/commit"), 409, "RESOLUTION_CONFLICT")
    resumed = http.post(f"/transactions/{txid}/resume").json()
    assert (resumed["state"], resumed["check_times"], resumed["age_seconds"]) == ("PENDING", 0, 0)
    assert_error(http.post(f"/transactions/{txid}/resume"), 409, "RESOLUTION_CONFLICT")
    with RocketMQTransactionProducer(group="g", broker=broker.address, listener=ScriptedListener(check="COMMIT")):
        clock.advance(5)
        assert broker.check_once().checked == 1
        wait_until(lambda: http.get(f"/transactions/{txid}").json()["state"] == "COMMITTED")
    assert [r[3] for r in topic_rows(broker.broker.settings.data_dir, "orders")] == [b"again"]


def test_consumers_show_committed_offsets_and_lag(http, broker):
    with RocketMQTransactionProducer(group="g", broker=broker.address, listener=ScriptedListener()) as producer:
        for i in range(3):
            producer.send_message_in_transaction(Message(topic="orders", body=b"x", message_id="same-queue" + "x" * i))
    with PullConsumer(group="audit", broker=broker.address) as consumer:
        queue = next(q for q, (_, high) in consumer.queue_offsets("orders").items() if high)
        high = consumer.queue_offsets("orders")[queue][1]
        consumer.commit_offset("orders", queue_id=queue, offset=high - 1)
    assert http.get("/consumers").json()["items"] == [
        {"group": "audit", "topic": "orders", "queue_id": queue, "offset": high - 1, "max_offset": high, "lag": 1}
    ]
    assert http.get("/consumers", params={"offset": 1}).json() == {"items": [], "total": 1, "limit": 100, "offset": 1}


def test_a_test_message_is_sent_through_the_admin_api(http, broker):
    receipt = http.post("/topics/orders/messages", json={"body": "hi", "keys": ["k"], "tags": "t"})
    assert receipt.status_code == 201
    rows = topic_rows(broker.broker.settings.data_dir, "orders")
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (receipt.json()["message_id"], receipt.json()["queue_id"], receipt.json()["queue_offset"], b"hi")
    ]


def test_the_dashboard_and_its_assets_are_served_by_the_broker(http):
    page = http.get("/")
    assert page.status_code == 200 and "halfmq" in page.text
    for asset in ("/static/dashboard.js", "/static/dashboard.css"):
        assert http.get(asset).status_code == 200


@pytest.mark.slow
def test_schemathesis_finds_no_server_error(broker, tmp_path: Path):
    half(broker)
    KafkaTransactionProducer(transactional_id="etl", broker=broker.address).close()  # a transactional id to list
    result = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "run", f"{broker.http}/openapi.json",
         "--checks", "not_a_server_error", "--max-examples", "25", "--generation-deterministic", "--no-color",
         # The test controls are off here: they answer 403 to anything (tests/test_plugin.py). Deletions
         # would take the seeded topic and transaction from the stateful phase's other operations:
         # tests/test_operators.py sends them malformed and unknown names.
         "--exclude-path-regex", "^/test/", "--exclude-method", "DELETE"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "No issues found" in result.stdout
