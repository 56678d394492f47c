"""Pure rules tested without servers: the check decision, the state table, settings parsing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.config import load_settings
from broker.errors import ResolutionConflict
from broker.http_api.schemas import transaction_out
from broker.model import Topic, Transaction, TransactionState
from broker.store import Flush
from broker.store.sql import json_list
from broker.transaction.check import Action, CheckPolicy, RoundReport, decide

POLICY = CheckPolicy(transaction_timeout=6, check_max=5, check_timeout=3, max_half_age=100)


def txn(check_times=0, last_check_at=None, stored_at=0):
    return Transaction(
        transaction_id="a" * 32,
        producer_group="g",
        half_offset=0,
        topic="orders",
        queue_id=0,
        message_id="m",
        state=TransactionState.PENDING,
        check_times=check_times,
        half_stored_at=stored_at,
        last_check_at=last_check_at,
    )


@pytest.mark.parametrize(
    ("transaction", "now_ms", "online", "action"),
    [
        (txn(), 10_000, True, Action.CHECK),
        (txn(), 10_000, False, Action.ORPHANED),
        (txn(check_times=4, last_check_at=5_000), 10_000, True, Action.CHECK),
        (txn(check_times=4, last_check_at=8_000), 10_000, True, Action.WAIT_ANSWER),
        (txn(check_times=5, last_check_at=8_000), 10_000, True, Action.WAIT_ANSWER),
        (txn(check_times=5, last_check_at=7_000), 10_000, True, Action.DISCARD),
        (txn(check_times=5, last_check_at=7_000), 10_000, False, Action.DISCARD),
        (txn(), 100_000, False, Action.DISCARD),
        (txn(check_times=1, last_check_at=99_000), 100_000, True, Action.DISCARD),
    ],
)
def test_the_check_decision_follows_the_design(transaction, now_ms, online, action):
    assert decide(transaction, now_ms, POLICY, online) is action


@pytest.mark.parametrize(
    ("transaction", "now_ms", "online", "next_check_at", "discard_at"),
    [
        (txn(), 1_000, True, 6_000, 100_000),  # not yet due
        (txn(), 40_000, True, 40_000, 100_000),  # overdue: due now, never in the past
        (txn(check_times=2, last_check_at=39_000), 40_000, True, 42_000, 100_000),  # awaiting its answer
        (txn(), 40_000, False, None, 100_000),  # orphaned: no check goes until a producer is online
        (txn(check_times=5, last_check_at=39_000), 40_000, True, None, 42_000),  # checks used up: after the answer
        (txn(check_times=5, last_check_at=10_000), 40_000, True, None, 40_000),  # overdue discard: now
        (txn(), 150_000, False, None, 150_000),  # past the age limit: at the next round
    ],
)
def test_times_to_come_are_never_in_the_past(transaction, now_ms, online, next_check_at, discard_at):
    out = transaction_out(transaction, now_ms=now_ms, online=online, policy=POLICY)
    assert (out["next_check_at"], out["discard_at"]) == (next_check_at, discard_at)


@pytest.mark.parametrize(
    "target", [TransactionState.COMMITTED, TransactionState.ROLLED_BACK, TransactionState.DISCARDED]
)
def test_a_pending_transaction_may_reach_any_resolution(target):
    assert TransactionState.PENDING.transition(target) is True


@pytest.mark.parametrize("recorded", [TransactionState.COMMITTED, TransactionState.ROLLED_BACK])
def test_commit_and_rollback_are_final(recorded):
    assert recorded.transition(recorded) is False
    for other in TransactionState:
        if other is not recorded:
            with pytest.raises(ResolutionConflict, match=recorded.value):
                recorded.transition(other)


def test_a_discarded_transaction_can_only_be_resumed():
    assert TransactionState.DISCARDED.transition(TransactionState.PENDING) is True
    for other in (TransactionState.COMMITTED, TransactionState.ROLLED_BACK):
        with pytest.raises(ResolutionConflict, match="DISCARDED"):
            TransactionState.DISCARDED.transition(other)


def test_settings_come_from_flags_over_environment_over_defaults():
    settings = load_settings(
        ["--check-interval", "0.5", "--topic", "orders:8", "--topic", "payments"],
        {"HALFMQ_CHECK_INTERVAL": "9", "HALFMQ_CHECK_MAX": "7", "HALFMQ_FLUSH": "async", "HALFMQ_TOPICS": "x:1"},
    )
    assert settings.check_interval == 0.5
    assert settings.check_max == 7
    assert settings.flush is Flush.ASYNC
    assert settings.topics == (Topic("orders", 8), Topic("payments", 4))
    assert (
        settings.transaction_timeout == 6.0 and settings.grpc_port == 10911 and settings.data_dir == Path("halfmq-data")
    )


def test_topics_can_come_from_the_environment():
    assert load_settings([], {"HALFMQ_TOPICS": "orders:4, payments:2"}).topics == (
        Topic("orders", 4),
        Topic("payments", 2),
    )


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--check-max", "0"], {}),
        (["--flush", "maybe"], {}),
        ([], {"HALFMQ_CHECK_TIMEOUT": "soon"}),
        (["--topic", "a:b"], {}),
    ],
)
def test_bad_settings_stop_the_broker_with_a_usage_error(argv, env, capsys):
    with pytest.raises(SystemExit) as stopped:
        load_settings(argv, env)
    assert stopped.value.code == 2
    assert "halfmq-broker" in capsys.readouterr().err


def test_a_round_s_logged_report_counts_its_checks_without_listing_them():
    report = RoundReport(checked=2, delivered=("a" * 32, "b" * 32))
    assert "checked=2" in str(report) and "a" * 32 not in str(report)


@pytest.mark.parametrize(
    "keys", [(), ("o-7",), ("",), ("a", "b c"), ('say "hi"',), ("C:\\dir",), ("\x7f",), ("é",), ("a", "é")]
)
def test_keys_are_stored_as_json_writes_them(keys):
    assert json_list(keys) == json.dumps(list(keys))


@given(st.lists(st.one_of(st.from_regex(r"[ -~]*", fullmatch=True), st.text()), max_size=4))
def test_any_keys_are_stored_as_json_writes_them(keys):
    assert json_list(keys) == json.dumps(keys)
