"""The ``halfmq`` command line against a running broker, human and --json output (issue 4)."""

from __future__ import annotations

import json
import subprocess
import sys

import grpc
import pytest

from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import PullConsumer
from tests.support import send_half, store_snapshot


def halfmq(broker, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "halfmq_cli", "--url", broker.http, *args], capture_output=True, text=True, timeout=60
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def as_json(broker, *args: str):
    return json.loads(halfmq(broker, "--json", *args).stdout)


def half(broker, body: bytes) -> str:
    with grpc.insecure_channel(broker.address) as channel:
        message = pb.Message(topic="orders", body=body, message_id=body.hex())
        return send_half(pb_grpc.BrokerStub(channel), message, "g").transaction_id


def test_topics_commands(broker):
    assert "created" in halfmq(broker, "topics", "create", "payments", "--queues", "2").stdout
    said = halfmq(broker, "topics", "create", "payments", "--queues", "2", "--retention", "3600").stdout
    assert "already exists (2 queues, retention 3600 s)" in said
    listed = halfmq(broker, "topics", "list").stdout.splitlines()
    assert listed[0].split() == ["NAME", "QUEUES", "RETENTION_SECONDS", "MESSAGE_TYPE", "DELAYED", "NEXT_DUE"]
    assert ["payments", "2", "3600.0", "-", "0", "-"] in [line.split() for line in listed]
    assert ["orders", "4", "-", "-", "0", "-"] in [line.split() for line in listed]  # the broker's retention
    assert as_json(broker, "topics", "list")["total"] == 2
    assert as_json(broker, "topics", "offsets", "payments") == [
        {"queue_id": 0, "min_offset": 0, "max_offset": 0},
        {"queue_id": 1, "min_offset": 0, "max_offset": 0},
    ]
    assert halfmq(broker, "topics", "offsets", "payments").stdout.splitlines()[0].split() == [
        "QUEUE_ID", "MIN_OFFSET", "MAX_OFFSET",
    ]  # fmt: skip


def test_send_puts_a_test_message_in_a_topic(broker):
    receipt = as_json(broker, "send", "orders", "hello", "--key", "k1", "--tags", "t")
    assert "sent" in halfmq(broker, "send", "orders", "again").stdout
    with PullConsumer(group="c", broker=broker.address) as consumer:
        pulled = consumer.pull("orders", queue_id=receipt["queue_id"], offset=receipt["queue_offset"], max_messages=1)
    assert (pulled.messages[0].body, pulled.messages[0].keys, pulled.messages[0].tags) == (b"hello", ("k1",), "t")


def test_transactions_commands(broker, clock):
    first, second, third = half(broker, b"one"), half(broker, b"two"), half(broker, b"three")
    clock.advance(7)
    listed = halfmq(broker, "transactions", "list").stdout
    assert first in listed and "3 pending in all" in listed and "orphaned".upper() in listed
    header, row = listed.splitlines()[:2]
    assert header.split()[-3:] == ["NEXT_CHECK", "DISCARD", "ORPHANED"]
    max_age = broker.broker.settings.max_half_age
    assert row.split()[-5:] == ["0", "-", "in", f"{max_age - 7:.1f}s", "True"]  # orphaned: no check until discarded
    assert [t["transaction_id"] for t in as_json(broker, "transactions", "list", "--limit", "2")["items"]] == [
        first,
        second,
    ]
    assert as_json(broker, "transactions", "show", first)["age_seconds"] == pytest.approx(7)
    assert "checks:" in halfmq(broker, "transactions", "show", first).stdout
    assert "COMMITTED" in halfmq(broker, "transactions", "commit", first).stdout
    assert as_json(broker, "transactions", "rollback", second)["state"] == "ROLLED_BACK"
    clock.advance(broker.broker.settings.max_half_age)
    broker.check_once()
    assert as_json(broker, "transactions", "resume", third)["state"] == "PENDING"
    assert as_json(broker, "transactions", "list", "--state", "COMMITTED")["total"] == 1


def test_consumers_commands(broker):
    with PullConsumer(group="audit", broker=broker.address) as consumer:
        receipt = as_json(broker, "send", "orders", "x")
        consumer.commit_offset("orders", queue_id=receipt["queue_id"], offset=0)
    offsets = as_json(broker, "consumers", "offsets")
    assert offsets == [
        {"group": "audit", "topic": "orders", "queue_id": receipt["queue_id"], "offset": 0, "max_offset": 1, "lag": 1}
    ]
    assert as_json(broker, "consumers", "lag") == [{"group": "audit", "topic": "orders", "lag": 1}]
    assert halfmq(broker, "consumers", "lag").stdout.splitlines()[1].split() == ["audit", "orders", "1"]


def test_refusals_print_the_error_code_and_exit_1_without_changes(broker):
    before = store_snapshot(broker.broker.settings.data_dir)
    refused = halfmq(broker, "transactions", "commit", "0" * 32, check=False)
    assert refused.returncode == 1 and "TRANSACTION_NOT_FOUND" in refused.stderr
    hidden = halfmq(broker, "topics", "create", "RMQ_SYS_TRANS_HALF_TOPIC", check=False)
    assert hidden.returncode == 1 and "HIDDEN_TOPIC" in hidden.stderr
    assert store_snapshot(broker.broker.settings.data_dir) == before


def test_global_flags_may_follow_the_subcommand(broker):
    result = subprocess.run(
        [sys.executable, "-m", "halfmq_cli", "topics", "list", "--json", "--url", broker.http],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["items"][0]["name"] == "orders"


def test_a_refused_request_prints_what_was_wrong_with_it(broker):
    before = store_snapshot(broker.broker.settings.data_dir)
    refused = halfmq(broker, "topics", "create", "bad name!", check=False)
    assert refused.returncode == 1
    assert "INVALID_ARGUMENT: the request is malformed; body.name: String should match pattern" in refused.stderr
    assert store_snapshot(broker.broker.settings.data_dir) == before


@pytest.mark.parametrize("where", [[], ["topics", "list"]])
def test_help_names_the_default_url(where):
    shown = subprocess.run([sys.executable, "-m", "halfmq_cli", *where, "--help"], capture_output=True, text=True)
    assert shown.returncode == 0 and "http://127.0.0.1:8080" in shown.stdout and "--json" in shown.stdout


def test_an_unreachable_broker_exits_2_with_a_clear_message():
    result = subprocess.run(
        [sys.executable, "-m", "halfmq_cli", "--url", "http://127.0.0.1:1", "topics", "list"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2 and "cannot reach the admin API" in result.stderr


@pytest.mark.parametrize("flag", [["--url", "http://127.0.0.1:8080"], ["--token", "t"], ["--ca", "ca.pem"]])
def test_the_store_tools_refuse_the_admin_api_s_flags(tmp_path, flag):
    for argv in ([*flag, "store", "inspect", str(tmp_path)], ["store", "inspect", str(tmp_path), *flag]):
        result = subprocess.run([sys.executable, "-m", "halfmq_cli", *argv], capture_output=True, text=True)
        assert result.returncode == 2, result.stdout
        assert "--url" in result.stderr or "unrecognized arguments" in result.stderr
