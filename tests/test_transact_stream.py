"""The Transact stream (issue 9): half sends and ends carried on one open stream, each call
answered by its id with each item's outcome; a call refused as a whole leaves the stream open; a
lost call breaks the stream, and the SDK's retries store each transaction once."""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import subprocess
import sys
import time

import grpc

from broker.grpc_api.transact import MAX_CALLS
from broker.store.base import DB_FILE
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import AsyncRocketMQTransactionProducer, Message
from tests.processes import BrokerProcess
from tests.support import BrokerThread, ScriptedListener, broker_settings, half_log, store_snapshot, topic_rows


def half(message_id: str, topic: str = "orders", group: str = "g") -> pb.SendHalfMessageRequest:
    return pb.SendHalfMessageRequest(
        message=pb.Message(topic=topic, body=message_id.encode(), message_id=message_id), producer_group=group
    )


def end(transaction_id: str, resolution: pb.Resolution, group: str = "g") -> pb.EndTransactionRequest:
    return pb.EndTransactionRequest(transaction_id=transaction_id, producer_group=group, resolution=resolution)


def outcomes(reply: pb.TransactDown) -> list[tuple[str, str]]:
    field = reply.WhichOneof("reply")
    return [(o.WhichOneof("outcome"), o.error.code) for o in getattr(reply, field).outcomes]


class Stream:
    """One Transact stream over a blocking channel: send a request, read the next reply."""

    def __init__(self, stub: pb_grpc.BrokerStub) -> None:
        self._requests: queue.Queue[pb.TransactUp | None] = queue.Queue()
        self._replies = stub.Transact(iter(self._requests.get, None))

    def send(self, up: pb.TransactUp) -> None:
        self._requests.put(up)

    def replies(self, count: int) -> dict[int, pb.TransactDown]:
        return {reply.call_id: reply for reply in (next(self._replies) for _ in range(count))}

    def close(self) -> None:
        self._requests.put(None)
        assert list(self._replies) == [], "nothing more is answered once the client is done"


def test_each_call_is_answered_by_its_id_with_each_item_s_outcome_and_a_refused_call_leaves_the_stream_open(broker):
    with grpc.insecure_channel(broker.address) as channel:
        stream = Stream(pb_grpc.BrokerStub(channel))
        items = [half("t-1"), half("t-2", topic="nope"), half("t-3", group="bad group"), half("t-4")]
        stream.send(pb.TransactUp(call_id=7, halves=pb.SendHalfMessagesRequest(items=items)))
        stream.send(pb.TransactUp(call_id=8, halves=pb.SendHalfMessagesRequest()))
        stream.send(pb.TransactUp(call_id=9))
        replies = stream.replies(3)
        assert sorted(replies) == [7, 8, 9]
        assert outcomes(replies[7]) == [("result", ""), ("error", "TOPIC_NOT_FOUND"),
                                        ("error", "INVALID_ARGUMENT"), ("result", "")]  # fmt: skip
        assert [(r.WhichOneof("reply"), r.error.code) for r in (replies[8], replies[9])] == [
            ("error", "INVALID_ARGUMENT"),
            ("error", "INVALID_ARGUMENT"),
        ]
        one, four = (o.result.transaction_id for o in replies[7].halves.outcomes if o.HasField("result"))

        ends = [end(one, pb.COMMIT), end(four, pb.ROLLBACK), end("0" * 32, pb.COMMIT), end(one, pb.COMMIT, "other")]
        stream.send(pb.TransactUp(call_id=10, ends=pb.EndTransactionsRequest(items=ends)))
        first = stream.replies(1)[10]
        before = store_snapshot(broker.broker.settings.data_dir)
        stream.send(pb.TransactUp(call_id=11, ends=pb.EndTransactionsRequest(items=ends)))  # the reply was "lost"
        again = stream.replies(1)[11]
        stream.close()
    assert outcomes(first) == [("result", ""), ("result", ""),
                               ("error", "TRANSACTION_NOT_FOUND"), ("error", "PRODUCER_GROUP_MISMATCH")]  # fmt: skip
    assert [o.result.already_resolved for o in again.ends.outcomes[:2]] == [True, True]
    assert store_snapshot(broker.broker.settings.data_dir) == before, "a repeated call changed nothing"
    assert [row[3] for row in topic_rows(broker.broker.settings.data_dir, "orders")] == [b"t-1"]


def test_calls_lost_with_their_stream_are_retried_and_each_transaction_is_stored_once(tmp_path):
    broker = BrokerThread(broker_settings(tmp_path / "data", test_controls=True))
    faults = broker.broker.controls.faults
    listener = ScriptedListener("COMMIT")

    async def run() -> list[str]:
        async with AsyncRocketMQTransactionProducer(group="g", broker=broker.address, listener=listener) as producer:
            faults.set(drop_end_transactions=3, lose_half_acks=3, delay_checks=0)
            sent = await asyncio.gather(
                *(producer.send_message_in_transaction(Message("orders", f"m-{i}".encode())) for i in range(40))
            )
        return [result.state.value if result.state else "UNKNOWN" for result in sent]

    try:
        assert asyncio.run(run()) == ["COMMITTED"] * 40
        assert (faults.drop_end_transactions, faults.lose_half_acks) == (0, 0), "both faults broke a stream"
        data = broker.broker.settings.data_dir
        bodies = sorted(row[3] for row in topic_rows(data, "orders"))
        assert bodies == sorted(f"m-{i}".encode() for i in range(40)), "every message once, none twice"
        assert len(half_log(data)) == 40, "a half whose acknowledgement was lost is stored once"
    finally:
        broker.stop()


def test_a_stream_runs_at_most_max_calls_at_once_and_reads_the_rest_as_they_finish(broker, monkeypatch):
    """While another process's transaction holds the store, no call can finish: the broker starts
    MAX_CALLS of a stream's calls and reads no further until they do."""
    service, started = broker.broker.transactions, []
    prepare_many = service.prepare_many

    async def counted(*args, **kwargs):
        started.append(args)
        return await prepare_many(*args, **kwargs)

    monkeypatch.setattr(service, "prepare_many", counted)
    calls = 3 * MAX_CALLS
    lock = sqlite3.connect(broker.broker.settings.data_dir / DB_FILE, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    with grpc.insecure_channel(broker.address) as channel:
        stream = Stream(pb_grpc.BrokerStub(channel))
        try:
            for i in range(calls):
                stream.send(pb.TransactUp(call_id=i, halves=pb.SendHalfMessagesRequest(items=[half(f"b-{i}")])))
            time.sleep(1)  # time for the broker to read all it will
            running = len(started)
        finally:
            lock.execute("ROLLBACK")
        replies = stream.replies(calls)
        stream.close()
    assert running == MAX_CALLS
    assert sorted(replies) == list(range(calls)), "the rest were read and answered once calls finished"
    assert [outcomes(reply) for reply in replies.values()] == [[("result", "")]] * calls


PRODUCER_THAT_EXITS = """
import sys
from producer_sdk import LocalTransactionState, Message, PullConsumer, TransactionListener, RocketMQTransactionProducer

class Commit(TransactionListener):
    def execute_local_transaction(self, msg, arg):
        return LocalTransactionState.COMMIT

    def check_local_transaction(self, msg):
        return LocalTransactionState.COMMIT

with RocketMQTransactionProducer(group="exits", broker=sys.argv[1], listener=Commit()) as producer:
    for n in range(3):
        producer.send_message_in_transaction(Message(topic="orders", body=b"x"))
with PullConsumer(group="exits", broker=sys.argv[1]) as consumer:
    consumer.pull("orders", queue_id=0, offset=0)
"""


async def cancel_streams(address: str) -> None:
    """Transact streams cancelled by their client: before any reply, after one, and while sending."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.BrokerStub(channel)
        calls = []
        for shape in range(12):
            call = stub.Transact()
            calls.append(call)
            items = [pb.SendHalfMessageRequest(message=pb.Message(topic="orders", body=b"x"), producer_group="g")]
            for call_id in range(20):
                await call.write(pb.TransactUp(call_id=call_id, halves=pb.SendHalfMessagesRequest(items=items * 5)))
            if shape % 3 == 1:
                await call.read()
            if shape % 3 != 2:
                call.cancel()
        await asyncio.sleep(0.05)
        for call in calls:
            call.cancel()
        await asyncio.sleep(0.5)


def test_clients_that_exit_or_cancel_their_streams_leave_no_noise_on_either_side(tmp_path):
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        for _ in range(8):
            ran = subprocess.run([sys.executable, "-c", PRODUCER_THAT_EXITS, broker.address], capture_output=True,
                                 text=True, timeout=60)  # fmt: skip
            assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
        asyncio.run(cancel_streams(broker.address))
        assert broker.terminate() == 0
    finally:
        broker.stop()
    logged = broker.log.read_text()
    assert "Traceback" not in logged and "Error" not in logged, logged[-3000:]
