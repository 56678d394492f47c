"""Kafka-model transactions over real gRPC: messages to several topics and queues and consumer
offsets, all visible at commit or none; fencing by transactional id; the broker's timeout; retried
calls recognised; bad input refused with a typed error and no table changed."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from broker.model import Topic
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import (
    AsyncKafkaTransactionProducer,
    InvalidArgument,
    InvalidTxnState,
    KafkaTransactionProducer,
    Message,
    MessageIdInUse,
    Producer,
    ProducerFenced,
    PullConsumer,
    TopicNotFound,
    TransactionAborted,
)
from tests.support import BrokerThread, FakeClock, broker_settings, store_snapshot, topic_rows, wait_until

TOPICS = (Topic("orders", 4), Topic("payments", 3), Topic("audit", 2))
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def broker(tmp_path: Path, clock: FakeClock) -> Iterator[BrokerThread]:
    broker = BrokerThread(broker_settings(tmp_path / "data", topics=TOPICS), clock)
    yield broker
    broker.stop()


@pytest.fixture
def stub(broker: BrokerThread) -> Iterator[pb_grpc.BrokerStub]:
    with grpc.insecure_channel(broker.address) as channel:
        yield pb_grpc.BrokerStub(channel)


def visible(address: str, topic: str) -> list[bytes]:
    """Every body a consumer can pull from ``topic``, all queues, following next_offset."""
    found = []
    with PullConsumer(group="reader", broker=address) as consumer:
        for queue_id, (low, _) in consumer.queue_offsets(topic).items():
            offset = low
            while (batch := consumer.pull(topic, queue_id=queue_id, offset=offset)).next_offset > offset:
                found += [m.body for m in batch.messages]
                offset = batch.next_offset
    return sorted(found)


def bodies(prefix: str, count: int) -> list[bytes]:
    return sorted(f"{prefix}-{i}".encode() for i in range(count))


def send_both(producer: KafkaTransactionProducer, prefix: str, count: int) -> None:
    """Messages to both topics; their ids (which pick their queues) are the same in every run."""
    for i in range(count):
        topic = "payments" if i % 2 == 0 else "audit"
        producer.send(Message(topic=topic, body=f"{prefix}-{i}".encode(), message_id=f"{prefix}-{i}"))


def test_messages_of_an_open_transaction_are_invisible_until_commit_and_gone_on_abort(broker):
    with KafkaTransactionProducer(transactional_id="t1", broker=broker.address) as producer:
        producer.begin_transaction()
        send_both(producer, "c", 20)
        assert visible(broker.address, "payments") == visible(broker.address, "audit") == []
        producer.commit_transaction()
        committed = visible(broker.address, "payments") + visible(broker.address, "audit")
        assert sorted(committed) == bodies("c", 20)
        queues = {(t, row[1]) for t in ("payments", "audit") for row in topic_rows(broker.broker.settings.data_dir, t)}
        assert len(queues) == 5, "several queues of both topics"

        producer.begin_transaction()
        send_both(producer, "a", 20)
        producer.abort_transaction()
        assert sorted(visible(broker.address, "payments") + visible(broker.address, "audit")) == bodies("c", 20)


def test_a_transaction_s_end_takes_an_offset_in_each_queue_it_wrote_to_as_kafka_s_marker(tmp_path, clock):
    """Commit and abort each take the next offset of their queue, no message has it, and a
    restart does not hand it out again: later messages get the offsets Kafka would give them."""
    settings = broker_settings(tmp_path / "data", topics=(Topic("ledger", 1),))
    broker = BrokerThread(settings, clock)
    try:
        with KafkaTransactionProducer(transactional_id="marks", broker=broker.address) as producer:
            producer.begin_transaction()
            sent = [producer.send(Message(topic="ledger", body=f"c-{i}".encode())).queue_offset for i in range(2)]
            producer.commit_transaction()
            producer.begin_transaction()
            sent.append(producer.send(Message(topic="ledger", body=b"aborted")).queue_offset)
            producer.abort_transaction()
        assert sent == [0, 1, 3], "offset 2 is the commit's"
        with PullConsumer(group="reader", broker=broker.address) as consumer:
            assert consumer.queue_offsets("ledger") == {0: (0, 5)}, "4 is the abort's"
    finally:
        broker.stop()
    broker = BrokerThread(settings, clock)
    try:
        with Producer(broker=broker.address) as plain:
            assert plain.send(Message(topic="ledger", body=b"after")).queue_offset == 5
        with PullConsumer(group="reader", broker=broker.address) as consumer:
            batch = consumer.pull("ledger", queue_id=0, offset=0)
        assert [(m.queue_offset, m.body) for m in batch.messages] == [(0, b"c-0"), (1, b"c-1"), (5, b"after")]
    finally:
        broker.stop()


def test_an_open_transaction_holds_back_later_commits_of_its_queues(broker):
    """Readers stop at a queue's first open range: a commit after it, in the same queue, waits."""
    with (
        KafkaTransactionProducer(transactional_id="early", broker=broker.address) as early,
        Producer(broker=broker.address) as plain,
    ):
        early.begin_transaction()
        held = {early.send(Message(topic="audit", body=f"early-{i}".encode(), message_id=f"e-{i}")).queue_id
                for i in range(6)}  # fmt: skip
        assert held == {0, 1}
        for i in range(6):
            plain.send(Message(topic="audit", body=f"plain-{i}".encode(), message_id=f"p-{i}"))
        assert visible(broker.address, "audit") == [], "both audit queues wait on the open transaction"
        early.commit_transaction()
        assert visible(broker.address, "audit") == sorted(bodies("early", 6) + bodies("plain", 6))


def test_offsets_sent_to_a_transaction_commit_with_it_and_drop_with_an_abort(broker):
    with Producer(broker=broker.address) as plain:
        for i in range(8):
            plain.send(Message(topic="orders", body=b"o", message_id=f"o-{i}"))
    ends = {q: end for q, (_, end) in PullConsumer(group="x", broker=broker.address).queue_offsets("orders").items()}
    with (
        KafkaTransactionProducer(transactional_id="t1", broker=broker.address) as producer,
        PullConsumer(group="etl", broker=broker.address) as consumer,
    ):
        with producer.transaction():
            producer.send(Message(topic="payments", body=b"p"))
            producer.send_offsets_to_transaction({("orders", q): end for q, end in ends.items()}, group="etl")
            assert consumer.committed_offsets("orders") == {}
        assert consumer.committed_offsets("orders") == ends
        producer.begin_transaction()
        producer.send_offsets_to_transaction({("orders", q): 0 for q in ends}, group="etl")
        producer.abort_transaction()
        assert consumer.committed_offsets("orders") == ends


def test_a_second_producer_with_the_same_id_fences_the_first(broker):
    first = KafkaTransactionProducer(transactional_id="etl", broker=broker.address)
    first.begin_transaction()
    send_both(first, "first", 6)
    with KafkaTransactionProducer(transactional_id="etl", broker=broker.address) as second:
        assert second.epoch == first.epoch + 1
        with pytest.raises(ProducerFenced, match="fenced"):
            first.commit_transaction()
        assert visible(broker.address, "payments") == visible(broker.address, "audit") == []
        for call in (first.begin_transaction, lambda: first.send(Message(topic="audit", body=b"x"))):
            with pytest.raises(ProducerFenced):
                call()
        with second.transaction():
            send_both(second, "second", 4)
    first.close()
    assert sorted(visible(broker.address, "payments") + visible(broker.address, "audit")) == bodies("second", 4)
    (state,) = broker.broker.store.transactional_ids("etl")
    assert (state.epoch, state.committed, state.aborted) == (1, 1, 1)


def test_the_broker_aborts_a_transaction_open_longer_than_its_timeout(broker, clock):
    with KafkaTransactionProducer(transactional_id="slow", broker=broker.address, transaction_timeout=5) as producer:
        producer.begin_transaction()
        send_both(producer, "late", 4)
        clock.advance(4.9)
        time.sleep(1.2)  # two sweeps
        assert broker.broker.store.transactional_ids("slow")[0].state.value == "OPEN"
        clock.advance(0.2)
        wait_until(lambda: broker.broker.store.transactional_ids("slow")[0].state.value == "ABORTED")
        with pytest.raises(TransactionAborted, match="timeout"):
            producer.commit_transaction()
        assert visible(broker.address, "payments") == visible(broker.address, "audit") == []
        with producer.transaction():
            send_both(producer, "next", 2)
        assert sorted(visible(broker.address, "payments") + visible(broker.address, "audit")) == bodies("next", 2)


def test_the_async_producer_commits_concurrent_sends_together(broker):
    async def produce() -> None:
        async with AsyncKafkaTransactionProducer(transactional_id="async", broker=broker.address) as producer:
            async with producer.transaction():
                await asyncio.gather(*(producer.send(Message(topic="payments", body=b)) for b in bodies("g", 50)))
                assert visible(broker.address, "payments") == []
            with pytest.raises(RuntimeError):
                async with producer.transaction():
                    await producer.send(Message(topic="payments", body=b"aborted"))
                    raise RuntimeError("the block failed")
            async with producer.transaction():  # sends not awaited: the commit waits for them
                sending = [asyncio.ensure_future(producer.send(Message(topic="audit", body=b))) for b in bodies("l", 9)]
            assert all(s.done() for s in sending)

    asyncio.run(produce())
    assert visible(broker.address, "payments") == bodies("g", 50)
    assert visible(broker.address, "audit") == bodies("l", 9)


def ref(number: int, epoch: int = 0, tid: str = "raw") -> pb.TransactionRef:
    return pb.TransactionRef(transactional_id=tid, epoch=epoch, txn_number=number)


def raw_message(body: str, topic: str = "payments", message_id: str | None = None) -> pb.Message:
    return pb.Message(topic=topic, body=body.encode(), message_id=message_id or f"{body}-id")


def test_retried_calls_are_recognised(stub, broker):
    stub.InitTransactions(pb.InitTransactionsRequest(transactional_id="raw", transaction_timeout_seconds=60))
    send = sending(raw_message("r1"), raw_message("r2", "audit"))
    first, again = stub.SendInTransaction(send), stub.SendInTransaction(send)
    assert first == again
    ended = stub.EndTxn(pb.EndTxnRequest(txn=ref(1), commit=True))
    assert (ended.already_ended, ended.messages) == (False, 2)
    assert stub.EndTxn(pb.EndTxnRequest(txn=ref(1), commit=True)).already_ended
    assert visible(broker.address, "payments") + visible(broker.address, "audit") == [b"r1", b"r2"]


def sending(*messages: pb.Message, number: int = 1, epoch: int = 0, tid: str = "raw") -> pb.SendInTransactionRequest:
    return pb.SendInTransactionRequest(txn=ref(number, epoch, tid), messages=messages)


def refused(call, request, code: str) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        call(request)
    assert dict(caught.value.trailing_metadata())["halfmq-error"] == code, caught.value.details()


def test_bad_input_gets_a_typed_error_and_changes_no_table(stub, broker, tmp_path):
    stub.InitTransactions(pb.InitTransactionsRequest(transactional_id="raw", transaction_timeout_seconds=60))
    stub.SendInTransaction(sending(raw_message("kept")))
    with Producer(broker=broker.address) as plain:
        plain.send(Message(topic="audit", body=b"old", message_id="taken"))
    before = store_snapshot(tmp_path / "data")
    cases = [
        (stub.SendInTransaction, sending(raw_message("x", "nope")),
         "TOPIC_NOT_FOUND"),
        (stub.SendInTransaction, sending(raw_message("x", "RMQ_SYS_TRANS_HALF_TOPIC")),
         "HIDDEN_TOPIC"),
        (stub.SendInTransaction, sending(), "INVALID_ARGUMENT"),
        (stub.SendInTransaction, sending(raw_message("x"), raw_message("x")),
         "INVALID_ARGUMENT"),
        (stub.SendInTransaction, sending(raw_message("x", "audit", "taken")),
         "MESSAGE_ID_IN_USE"),
        (stub.SendInTransaction, sending(raw_message("x", message_id="bad id")),
         "INVALID_ARGUMENT"),
        (stub.SendInTransaction, sending(raw_message("x"), number=2), "INVALID_TXN_STATE"),
        (stub.SendInTransaction, sending(raw_message("x"), tid="never"),
         "TRANSACTIONAL_ID_NOT_FOUND"),
        (stub.SendInTransaction, sending(raw_message("x"), epoch=5),
         "INVALID_ARGUMENT"),
        (stub.SendInTransaction, sending(raw_message("x"), tid="bad id"),
         "INVALID_ARGUMENT"),
        (stub.SendOffsetsToTransaction, pb.SendOffsetsToTransactionRequest(
            txn=ref(1), consumer_group="g", offsets=[pb.OffsetInTransaction(topic="orders", queue_id=0, offset=1)]),
         "INVALID_ARGUMENT"),  # beyond the queue's end (0)
        (stub.SendOffsetsToTransaction, pb.SendOffsetsToTransactionRequest(
            txn=ref(1), consumer_group="g", offsets=[pb.OffsetInTransaction(topic="orders", queue_id=9, offset=0)]),
         "INVALID_ARGUMENT"),
        (stub.SendOffsetsToTransaction, pb.SendOffsetsToTransactionRequest(
            txn=ref(1), consumer_group="g", offsets=[pb.OffsetInTransaction(topic="nope", queue_id=0, offset=0)]),
         "TOPIC_NOT_FOUND"),
        (stub.SendOffsetsToTransaction, pb.SendOffsetsToTransactionRequest(
            txn=ref(1), consumer_group="", offsets=[pb.OffsetInTransaction(topic="orders", queue_id=0, offset=0)]),
         "INVALID_ARGUMENT"),
        (stub.EndTxn, pb.EndTxnRequest(txn=ref(0), commit=True), "INVALID_TXN_STATE"),
        (stub.EndTxn, pb.EndTxnRequest(txn=ref(3), commit=True), "INVALID_TXN_STATE"),
        (stub.InitTransactions, pb.InitTransactionsRequest(transactional_id="raw", transaction_timeout_seconds=0),
         "INVALID_ARGUMENT"),
        (stub.InitTransactions, pb.InitTransactionsRequest(transactional_id="raw", transaction_timeout_seconds=901),
         "INVALID_ARGUMENT"),
    ]  # fmt: skip
    for call, request, code in cases:
        refused(call, request, code)
    assert store_snapshot(tmp_path / "data") == before

    with KafkaTransactionProducer(transactional_id="sdk", broker=broker.address) as producer:
        after_init = store_snapshot(tmp_path / "data")
        with pytest.raises(InvalidTxnState, match="begin_transaction"):
            producer.send(Message(topic="payments", body=b"x"))
        with pytest.raises(InvalidTxnState):
            producer.commit_transaction()
        producer.begin_transaction()
        with pytest.raises(InvalidTxnState, match="open already"):
            producer.begin_transaction()
        with pytest.raises(TopicNotFound):
            producer.send(Message(topic="nope", body=b"x"))
        with pytest.raises(InvalidArgument, match="queue's end"):
            producer.send_offsets_to_transaction({("orders", 0): 7}, group="g")
        with pytest.raises(MessageIdInUse, match="taken"):
            producer.send(Message(topic="audit", body=b"x", message_id="taken"))
        producer.commit_transaction()  # nothing of it was stored
        with pytest.raises(InvalidTxnState):
            producer.commit_transaction()
        changed = store_snapshot(tmp_path / "data")
        assert changed.pop("transactional_ids") != after_init.pop("transactional_ids")
        assert changed == after_init, "refused calls and an empty transaction store nothing"


def test_consume_transform_produce_survives_sigkills_of_the_transform_exactly_once(broker, tmp_path):
    """examples/etl.py, SIGKILLed 5 times at random points and started again: one payment per order,
    and the group's committed offsets at the end of every queue."""
    orders = 1500
    with Producer(broker=broker.address) as plain:
        for start in range(0, orders, 500):
            plain.send_batch(
                [Message(topic="orders", body=json.dumps({"amount": i}).encode()) for i in range(start, start + 500)]
            )
    command = [sys.executable, "-m", "examples.etl", "--broker", broker.address, "--batch", "7"]
    # Each instance is killed once the group's committed offsets pass a random point: a moment
    # of its run that is random relative to its sends and commits, whatever the machine's speed.
    points = sorted(random.Random(25).sample(range(100, orders - 100), 5))
    with PullConsumer(group="etl", broker=broker.address) as consumer:
        for point in points:
            process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            while sum(consumer.committed_offsets("orders").values()) < point:
                assert process.poll() is None, f"the transform ended before its kill: {process.communicate()}"
                time.sleep(random.uniform(0.001, 0.02))
            process.kill()
            process.wait()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    payments = [json.loads(b) for b in visible(broker.address, "payments")]
    per_order = Counter(p["order"] for p in payments)
    assert len(per_order) == orders and set(per_order.values()) == {1}, "one payment per order"
    with PullConsumer(group="etl", broker=broker.address) as consumer:
        ends = {q: end for q, (_, end) in consumer.queue_offsets("orders").items()}
        assert consumer.committed_offsets("orders") == ends
    (etl,) = broker.broker.store.transactional_ids("orders-etl-1")
    assert etl.epoch == 5, "every restart fenced the instance before it"
    print(f"{orders} orders, {len(points)} SIGKILLs, {etl.committed} transactions committed, {etl.aborted} aborted")


def test_admin_api_cli_and_metrics_show_transactional_ids(broker, clock):
    with (
        KafkaTransactionProducer(transactional_id="done", broker=broker.address) as done,
        KafkaTransactionProducer(transactional_id="open", broker=broker.address, transaction_timeout=30) as left_open,
    ):
        with done.transaction():
            done.send(Message(topic="payments", body=b"p"))
        left_open.begin_transaction()
        for _ in range(3):
            left_open.send(Message(topic="audit", body=b"a"))
        left_open.send_offsets_to_transaction({("orders", 0): 0}, group="etl")
        clock.advance(2.5)
        with httpx.Client(base_url=broker.http) as http:
            listing = http.get("/transactional-ids").json()
            assert [i["transactional_id"] for i in listing["items"]] == ["done", "open"]
            opened = http.get("/transactional-ids", params={"state": "OPEN"}).json()["items"]
            assert [(i["transactional_id"], i["messages"], i["offsets"], i["epoch"]) for i in opened] == [
                ("open", 3, 1, 0)
            ]
            assert opened[0]["age_seconds"] == pytest.approx(2.5, abs=0.2) and opened[0]["timeout_seconds"] == 30
            detail = http.get("/transactional-ids/done").json()
            assert (detail["state"], detail["committed"], detail["age_seconds"]) == ("COMMITTED", 1, None)
            missing = http.get("/transactional-ids/nobody")
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "TRANSACTIONAL_ID_NOT_FOUND"
            bad_state = http.get("/transactional-ids", params={"state": "LOST"})
            assert bad_state.status_code == 422 and bad_state.json()["error"]["code"] == "INVALID_ARGUMENT"
            metrics = http.get("/metrics").text
        assert "halfmq_kafka_transactions_open 1.0" in metrics
        assert 'halfmq_kafka_transactions_ended_total{outcome="committed"} 1.0' in metrics
        cli = subprocess.run(
            [sys.executable, "-m", "halfmq_cli", "--url", broker.http, "transactional-ids", "list", "--state", "OPEN"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cli.returncode == 0, cli.stderr
        assert "open" in cli.stdout and "OPEN" in cli.stdout and "1 in all" in cli.stdout
    with KafkaTransactionProducer(transactional_id="open", broker=broker.address):
        pass  # fences the one left open, aborting its transaction
    with httpx.Client(base_url=broker.http) as http:
        fenced = http.get("/transactional-ids/open").json()
        assert (fenced["state"], fenced["aborted_by"], fenced["epoch"]) == ("ABORTED", "FENCED", 1)
        assert 'halfmq_kafka_transactions_ended_total{outcome="fenced"} 1.0' in http.get("/metrics").text
