"""Prometheus metrics after a scripted sequence, and the shared auth token on gRPC and HTTP (issue 4)."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from producer_sdk import (
    LocalTransactionState,
    Message,
    Producer,
    PullConsumer,
    RocketMQTransactionProducer,
    Unauthenticated,
)
from tests.support import BrokerThread, FakeClock, ScriptedListener, broker_settings, store_snapshot, wait_until


def scrape(broker) -> dict[str, float]:
    text = httpx.get(f"{broker.http}/metrics").text
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return values


def test_metrics_follow_commits_rollbacks_checks_and_discards(broker, clock):
    listener = ScriptedListener("UNKNOWN")
    for key, outcome in {"c1": "COMMIT", "c2": "COMMIT", "r1": "ROLLBACK"}.items():
        listener.outcomes[key] = LocalTransactionState[outcome]
    with RocketMQTransactionProducer(group="g", broker=broker.address, listener=listener) as producer:
        for key in ("c1", "c2", "r1", "later"):
            producer.send_message_in_transaction(Message(topic="orders", body=key.encode(), keys=[key]))
        assert scrape(broker)["halfmq_half_messages"] == 1
        clock.advance(10)
        assert broker.check_once().checked == 1  # answered UNKNOWN
        wait_until(lambda: scrape(broker).get("halfmq_checks_total{outcome=answered_unknown}") == 1)
        listener.outcomes["later"] = LocalTransactionState.COMMIT
        clock.advance(10)
        assert broker.check_once().checked == 1  # answered COMMIT
        wait_until(lambda: scrape(broker)["halfmq_commit_messages_total"] == 3)
    with RocketMQTransactionProducer(group="orphans", broker=broker.address, listener=ScriptedListener("UNKNOWN")) as p:
        p.send_message_in_transaction(Message(topic="orders", body=b"orphan"))
    clock.advance(broker.broker.settings.max_half_age + 1)
    assert broker.check_once().discarded == 1

    values = scrape(broker)
    assert values["halfmq_commit_messages_total"] == 3
    assert values["halfmq_rollback_messages_total"] == 1
    assert values["halfmq_discard_messages_total"] == 1
    assert values["halfmq_half_messages"] == 0
    assert values["halfmq_checks_total{outcome=delivered}"] == 2
    assert values["halfmq_checks_total{outcome=answered_commit}"] == 1
    assert values["halfmq_checks_total{outcome=answered_unknown}"] == 1
    assert values["halfmq_finish_latency_seconds_count"] == 5
    assert values["halfmq_store_group_commit_jobs_count"] >= 1
    assert values["halfmq_store_commit_latency_seconds_sum"] > 0
    stats = httpx.get(f"{broker.http}/stats").json()
    assert stats["totals"]["committed"] == 3 and stats["totals"]["checks_delivered"] == 2


@pytest.fixture
def secured(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data", auth_token="s3cret"), FakeClock())
    yield broker
    broker.stop()


def test_without_the_token_every_grpc_call_is_refused_and_nothing_changes(secured):
    """A refusal comes at once: the clients' generous timeout only keeps a loaded machine from
    turning it into BrokerUnavailable."""
    before = store_snapshot(secured.broker.settings.data_dir)
    with Producer(broker=secured.address, timeout=30) as producer, pytest.raises(Unauthenticated):
        producer.send(Message(topic="orders", body=b"x"))
    with PullConsumer(group="c", broker=secured.address, timeout=30) as consumer, pytest.raises(Unauthenticated):
        consumer.queue_offsets("orders")
    with pytest.raises(Unauthenticated):
        RocketMQTransactionProducer(group="g", broker=secured.address, listener=ScriptedListener(), timeout=30)
    with Producer(broker=secured.address, token="wrong", timeout=30) as producer, pytest.raises(Unauthenticated):
        producer.send(Message(topic="orders", body=b"x"))
    assert store_snapshot(secured.broker.settings.data_dir) == before


def test_with_the_token_grpc_calls_and_sessions_work(secured):
    with RocketMQTransactionProducer(
        group="g", broker=secured.address, listener=ScriptedListener(), token="s3cret"
    ) as p:
        result = p.send_message_in_transaction(Message(topic="orders", body=b"ok"))
    assert result.state is not None and result.state.value == "COMMITTED"


def endpoints(url: str) -> list[tuple[str, str]]:
    """Every method and path the admin API describes, path parameters filled in."""
    described = httpx.get(f"{url}/openapi.json")
    assert described.status_code == 200  # the API's description holds no data: open
    filled = {"{name}": "orders", "{transaction_id}": "0" * 32}
    found = []
    for path, methods in described.json()["paths"].items():
        for placeholder, value in filled.items():
            path = path.replace(placeholder, value)
        found += [(method.upper(), path) for method in methods]
    return found


def test_with_a_token_every_http_endpoint_but_healthz_needs_it_and_refusals_change_nothing(secured):
    url = secured.http
    calls = endpoints(url)
    assert len(calls) >= 15 and ("GET", "/transactions") in calls and ("GET", "/metrics") in calls
    before = store_snapshot(secured.broker.settings.data_dir)
    for method, path in calls:
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "s3cret"}):
            answer = httpx.request(method, f"{url}{path}", json={"name": "payments"}, headers=headers)
            if path == "/healthz":
                assert answer.status_code == 200
            else:
                assert answer.status_code == 401, (method, path, headers, answer.text)
                assert answer.json()["error"]["code"] == "UNAUTHENTICATED"
                assert answer.headers["www-authenticate"] == "Bearer"
    assert store_snapshot(secured.broker.settings.data_dir) == before
    for page in ("/", "/static/dashboard.js", "/docs", "/docs/assets/swagger-ui-bundle.js"):
        assert httpx.get(f"{url}{page}").status_code == 200, page  # the page shells hold no data
    token = {"Authorization": "Bearer s3cret"}
    for method, path in calls:
        if method == "GET":
            # A path keeps its placeholder ("{group}"): a malformed name (400), an unknown one (404), or a
            # required parameter missing or not a number (422: GET /messages needs a key).
            assert httpx.get(f"{url}{path}", headers=token).status_code in (200, 400, 403, 404, 422), path
    created = httpx.post(f"{url}/topics", json={"name": "payments"}, headers=token)
    assert created.status_code == 201


def test_metrics_open_serves_only_metrics_without_the_token(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data", auth_token="s3cret", metrics_open=True), FakeClock())
    try:
        assert "halfmq_" in httpx.get(f"{broker.http}/metrics").text
        assert httpx.get(f"{broker.http}/stats").status_code == 401
        assert httpx.get(f"{broker.http}/transactions").status_code == 401
    finally:
        broker.stop()
