"""Transactions end to end through the SDK and real gRPC: docs/architecture.md, guarantees 1 and 2."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from broker import model
from broker.model import Resolution, TransactionState
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import (
    AsyncRocketMQTransactionProducer,
    BrokerUnavailable,
    InvalidArgument,
    LocalTransactionState,
    Message,
    PullConsumer,
    ResolutionConflict,
    RocketMQTransactionProducer,
    TransactionListener,
)
from producer_sdk import TransactionState as SdkState
from producer_sdk.errors import from_item_error
from tests.support import ScriptedListener, end_transaction, half_log, op_log, send_half, topic_rows, wait_until


def committed_bodies(broker) -> list[bytes]:
    return sorted(body for _, _, _, body in topic_rows(broker.broker.settings.data_dir, "orders"))


def test_a_committed_message_is_readable_once_with_its_fields(broker):
    with RocketMQTransactionProducer(
        group="orders-svc", broker=broker.address, listener=ScriptedListener()
    ) as producer:
        result = producer.send_message_in_transaction(
            Message(topic="orders", body=b"o-1", keys=["o-1"], tags="created", properties={"a": "b"})
        )
    assert result.local_state is LocalTransactionState.COMMIT
    assert result.state is SdkState.COMMITTED
    with PullConsumer(group="audit", broker=broker.address) as consumer:
        messages = [
            m for q in consumer.queue_offsets("orders") for m in consumer.pull("orders", queue_id=q, offset=0).messages
        ]
    assert len(messages) == 1
    (message,) = messages
    assert (message.body, message.keys, message.tags, message.properties) == (b"o-1", ("o-1",), "created", {"a": "b"})
    assert (message.message_id, message.transaction_id) == (result.message_id, result.transaction_id)


def test_a_rolled_back_message_is_never_readable(broker):
    with RocketMQTransactionProducer(
        group="g", broker=broker.address, listener=ScriptedListener("ROLLBACK")
    ) as producer:
        result = producer.send_message_in_transaction(Message(topic="orders", body=b"gone"))
    assert result.state is SdkState.ROLLED_BACK
    assert committed_bodies(broker) == []
    assert len(op_log(broker.broker.settings.data_dir)) == 1


def test_a_half_message_is_invisible_until_committed(broker):
    with RocketMQTransactionProducer(
        group="g", broker=broker.address, listener=ScriptedListener("UNKNOWN")
    ) as producer:
        result = producer.send_message_in_transaction(Message(topic="orders", body=b"later"))
    assert result.state is SdkState.PENDING
    assert committed_bodies(broker) == []
    assert len(half_log(broker.broker.settings.data_dir)) == 1


def test_an_exception_in_the_local_transaction_counts_as_unknown(broker):
    class Failing(TransactionListener):
        def execute_local_transaction(self, msg, arg):
            raise RuntimeError("database down")

        def check_local_transaction(self, msg):
            return LocalTransactionState.UNKNOWN

    with RocketMQTransactionProducer(group="g", broker=broker.address, listener=Failing()) as producer:
        result = producer.send_message_in_transaction(Message(topic="orders", body=b"x"))
    assert (result.local_state, result.state) == (LocalTransactionState.UNKNOWN, SdkState.PENDING)


def end(stub, transaction_id, resolution, source=pb.CLIENT, group="g"):
    """One end (a batch of one): its result, or its refusal raised as the SDK's typed error."""
    request = pb.EndTransactionRequest(
        transaction_id=transaction_id, producer_group=group, resolution=resolution, source=source
    )
    outcome = end_transaction(stub, request)
    if outcome.WhichOneof("outcome") == "error":
        raise from_item_error(outcome.error)
    return outcome.result


def prepare(stub, body=b"x", message_id="m-1", group="g"):
    return send_half(stub, pb.Message(topic="orders", body=body, message_id=message_id), group)


@pytest.fixture
def stub(broker):
    with grpc.insecure_channel(broker.address) as channel:
        yield pb_grpc.BrokerStub(channel)


def test_a_duplicate_end_transaction_leaves_one_copy(broker, stub):
    txid = prepare(stub).transaction_id
    first = end(stub, txid, pb.COMMIT)
    second = end(stub, txid, pb.COMMIT, source=pb.CHECK)
    assert (first.state, first.already_resolved) == (pb.COMMITTED, False)
    assert (second.state, second.already_resolved) == (pb.COMMITTED, True)
    assert committed_bodies(broker) == [b"x"]
    assert len(op_log(broker.broker.settings.data_dir)) == 1


def test_a_conflicting_resolution_is_refused_naming_the_recorded_outcome(broker, stub):
    txid = prepare(stub).transaction_id
    end(stub, txid, pb.COMMIT)
    with pytest.raises(ResolutionConflict) as refused:
        end(stub, txid, pb.ROLLBACK)
    assert "COMMITTED" in str(refused.value) and refused.value.status == "RESOLUTION_CONFLICT"
    assert committed_bodies(broker) == [b"x"]


def test_a_rollback_cannot_be_turned_into_a_commit(broker, stub):
    txid = prepare(stub).transaction_id
    end(stub, txid, pb.ROLLBACK)
    with pytest.raises(ResolutionConflict, match="ROLLED_BACK"):
        end(stub, txid, pb.COMMIT, source=pb.CHECK)
    assert committed_bodies(broker) == []


def test_a_retried_half_send_with_the_same_message_id_is_stored_once(broker, stub):
    first = prepare(stub, message_id="retry-1")
    second = prepare(stub, message_id="retry-1")
    assert (second.transaction_id, second.half_offset) == (first.transaction_id, first.half_offset)
    assert len(half_log(broker.broker.settings.data_dir)) == 1
    end(stub, first.transaction_id, pb.COMMIT)
    prepare(stub, message_id="retry-1")
    assert committed_bodies(broker) == [b"x"]
    assert broker.broker.store.pending_count() == 0


def test_concurrent_client_and_check_commits_of_the_same_transaction_leave_one_copy(broker, stub):
    txids = [prepare(stub, body=str(i).encode(), message_id=f"race-{i}").transaction_id for i in range(60)]
    with ThreadPoolExecutor(8) as pool:
        replies = list(
            pool.map(lambda args: end(stub, *args), [(t, pb.COMMIT, s) for t in txids for s in (pb.CLIENT, pb.CHECK)])
        )
    assert sorted(committed_bodies(broker)) == sorted(str(i).encode() for i in range(60))
    assert all(r.state == pb.COMMITTED for r in replies)
    assert sum(not r.already_resolved for r in replies) == 60


def test_a_late_client_commit_after_the_checks_commit_leaves_one_copy(broker, clock):
    local_done = threading.Event()
    release = threading.Event()

    class SlowCommit(TransactionListener):
        def execute_local_transaction(self, msg, arg):
            local_done.set()  # the local transaction is durable; only the reply to the broker is slow
            release.wait(10)
            return LocalTransactionState.COMMIT

        def check_local_transaction(self, msg):
            return LocalTransactionState.COMMIT if local_done.is_set() else LocalTransactionState.UNKNOWN

    with (
        RocketMQTransactionProducer(group="g", broker=broker.address, listener=SlowCommit()) as producer,
        ThreadPoolExecutor(1) as pool,
    ):
        sending = pool.submit(producer.send_message_in_transaction, Message(topic="orders", body=b"once"))
        assert local_done.wait(10)
        clock.advance(2)
        assert broker.check_once().checked == 1
        wait_until(lambda: committed_bodies(broker) == [b"once"])
        release.set()
        result = sending.result(10)
    assert result.state is SdkState.COMMITTED
    assert committed_bodies(broker) == [b"once"]


def test_a_client_end_after_a_discard_raises_resolution_conflict(broker, clock, stub):
    txid = prepare(stub).transaction_id
    clock.advance(broker.broker.settings.max_half_age + 1)
    assert broker.check_once().discarded == 1
    with pytest.raises(ResolutionConflict, match="DISCARDED"):
        end(stub, txid, pb.COMMIT)
    assert committed_bodies(broker) == []


def test_the_sdk_raises_resolution_conflict_for_a_discarded_transaction(broker, clock):
    class DiscardFirst(TransactionListener):
        def execute_local_transaction(self, msg, arg):
            clock.advance(broker.broker.settings.max_half_age + 1)
            broker.check_once()
            return LocalTransactionState.COMMIT

        def check_local_transaction(self, msg):
            return LocalTransactionState.UNKNOWN

    with (
        RocketMQTransactionProducer(group="g", broker=broker.address, listener=DiscardFirst()) as producer,
        pytest.raises(ResolutionConflict, match="DISCARDED"),
    ):
        producer.send_message_in_transaction(Message(topic="orders", body=b"late"))


def test_the_async_producer_accepts_async_listener_methods(broker):
    class AsyncListener(TransactionListener):
        async def execute_local_transaction(self, msg, arg):
            await asyncio.sleep(0)
            return LocalTransactionState.COMMIT if arg == "yes" else LocalTransactionState.ROLLBACK

        async def check_local_transaction(self, msg):
            return LocalTransactionState.UNKNOWN

    async def scenario():
        async with AsyncRocketMQTransactionProducer(
            group="g", broker=broker.address, listener=AsyncListener()
        ) as producer:
            return await asyncio.gather(
                producer.send_message_in_transaction(Message(topic="orders", body=b"a"), "yes"),
                producer.sendMessageInTransaction(Message(topic="orders", body=b"b"), "no"),
            )

    committed, rolled_back = asyncio.run(scenario())
    assert (committed.state, rolled_back.state) == (SdkState.COMMITTED, SdkState.ROLLED_BACK)
    assert committed_bodies(broker) == [b"a"]


def test_the_first_resolution_wins_in_the_store(broker, stub):
    txid = prepare(stub).transaction_id
    end(stub, txid, pb.ROLLBACK)
    assert broker.broker.store.transaction(txid).state is TransactionState.ROLLED_BACK


def test_a_producer_with_an_invalid_group_is_refused_when_made(broker):
    with pytest.raises(InvalidArgument, match="producer group"):
        RocketMQTransactionProducer(group="not a group", broker=broker.address, listener=ScriptedListener())


def test_a_producer_without_a_broker_fails_to_be_made_with_broker_unavailable():
    with pytest.raises(BrokerUnavailable):
        RocketMQTransactionProducer(group="g", broker="127.0.0.1:1", listener=ScriptedListener(), timeout=0.5)


def test_a_check_answered_before_its_round_records_it_still_says_so_on_the_committed_message(broker, tmp_path):
    """A producer may answer a check within a millisecond, before the round that sent it has
    counted it: the committed copy still carries TRANSACTION_CHECK_TIMES, as RocketMQ's does."""
    service = broker.broker.transactions
    message = model.Message(topic="orders", body=b"fast", message_id="fast-answer-1")
    txn = broker.run(service.prepare(message, "orders-svc"))
    broker.run(service.answer_check(txn.transaction_id, "orders-svc", Resolution.COMMIT))
    (committed,) = broker.run(broker.broker.messaging.pull("orders", txn.queue_id, 0, 10)).messages
    assert committed.properties["TRANSACTION_CHECK_TIMES"] == "1"
