"""Two-phase batches (issue 13, the broker's side of the Spark sink): PrepareBatch and EndBatch
over real gRPC; a batch commits at most once, every end rolls back what the group left pending at
or below it, and a bad request is refused with a typed error and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from tests.support import BrokerThread, broker_settings, store_snapshot, topic_rows

GROUP = "spark-q1"


@pytest.fixture
def stub(broker: BrokerThread) -> Iterator[pb_grpc.BrokerStub]:
    with grpc.insecure_channel(broker.address) as channel:
        yield pb_grpc.BrokerStub(channel)


def prepare(stub, batch_id: int, *bodies: str, group: str = GROUP) -> list[str]:
    messages = [pb.Message(topic="orders", body=b.encode(), message_id=f"{b}-{batch_id}-{i}") for i, b in
                enumerate(bodies)]  # fmt: skip
    reply = stub.PrepareBatch(pb.PrepareBatchRequest(producer_group=group, batch_id=batch_id, messages=messages))
    return [o.result.transaction_id for o in reply.outcomes]


def end(stub, batch_id: int, ids=(), *, resolution=pb.COMMIT, group: str = GROUP) -> pb.EndBatchResponse:
    request = pb.EndBatchRequest(producer_group=group, batch_id=batch_id, resolution=resolution, transaction_ids=ids)
    return stub.EndBatch(request)


def bodies(broker: BrokerThread) -> list[bytes]:
    return sorted(row[3] for row in topic_rows(broker.broker.settings.data_dir, "orders"))


def states(broker: BrokerThread, ids: list[str]) -> list[str]:
    return [broker.broker.store.transaction(txid).state.value for txid in ids]


def test_a_batch_commits_once_and_a_replay_of_it_is_rolled_back(broker, stub):
    first = prepare(stub, 0, "a", "b", "c")
    assert bodies(broker) == [], "prepared is not visible"
    ended = end(stub, 0, first)
    assert (ended.already_committed, ended.committed, ended.rolled_back) == (False, 3, 0)
    assert prepare(stub, 0, "a", "b", "c") == first, "a retried prepare (same message ids) is the same transactions"
    replay = prepare(stub, 0, "a2", "b2", "c2")  # a replayed batch: the same rows under new message ids
    again = end(stub, 0, replay)
    assert (again.already_committed, again.committed, again.rolled_back) == (True, 0, 3)
    assert bodies(broker) == [b"a", b"b", b"c"]
    assert states(broker, replay) == ["ROLLED_BACK"] * 3
    totals = broker.broker.metrics.totals()
    assert (totals["committed"], totals["rolled_back"]) == (3, 3)


def test_an_end_rolls_back_what_is_pending_at_or_below_its_batch_and_leaves_later_batches(broker, stub):
    dead = prepare(stub, 0, "dead")  # a crashed run's batch 0, never committed
    failed_attempt = prepare(stub, 1, "retried")
    succeeded = prepare(stub, 1, "ok")
    later = prepare(stub, 2, "later")
    ended = end(stub, 1, succeeded)
    assert (ended.committed, ended.rolled_back) == (1, 2)
    assert states(broker, dead + failed_attempt + succeeded + later) == [
        "ROLLED_BACK", "ROLLED_BACK", "COMMITTED", "PENDING",
    ]  # fmt: skip
    assert bodies(broker) == [b"ok"]


def test_an_abort_rolls_back_its_batch_and_the_batch_can_then_commit(broker, stub):
    aborted = prepare(stub, 0, "x", "y")
    ended = end(stub, 0, resolution=pb.ROLLBACK)
    assert (ended.already_committed, ended.committed, ended.rolled_back) == (False, 0, 2)
    retried = prepare(stub, 0, "x2", "y2")
    assert end(stub, 0, retried).committed == 2
    assert states(broker, aborted) == ["ROLLED_BACK"] * 2 and bodies(broker) == [b"x2", b"y2"]


def test_a_prepared_batch_is_refused_item_by_item_and_a_bad_batch_id_as_a_whole(broker, stub):
    messages = [
        pb.Message(topic="orders", body=b"ok", message_id="ok-1"),
        pb.Message(topic="nope", body=b"x", message_id="x-1"),
    ]
    reply = stub.PrepareBatch(pb.PrepareBatchRequest(producer_group=GROUP, batch_id=3, messages=messages))
    assert [o.WhichOneof("outcome") for o in reply.outcomes] == ["result", "error"]
    assert reply.outcomes[1].error.code == "TOPIC_NOT_FOUND"
    before = store_snapshot(broker.broker.settings.data_dir)
    with pytest.raises(grpc.RpcError) as refused:
        stub.PrepareBatch(pb.PrepareBatchRequest(producer_group=GROUP, batch_id=-1, messages=messages[:1]))
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert store_snapshot(broker.broker.settings.data_dir) == before


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("negative batch id", grpc.StatusCode.INVALID_ARGUMENT),
        ("unknown resolution", grpc.StatusCode.INVALID_ARGUMENT),
        ("rollback naming transactions", grpc.StatusCode.INVALID_ARGUMENT),
        ("malformed transaction id", grpc.StatusCode.INVALID_ARGUMENT),
        ("bad group", grpc.StatusCode.INVALID_ARGUMENT),
        ("unknown transaction", grpc.StatusCode.NOT_FOUND),
        ("another group's transaction", grpc.StatusCode.PERMISSION_DENIED),
        ("a rolled-back transaction", grpc.StatusCode.FAILED_PRECONDITION),
    ],
)
def test_a_bad_end_is_refused_with_a_typed_error_and_changes_nothing(broker, stub, case, status):
    mine = prepare(stub, 1, "mine")
    theirs = prepare(stub, 0, "theirs", group="spark-q2")
    rolled_back = prepare(stub, 0, "gone")
    end(stub, 0, resolution=pb.ROLLBACK)
    requests = {
        "negative batch id": (-1, mine, pb.COMMIT, GROUP),
        "unknown resolution": (1, mine, pb.UNKNOWN, GROUP),
        "rollback naming transactions": (1, mine, pb.ROLLBACK, GROUP),
        "malformed transaction id": (1, ["not an id"], pb.COMMIT, GROUP),
        "bad group": (1, mine, pb.COMMIT, "bad group"),
        "unknown transaction": (1, [*mine, "0" * 32], pb.COMMIT, GROUP),
        "another group's transaction": (1, [*mine, *theirs], pb.COMMIT, GROUP),
        "a rolled-back transaction": (1, [*mine, *rolled_back], pb.COMMIT, GROUP),
    }
    batch_id, ids, resolution, group = requests[case]
    before = store_snapshot(broker.broker.settings.data_dir)
    with pytest.raises(grpc.RpcError) as refused:
        end(stub, batch_id, ids, resolution=resolution, group=group)
    assert refused.value.code() is status
    assert store_snapshot(broker.broker.settings.data_dir) == before, "nothing committed, rolled back or recorded"
    assert states(broker, mine) == ["PENDING"]


def test_the_test_controls_lose_a_prepared_batch_s_acknowledgement_and_drop_a_batch_end(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data", test_controls=True))
    faults = broker.broker.controls.faults
    try:
        with grpc.insecure_channel(broker.address) as channel:
            stub = pb_grpc.BrokerStub(channel)
            faults.set(drop_end_transactions=0, lose_half_acks=2, delay_checks=0)
            with pytest.raises(grpc.RpcError) as lost:
                prepare(stub, 0, "a", "b")
            assert lost.value.code() is grpc.StatusCode.UNAVAILABLE
            pending = broker.broker.store.list_transactions(None, 10, 0)[0]
            assert [t.state.value for t in pending] == ["PENDING", "PENDING"], "stored, only the reply was lost"
            faults.set(drop_end_transactions=1, lose_half_acks=0, delay_checks=0)
            with pytest.raises(grpc.RpcError) as dropped:
                end(stub, 0, [t.transaction_id for t in pending])
            assert dropped.value.code() is grpc.StatusCode.UNAVAILABLE
            assert bodies(broker) == [], "the end never reached the broker"
            assert end(stub, 0, [t.transaction_id for t in pending]).committed == 2, "the retry goes through"
    finally:
        broker.stop()


def test_a_committed_batch_s_marker_leaves_with_retention(broker, stub, clock):
    end(stub, 0, prepare(stub, 0, "a"))
    assert [row[:2] for row in store_snapshot(broker.broker.settings.data_dir)["committed_batches"]] == [(GROUP, 0)]
    clock.advance(73 * 3600)  # past the default 72 h
    broker.run(broker.broker.retention.sweep())
    assert store_snapshot(broker.broker.settings.data_dir)["committed_batches"] == []


def test_a_committed_batch_takes_each_queue_s_next_offsets_in_the_order_it_was_prepared(broker, stub):
    stub.SendBatch(pb.SendBatchRequest(messages=[pb.Message(topic="orders", body=b"plain", message_id=f"p{i}")
                                                 for i in range(7)]))  # fmt: skip
    before = {(q, o) for _, q, o, _ in topic_rows(broker.broker.settings.data_dir, "orders")}
    names = [f"m{i:03d}" for i in range(200)]
    ids = prepare(stub, 0, *names)
    assert end(stub, 0, [*ids, ids[0]]).committed == 200, "a transaction listed twice is committed once"
    rows = topic_rows(broker.broker.settings.data_dir, "orders")
    committed = [(q, o, body) for _, q, o, body in rows if (q, o) not in before]
    assert sorted(body for *_, body in committed) == sorted(n.encode() for n in names)
    for queue in range(4):
        offsets = sorted(o for q, o in before if q == queue) + [o for q, o, _ in committed if q == queue]
        assert offsets == list(range(len(offsets))), f"queue {queue}: dense, after what it held"
        in_queue = [body for q, _, body in sorted(committed) if q == queue]
        assert in_queue == sorted(in_queue), "each queue in the order the batch was prepared"
