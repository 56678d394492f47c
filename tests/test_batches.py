"""Exactly-once batches (the broker's side of the Spark sink): PrepareColumns and EndBatch over
real gRPC. Prepared messages sit at their final offsets, invisible, and hold back their queue's
readers until their batch ends; a batch commits at most once; every end rolls back what the
group left open at or below it; rolled-back offsets are gaps every reader steps over; a bad
request is refused with a typed error and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pyarrow as pa
import pytest

from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import Message, MessageIdInUse, Producer, PullConsumer
from producer_sdk.columns import table_calls
from tests.support import BrokerThread, broker_settings, store_snapshot

GROUP = "spark-q1"


@pytest.fixture
def stub(broker: BrokerThread) -> Iterator[pb_grpc.BrokerStub]:
    with grpc.insecure_channel(broker.address) as channel:
        yield pb_grpc.BrokerStub(channel)


def prepare(stub, batch_id: int, *bodies: str, group=GROUP, ids=None, topic="orders") -> pb.PrepareColumnsResponse:
    ids = ids or [f"{b.replace(' ', '_')}-id" for b in bodies]
    table = pa.table({"body": [b.encode() for b in bodies], "message_id": ids})
    ((request, _),) = table_calls(
        table, lambda: pb.PrepareColumnsRequest(producer_group=group, batch_id=batch_id, topic=topic)
    )
    return stub.PrepareColumns(request)


def end(stub, batch_id: int, ranges=(), *, resolution=pb.COMMIT, group: str = GROUP) -> pb.EndBatchResponse:
    request = pb.EndBatchRequest(producer_group=group, batch_id=batch_id, resolution=resolution, range_ids=ranges)
    return stub.EndBatch(request)


def visible(broker: BrokerThread, topic: str = "orders") -> list[bytes]:
    """The bodies a consumer pulls from every queue of ``topic``, following next_offset."""
    found = []
    with PullConsumer(group="reader", broker=broker.address) as consumer:
        for queue_id in range(4):
            offset = 0
            while True:
                batch = consumer.pull(topic, queue_id=queue_id, offset=offset)
                found += [m.body for m in batch.messages]
                if batch.next_offset == offset:
                    break
                offset = batch.next_offset
    return sorted(found)


def open_ranges(broker: BrokerThread) -> list[tuple]:
    return store_snapshot(broker.broker.settings.data_dir)["open_ranges"]


def test_prepared_messages_are_invisible_and_hold_back_their_queue_until_the_batch_commits(broker, stub):
    prepared = prepare(stub, 0, "a", "b", "c")
    assert (prepared.first_offset, prepared.end_offset, prepared.already_stored) == (0, 3, 0)
    with Producer(broker=broker.address) as producer:  # the queues take turns: the fourth comes after them
        for _ in range(3):
            producer.send_table("orders", pa.table({"body": [b"other queue"]}))
        producer.send_table("orders", pa.table({"body": [b"later"]}))
    assert visible(broker) == [b"other queue"] * 3, "the prepared queue's readers stop at its open range"
    with PullConsumer(group="reader", broker=broker.address) as consumer:
        assert consumer.queue_offsets("orders")[prepared.queue_id] == (0, 0)
    ended = end(stub, 0, [prepared.range_id])
    assert (ended.already_committed, ended.committed, ended.rolled_back) == (False, 3, 0)
    assert visible(broker) == sorted([b"a", b"b", b"c", b"later"] + [b"other queue"] * 3)
    assert open_ranges(broker) == []


def test_a_batch_commits_once_and_a_replay_of_it_is_rolled_back(broker, stub):
    first = prepare(stub, 0, "a", "b", "c")
    end(stub, 0, [first.range_id])
    same_ids = prepare(stub, 0, "a", "b", "c")
    assert (same_ids.range_id, same_ids.already_stored) == (0, 3), "ids committed before are not stored again"
    replay = prepare(stub, 0, "a2", "b2", "c2")  # a replayed batch: the same rows under new message ids
    again = end(stub, 0, [replay.range_id])
    assert (again.already_committed, again.committed, again.rolled_back) == (True, 0, 3)
    assert visible(broker) == [b"a", b"b", b"c"]
    assert open_ranges(broker) == []


def test_an_end_rolls_back_what_is_open_at_or_below_its_batch_and_leaves_later_batches(broker, stub):
    prepare(stub, 0, "dead")  # a crashed run's batch 0, never committed
    prepare(stub, 1, "failed attempt")
    succeeded = prepare(stub, 1, "ok")
    later = prepare(stub, 2, "later")
    ended = end(stub, 1, [succeeded.range_id])
    assert (ended.committed, ended.rolled_back) == (1, 2)
    assert [row[0] for row in open_ranges(broker)] == [later.range_id]
    end(stub, 2, [later.range_id])
    assert visible(broker) == [b"later", b"ok"]


def test_an_abort_rolls_back_its_batch_and_the_batch_can_then_commit(broker, stub):
    prepare(stub, 0, "x", "y")
    ended = end(stub, 0, resolution=pb.ROLLBACK)
    assert (ended.already_committed, ended.committed, ended.rolled_back) == (False, 0, 2)
    retried = prepare(stub, 0, "x", "y")  # the same ids: free again once rolled back
    assert end(stub, 0, [retried.range_id]).committed == 2
    assert visible(broker) == [b"x", b"y"]


def test_rolled_back_offsets_are_gaps_that_pulls_receives_and_retention_step_over(broker, stub, clock):
    with Producer(broker=broker.address) as producer:

        def send(*bodies: bytes) -> None:  # each call to the next queue: four calls come back to queue 0
            for body in bodies:
                producer.send_table("orders", pa.table({"body": [body]}))
                for _ in range(3):
                    producer.send_table("orders", pa.table({"body": [b"elsewhere"]}))

        first = prepare(stub, 0, "gone-1", "gone-2")  # queue 0, offsets 0 and 1
        assert first.queue_id == 0
        for _ in range(3):
            prepare(stub, 0, "filler", ids=[f"filler-{_}"])
        send(b"after-gap")  # queue 0, offset 2
        end(stub, 0, resolution=pb.ROLLBACK)
        send(b"tail")  # queue 0, offset 3: a rolled-back offset is never handed out again
    with PullConsumer(group="reader", broker=broker.address) as consumer:
        rows = consumer.pull("orders", queue_id=0, offset=0)
        assert [(m.queue_offset, m.body) for m in rows.messages] == [(2, b"after-gap"), (3, b"tail")]
        assert (rows.next_offset, rows.min_offset, rows.max_offset) == (4, 0, 4)
        table = consumer.pull_table("orders", queue_id=0, offset=1)
        assert (table.messages["queue_offset"].to_pylist(), table.next_offset) == ([2, 3], 4)
    received = broker.run(broker.broker.messaging.receive("g", "orders", 0, 10, 30, None))
    assert [d.message.queue_offset for d in received] == [2, 3]
    for delivery in received:
        broker.run(broker.broker.messaging.ack("g", "orders", delivery.receipt_handle))
    assert broker.run(broker.broker.messaging.consumer_offsets("g", "orders"))[0] == 4, "acks move over the gap"
    clock.advance(73 * 3600)
    broker.run(broker.broker.retention.sweep())
    with PullConsumer(group="reader", broker=broker.address) as consumer:
        assert consumer.queue_offsets("orders")[0] == (4, 4)


def test_a_batch_left_open_past_the_timeout_is_rolled_back_and_its_commit_refused(broker, stub, clock):
    prepared = prepare(stub, 0, "late")
    with Producer(broker=broker.address) as producer:
        for _ in range(4):
            producer.send_table("orders", pa.table({"body": [b"plain"]}))
    assert visible(broker) == [b"plain"] * 3
    clock.advance(601)  # past the default batch timeout (600 s)
    assert broker.run(broker.broker.batches.expire()) == 1
    assert visible(broker) == [b"plain"] * 4, "the queue's readers go on"
    before = store_snapshot(broker.broker.settings.data_dir)
    with pytest.raises(grpc.RpcError) as refused:
        end(stub, 0, [prepared.range_id])
    assert refused.value.code() is grpc.StatusCode.NOT_FOUND and "rolled back" in refused.value.details()
    assert store_snapshot(broker.broker.settings.data_dir) == before


def test_message_ids_in_open_ranges_are_not_taken_twice(broker, stub):
    earlier = prepare(stub, 0, "m", ids=["shared"])
    retried = prepare(stub, 0, "m", ids=["shared"])  # a task's retry: the earlier attempt can no longer commit
    assert [row[0] for row in open_ranges(broker)] == [retried.range_id]
    with pytest.raises(grpc.RpcError) as other_group:
        prepare(stub, 0, "m", "m", ids=["x", "shared"], group="spark-q2")
    assert other_group.value.code() is grpc.StatusCode.ALREADY_EXISTS
    assert other_group.value.details().startswith("row 1: message id 'shared' is in open range")
    with Producer(broker=broker.address) as producer, pytest.raises(MessageIdInUse, match="not committed yet"):
        producer.send(Message(topic="orders", body=b"m", message_id="shared"))
    with pytest.raises(grpc.RpcError):
        end(stub, 0, [earlier.range_id])
    assert end(stub, 0, [retried.range_id]).committed == 1
    assert visible(broker) == [b"m"]


def test_a_prepare_is_all_or_none_and_a_bad_one_changes_nothing(broker, stub):
    before = store_snapshot(broker.broker.settings.data_dir)
    cases = {
        "a bad row": {"bodies": ("ok", "ok"), "ids": ["ok", "bad id"]},
        "a negative batch id": {"batch_id": -1},
        "a bad group": {"group": "bad group"},
        "an unknown topic": {"topic": "nope"},
        "a hidden topic": {"topic": "RMQ_SYS_TRANS_HALF_TOPIC"},
    }
    statuses = {}
    for case, changes in cases.items():
        args = {"batch_id": 0, "bodies": ("ok",), "group": GROUP, "topic": "orders", "ids": None, **changes}
        with pytest.raises(grpc.RpcError) as refused:
            prepare(stub, args["batch_id"], *args["bodies"], group=args["group"], topic=args["topic"], ids=args["ids"])
        statuses[case] = refused.value.code()
        if case == "a bad row":
            assert refused.value.details().startswith("row 1: message_id must be")
    assert statuses == {
        "a bad row": grpc.StatusCode.INVALID_ARGUMENT,
        "a negative batch id": grpc.StatusCode.INVALID_ARGUMENT,
        "a bad group": grpc.StatusCode.INVALID_ARGUMENT,
        "an unknown topic": grpc.StatusCode.NOT_FOUND,
        "a hidden topic": grpc.StatusCode.PERMISSION_DENIED,
    }
    assert store_snapshot(broker.broker.settings.data_dir) == before


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("negative batch id", grpc.StatusCode.INVALID_ARGUMENT),
        ("unknown resolution", grpc.StatusCode.INVALID_ARGUMENT),
        ("rollback naming ranges", grpc.StatusCode.INVALID_ARGUMENT),
        ("bad group", grpc.StatusCode.INVALID_ARGUMENT),
        ("unknown range", grpc.StatusCode.NOT_FOUND),
        ("another group's range", grpc.StatusCode.NOT_FOUND),
        ("another batch's range", grpc.StatusCode.NOT_FOUND),
        ("a rolled-back range", grpc.StatusCode.NOT_FOUND),
    ],
)
def test_a_bad_end_is_refused_with_a_typed_error_and_changes_nothing(broker, stub, case, status):
    mine = [prepare(stub, 1, "mine").range_id]
    theirs = [prepare(stub, 0, "theirs", group="spark-q2").range_id]
    rolled_back = [prepare(stub, 0, "gone").range_id]
    later = [prepare(stub, 2, "later").range_id]
    end(stub, 0, resolution=pb.ROLLBACK)
    requests = {
        "negative batch id": (-1, mine, pb.COMMIT, GROUP),
        "unknown resolution": (1, mine, pb.UNKNOWN, GROUP),
        "rollback naming ranges": (1, mine, pb.ROLLBACK, GROUP),
        "bad group": (1, mine, pb.COMMIT, "bad group"),
        "unknown range": (1, [*mine, 10_000], pb.COMMIT, GROUP),
        "another group's range": (1, [*mine, *theirs], pb.COMMIT, GROUP),
        "another batch's range": (1, [*mine, *later], pb.COMMIT, GROUP),
        "a rolled-back range": (1, [*mine, *rolled_back], pb.COMMIT, GROUP),
    }
    batch_id, ranges, resolution, group = requests[case]
    before = store_snapshot(broker.broker.settings.data_dir)
    with pytest.raises(grpc.RpcError) as refused:
        end(stub, batch_id, ranges, resolution=resolution, group=group)
    assert refused.value.code() is status
    assert store_snapshot(broker.broker.settings.data_dir) == before, "nothing committed, rolled back or recorded"


def test_the_test_controls_lose_a_prepare_s_acknowledgement_and_drop_a_batch_end(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data", test_controls=True))
    faults = broker.broker.controls.faults
    try:
        with grpc.insecure_channel(broker.address) as channel:
            stub = pb_grpc.BrokerStub(channel)
            faults.set(drop_end_transactions=0, lose_half_acks=2, delay_checks=0)
            with pytest.raises(grpc.RpcError) as lost:
                prepare(stub, 0, "a", "b")
            assert lost.value.code() is grpc.StatusCode.UNAVAILABLE
            ((range_id, *_),) = open_ranges(broker)
            faults.set(drop_end_transactions=1, lose_half_acks=0, delay_checks=0)
            with pytest.raises(grpc.RpcError) as dropped:
                end(stub, 0, [range_id])
            assert dropped.value.code() is grpc.StatusCode.UNAVAILABLE
            assert visible(broker) == [], "the end never reached the broker"
            assert end(stub, 0, [range_id]).committed == 2, "the retry goes through"
    finally:
        broker.stop()


def test_a_committed_batch_s_marker_leaves_with_retention(broker, stub, clock):
    end(stub, 0, [prepare(stub, 0, "a").range_id])
    assert [row[:2] for row in store_snapshot(broker.broker.settings.data_dir)["committed_batches"]] == [(GROUP, 0)]
    clock.advance(73 * 3600)  # past the default 72 h
    broker.run(broker.broker.retention.sweep())
    assert store_snapshot(broker.broker.settings.data_dir)["committed_batches"] == []
