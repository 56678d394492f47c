"""Batched sends and ends (issue 9): each item of a batch succeeds or fails on its own, a retried
batch stores each item once, and the SDK sends what concurrent callers submit together."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import AsyncRocketMQTransactionProducer, LocalTransactionState, Message, Producer, TopicNotFound
from producer_sdk._batcher import Batcher
from producer_sdk.errors import HalfmqError, InvalidArgument
from tests.support import ScriptedListener, half_log, op_log, store_snapshot, topic_rows


def outcome(o):
    return (o.WhichOneof("outcome"), o.error.code if o.HasField("error") else "")


def half(message_id: str, topic: str = "orders", group: str = "g") -> pb.SendHalfMessageRequest:
    return pb.SendHalfMessageRequest(
        message=pb.Message(topic=topic, body=message_id.encode(), message_id=message_id), producer_group=group
    )


def test_a_batch_of_half_messages_refuses_only_its_bad_items_and_a_retry_stores_each_once(broker):
    items = [half("h-1"), half("h-2", topic="nope"), half("h-3", group="bad group"), half("h-4")]
    with grpc.insecure_channel(broker.address) as channel:
        stub = pb_grpc.BrokerStub(channel)
        first = stub.SendHalfMessages(pb.SendHalfMessagesRequest(items=items))
        before = store_snapshot(broker.broker.settings.data_dir)
        again = stub.SendHalfMessages(pb.SendHalfMessagesRequest(items=items))  # the reply was "lost"
    assert [outcome(o) for o in first.outcomes] == [
        ("result", ""),
        ("error", "TOPIC_NOT_FOUND"),
        ("error", "INVALID_ARGUMENT"),
        ("result", ""),
    ]
    assert [o.result.transaction_id for o in again.outcomes] == [o.result.transaction_id for o in first.outcomes]
    assert store_snapshot(broker.broker.settings.data_dir) == before
    pending = broker.broker.store.list_transactions(None, 10, 0)[0]
    assert sorted(t.message_id for t in pending) == ["h-1", "h-4"]


def test_a_batch_of_ends_applies_each_item_on_its_own(broker):
    with grpc.insecure_channel(broker.address) as channel:
        stub = pb_grpc.BrokerStub(channel)
        halves = stub.SendHalfMessages(pb.SendHalfMessagesRequest(items=[half("e-1"), half("e-2"), half("e-3")]))
        one, two, three = (o.result.transaction_id for o in halves.outcomes)

        def end(txid, resolution, group="g"):
            return pb.EndTransactionRequest(transaction_id=txid, producer_group=group, resolution=resolution)

        ends = [end(one, pb.COMMIT), end(two, pb.ROLLBACK), end(three, pb.COMMIT, "other"), end("0" * 32, pb.COMMIT)]
        first = stub.EndTransactions(pb.EndTransactionsRequest(items=ends))
        again = stub.EndTransactions(pb.EndTransactionsRequest(items=ends))
        conflict = stub.EndTransactions(pb.EndTransactionsRequest(items=[end(one, pb.ROLLBACK)]))
    assert [outcome(o) for o in first.outcomes] == [
        ("result", ""),
        ("result", ""),
        ("error", "PRODUCER_GROUP_MISMATCH"),
        ("error", "TRANSACTION_NOT_FOUND"),
    ]
    assert [(o.result.state, o.result.already_resolved) for o in first.outcomes[:2]] == [
        (pb.COMMITTED, False),
        (pb.ROLLED_BACK, False),
    ]
    assert [(o.result.state, o.result.already_resolved) for o in again.outcomes[:2]] == [
        (pb.COMMITTED, True),
        (pb.ROLLED_BACK, True),
    ]
    assert outcome(conflict.outcomes[0]) == ("error", "RESOLUTION_CONFLICT")
    assert [r[0] for r in topic_rows(broker.broker.settings.data_dir, "orders")] == ["e-1"]
    totals = broker.broker.metrics.totals()  # counted per batch, each new resolution once
    assert (totals["committed"], totals["rolled_back"]) == (1, 1)


def test_an_item_repeated_within_one_batch_sees_the_items_before_it(broker):
    with grpc.insecure_channel(broker.address) as channel:
        stub = pb_grpc.BrokerStub(channel)
        halves = stub.SendHalfMessages(
            pb.SendHalfMessagesRequest(
                items=[half("r-1"), half("r-1"), half("r-1", group="other"), half("r-2"), half("r-3")]
            )
        )
        one, two, three = (halves.outcomes[i].result.transaction_id for i in (0, 3, 4))

        def end(txid, resolution):
            return pb.EndTransactionRequest(transaction_id=txid, producer_group="g", resolution=resolution)

        ends = stub.EndTransactions(
            pb.EndTransactionsRequest(
                items=[
                    end(one, pb.COMMIT),
                    end(one, pb.COMMIT),
                    end(two, pb.ROLLBACK),
                    end(two, pb.COMMIT),
                    end(three, pb.COMMIT),
                ]
            )
        )
    assert [outcome(o) for o in halves.outcomes] == [("result", ""), ("result", ""), ("error", "MESSAGE_ID_IN_USE"),
                                                      ("result", ""), ("result", "")]  # fmt: skip
    assert halves.outcomes[1].result.transaction_id == one
    assert [outcome(o) for o in ends.outcomes] == [("result", ""), ("result", ""), ("result", ""),
                                                    ("error", "RESOLUTION_CONFLICT"), ("result", "")]  # fmt: skip
    assert [o.result.already_resolved for o in ends.outcomes[:3]] == [False, True, False]
    data_dir = broker.broker.settings.data_dir
    assert sorted(r[0] for r in topic_rows(data_dir, "orders")) == ["r-1", "r-3"]
    assert len(half_log(data_dir)) == 3
    assert len(op_log(data_dir)) == 3
    totals = broker.broker.metrics.totals()
    assert (totals["committed"], totals["rolled_back"]) == (2, 1)


def test_a_batch_of_normal_messages_stores_the_good_ones_once(broker):
    messages = [
        pb.Message(topic="orders", body=b"1", message_id="n-1"),
        pb.Message(topic="orders", body=b"2", message_id="bad id!"),
        pb.Message(topic="orders", body=b"3", message_id="n-3"),
        pb.Message(topic="orders", body=b"3", message_id="n-3"),  # repeated within the batch: stored once
        pb.Message(topic="orders", body=b"4", message_id="h-1"),  # the id of a half message
    ]
    with grpc.insecure_channel(broker.address) as channel:
        stub = pb_grpc.BrokerStub(channel)
        stub.SendHalfMessages(pb.SendHalfMessagesRequest(items=[half("h-1")]))
        first = stub.SendMessages(pb.SendMessagesRequest(messages=messages))
        again = stub.SendMessages(pb.SendMessagesRequest(messages=messages))
        with pytest.raises(grpc.RpcError) as empty:
            stub.SendMessages(pb.SendMessagesRequest(messages=[]))
    assert [outcome(o) for o in first.outcomes] == [("result", ""), ("error", "INVALID_ARGUMENT"), ("result", ""),
                                                    ("result", ""), ("error", "MESSAGE_ID_IN_USE")]  # fmt: skip
    assert first.outcomes[3].result == first.outcomes[2].result
    assert [o.result for o in again.outcomes] == [o.result for o in first.outcomes]
    assert empty.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert sorted(r[0] for r in topic_rows(broker.broker.settings.data_dir, "orders")) == ["n-1", "n-3"]


def test_concurrent_transactions_of_one_producer_each_get_their_own_outcome(broker):
    listener = ScriptedListener()

    async def scenario():
        async with AsyncRocketMQTransactionProducer(group="g", broker=broker.address, listener=listener) as producer:
            messages = [Message(topic="orders" if i % 5 else "nope", body=b"%d" % i, keys=[f"k{i}"]) for i in range(50)]
            for i in range(0, 50, 3):
                listener.outcomes[f"k{i}"] = LocalTransactionState.ROLLBACK
            return await asyncio.gather(
                *(producer.send_message_in_transaction(m) for m in messages), return_exceptions=True
            )

    results = asyncio.run(scenario())
    for i, result in enumerate(results):
        if i % 5 == 0:
            assert isinstance(result, TopicNotFound), (i, result)
        else:
            assert result.state.value == ("ROLLED_BACK" if i % 3 == 0 else "COMMITTED"), (i, result)
    committed = sorted(r[3] for r in topic_rows(broker.broker.settings.data_dir, "orders"))
    assert committed == sorted(b"%d" % i for i in range(50) if i % 5 and i % 3)


def test_concurrent_sends_from_threads_share_calls_and_keep_their_own_errors(broker):
    from concurrent.futures import ThreadPoolExecutor

    with Producer(broker=broker.address) as producer, ThreadPoolExecutor(16) as pool:
        futures = [
            pool.submit(producer.send, Message(topic="orders", body=b"x", message_id=f"t-{i}" if i % 7 else "bad id!"))
            for i in range(100)
        ]
        outcomes = [f.exception() or f.result() for f in futures]
    assert all(isinstance(o, InvalidArgument) == (i % 7 == 0) for i, o in enumerate(outcomes))
    assert len(topic_rows(broker.broker.settings.data_dir, "orders")) == 100 - len(range(0, 100, 7))


def test_items_submitted_while_a_call_is_in_flight_go_out_together_in_the_next_call():
    calls: list[list[int]] = []

    async def scenario() -> list[object]:
        release = asyncio.Event()

        async def send(items: list[int]) -> list[int | HalfmqError]:
            calls.append(items)
            if len(calls) == 1:
                await release.wait()  # the first call is in flight while the rest arrive
            return [item * 10 if item != 7 else InvalidArgument("seven") for item in items]

        batcher: Batcher[int, int] = Batcher(send, lambda item: 1)
        first = asyncio.create_task(batcher.submit(0))
        await asyncio.sleep(0)
        rest = [asyncio.create_task(batcher.submit(i)) for i in range(1, 10)]
        await asyncio.sleep(0.01)
        release.set()
        return await asyncio.gather(first, *rest, return_exceptions=True)

    results = asyncio.run(scenario())
    assert calls == [[0], list(range(1, 10))]
    assert [r if not isinstance(r, Exception) else "error" for r in results] == [
        0, 10, 20, 30, 40, 50, 60, "error", 80, 90,
    ]  # fmt: skip


def test_a_batch_is_cut_at_its_item_and_byte_caps():
    calls: list[list[int]] = []

    async def scenario() -> None:
        async def send(items: list[int]) -> list[int | HalfmqError]:
            calls.append(items)
            await asyncio.sleep(0.01)
            return items

        batcher: Batcher[int, int] = Batcher(send, lambda item: item, max_items=4, max_bytes=100)
        await asyncio.gather(*(batcher.submit(n) for n in [1, 1, 1, 1, 1, 1, 60, 60, 200]))

    asyncio.run(scenario())
    assert calls == [[1], [1, 1, 1, 1], [1, 60], [60], [200]]


def test_no_more_than_max_in_flight_calls_are_made_at_once():
    calls: list[list[int]] = []

    async def scenario() -> None:
        release = asyncio.Event()

        async def send(items: list[int]) -> list[int | HalfmqError]:
            calls.append(items)
            await release.wait()
            return items

        batcher: Batcher[int, int] = Batcher(send, lambda item: 1, max_in_flight=2)
        first = asyncio.create_task(batcher.submit(0))
        await asyncio.sleep(0)
        second = asyncio.create_task(batcher.submit(1))
        await asyncio.sleep(0.01)  # two calls are in flight now: the rest must wait for one to end
        rest = [asyncio.create_task(batcher.submit(i)) for i in range(2, 10)]
        await asyncio.sleep(0.01)
        assert len(calls) == 2
        release.set()
        await asyncio.gather(first, second, *rest)

    asyncio.run(scenario())
    assert calls == [[0], [1], list(range(2, 10))]


def test_with_linger_an_idle_batcher_waits_to_gather_a_bigger_batch():
    calls: list[list[int]] = []

    async def scenario() -> None:
        async def send(items: list[int]) -> list[int | HalfmqError]:
            calls.append(items)
            return items

        batcher: Batcher[int, int] = Batcher(send, lambda item: 1, linger=0.05)
        first = asyncio.create_task(batcher.submit(0))
        await asyncio.sleep(0.01)  # within the linger: these join the first item's call
        await asyncio.gather(first, *(batcher.submit(i) for i in range(1, 5)))

    asyncio.run(scenario())
    assert calls == [[0, 1, 2, 3, 4]]
