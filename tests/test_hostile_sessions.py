"""No producer session can stall or waste the checks (docs/architecture.md, guarantees 8 to 10).

Sessions that stop reading, or read and never answer, are real gRPC streams on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from broker.metrics import Metrics
from broker.model import Message as CoreMessage
from broker.model import TransactionState, queue_for
from broker.store import Flush, Store
from broker.transaction.check import CheckPolicy, CheckService
from broker.transaction.outbox import Check, CheckRequest, Outbox
from broker.transaction.registry import ProducerRegistry
from broker.transaction.service import TransactionService
from halfmq_proto.v1 import halfmq_pb2 as pb
from halfmq_proto.v1 import halfmq_pb2_grpc as pb_grpc
from producer_sdk import LocalTransactionState, Message, RocketMQTransactionProducer
from tests import support
from tests.support import BrokerThread, FakeClock, ScriptedListener, broker_settings, wait_until


class RawSessions:
    """Producer sessions that say hello, then either read checks and never answer ("silent")
    or never read again ("frozen"), on their own event loop thread."""

    def __init__(self, address: str, group: str, count: int, *, reading: bool) -> None:
        self.checks = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._channel: grpc.aio.Channel | None = None
        self._calls: list[grpc.aio.StreamStreamCall] = []
        self._tasks: list[asyncio.Task[None]] = []
        asyncio.run_coroutine_threadsafe(self._open(address, group, count, reading), self._loop).result(60)

    async def _open(self, address: str, group: str, count: int, reading: bool) -> None:
        self._channel = grpc.aio.insecure_channel(address)
        stub = pb_grpc.BrokerStub(self._channel)
        for n in range(count):
            call = stub.ProducerSession()
            await call.write(pb.SessionUp(hello=pb.Hello(producer_group=group, client_id=f"{group}-{n}")))
            await call.read()  # the welcome
            self._calls.append(call)
            if reading:
                self._tasks.append(asyncio.create_task(self._drain(call)))

    async def _drain(self, call: grpc.aio.StreamStreamCall) -> None:
        while (down := await call.read()) is not grpc.aio.EOF:
            self.checks += down.HasField("check")

    def close(self) -> None:
        async def close() -> None:
            for call in self._calls:
                call.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            assert self._channel is not None
            await self._channel.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()


@pytest.fixture
def raw_sessions() -> Iterator[list[RawSessions]]:
    opened: list[RawSessions] = []
    yield opened
    for sessions in opened:
        sessions.close()


def send_half(broker: BrokerThread, group: str, body: bytes, message_id: str, **fields: object) -> str:
    with grpc.insecure_channel(broker.address, options=[("grpc.max_send_message_length", 8 << 20)]) as channel:
        message = pb.Message(topic="orders", body=body, message_id=message_id, **fields)  # type: ignore[arg-type]
        return support.send_half(pb_grpc.BrokerStub(channel), message, group).transaction_id


def state_of(broker: BrokerThread, txid: str) -> TransactionState:
    return broker.broker.store.transaction(txid).state


def test_a_session_that_stops_reading_does_not_delay_another_groups_checks_beyond_one_round(
    broker, clock, raw_sessions
):
    raw_sessions.append(RawSessions(broker.address, "frozen", 1, reading=False))
    for n in range(30):
        send_half(broker, "frozen", bytes(1 << 20), f"big-{n}")
    listener = ScriptedListener(check="COMMIT")
    with RocketMQTransactionProducer(group="honest", broker=broker.address, listener=listener):
        honest = send_half(broker, "honest", b"small", "small-1")
        clock.advance(2)
        began = time.monotonic()
        report = broker.check_once()
        took = time.monotonic() - began
        wait_until(lambda: state_of(broker, honest) is TransactionState.COMMITTED)
    assert took < broker.broker.settings.check_timeout + 5, f"the round waited {took:.1f}s on a frozen session"
    assert report.undelivered > 0, "some of the frozen session's checks could not be written"
    wait_until(lambda: broker.broker.registry.sessions("frozen") == [])  # closed for not reading


@pytest.mark.parametrize("check_max", [5, 2])
def test_silent_sessions_beside_one_honest_producer_never_cause_a_discard(tmp_path, clock, raw_sessions, check_max):
    broker = BrokerThread(broker_settings(tmp_path / "data", check_max=check_max), clock)
    try:
        honest_producer_resolves_everything(broker, clock, raw_sessions)
    finally:
        broker.stop()


def honest_producer_resolves_everything(broker, clock, raw_sessions):
    silent = RawSessions(broker.address, "g", 200, reading=True)
    raw_sessions.append(silent)
    settings = broker.broker.settings
    listener = ScriptedListener(execute="UNKNOWN", check="COMMIT")
    with RocketMQTransactionProducer(group="g", broker=broker.address, listener=listener) as producer:
        results = [producer.send_message_in_transaction(Message(topic="orders", body=b"%d" % i)) for i in range(100)]
        assert {r.state.value for r in results if r.state} == {"PENDING"}
        for _ in range(settings.check_max + 3):
            clock.advance(settings.transaction_timeout + settings.check_timeout)
            broker.check_once()
            time.sleep(0.2)  # let the honest producer's answers land
    states = [state_of(broker, r.transaction_id) for r in results]
    assert states.count(TransactionState.COMMITTED) == 100, {s: states.count(s) for s in set(states)}
    assert silent.checks > 0, "the silent sessions were checked too"


def test_with_only_silent_sessions_a_message_is_discarded_after_check_max_counted_checks(broker, clock, raw_sessions):
    silent = RawSessions(broker.address, "g", 3, reading=True)
    raw_sessions.append(silent)
    settings = broker.broker.settings
    txid = send_half(broker, "g", b"lost", "lost-1")
    for _ in range(settings.check_max + 6):
        clock.advance(settings.transaction_timeout + settings.check_timeout)
        broker.check_once()
        if state_of(broker, txid) is TransactionState.DISCARDED:
            break
    assert state_of(broker, txid) is TransactionState.DISCARDED
    assert broker.broker.store.transaction(txid).check_times == settings.check_max
    # Each silent session but the last was refunded one check before all were demoted.
    assert silent.checks == settings.check_max + 2


def test_checks_rotate_over_the_sessions_of_each_group_separately(broker, clock):
    listeners = {name: ScriptedListener(check="UNKNOWN") for name in ("a1", "a2", "b1", "b2")}
    producers = [
        RocketMQTransactionProducer(group=name[0], broker=broker.address, listener=listeners[name])
        for name in listeners
    ]
    try:
        for n in range(4):  # the groups' messages alternate in the scan
            send_half(broker, "a", b"a%d" % n, f"a-{n}")
            send_half(broker, "b", b"b%d" % n, f"b-{n}")
        clock.advance(2)
        assert broker.check_once().checked == 8
        wait_until(lambda: sum(len(x.checked) for x in listeners.values()) == 8)
    finally:
        for producer in producers:
            producer.close()
    assert [len(listeners[name].checked) for name in ("a1", "a2", "b1", "b2")] == [2, 2, 2, 2]


def test_the_check_listener_sees_the_real_topic_queue_and_only_user_properties(broker, clock):
    seen = []

    class Recording(ScriptedListener):
        def check_local_transaction(self, msg):
            seen.append(msg)
            return LocalTransactionState.COMMIT

    with RocketMQTransactionProducer(
        group="g", broker=broker.address, listener=Recording(execute="UNKNOWN")
    ) as producer:
        message = Message(topic="orders", body=b"o", keys=["o-1"], tags="created", properties={"region": "eu"})
        result = producer.send_message_in_transaction(message)
        clock.advance(2)
        broker.check_once()
        wait_until(lambda: len(seen) == 1)
    (checked,) = seen
    assert (checked.topic, checked.queue_id) == ("orders", queue_for(result.message_id, 4))
    assert dict(checked.properties) == {"region": "eu"}
    assert (list(checked.keys), checked.tags, checked.body) == (["o-1"], "created", b"o")


def test_a_session_that_never_says_hello_is_closed(broker):
    with grpc.insecure_channel(broker.address) as channel:
        call = pb_grpc.BrokerStub(channel).ProducerSession(iter(lambda: time.sleep(30), 0), timeout=30)
        with pytest.raises(grpc.RpcError) as refused:
            next(call)
    assert refused.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert "hello" in refused.value.details()


class InboxSession:
    """A live session of ``group`` whose checks are written to a list."""

    def __init__(self, group: str) -> None:
        self.producer_group = group
        self.client_id = f"{group}-inbox"
        self.inbox: list[str] = []
        self.outbox = Outbox(self._write, write_timeout=1, on_stuck=lambda: None)

    def offer(self, check: Check) -> asyncio.Future[None] | None:
        return self.outbox.offer(check)

    async def _write(self, request: CheckRequest) -> None:
        self.inbox.append(request.transaction_id)


def test_no_groups_backlog_orphaned_or_live_starves_another_groups_checks(tmp_path):
    async def scenario() -> tuple[list[str], list[str], str]:
        clock = FakeClock()
        store = Store(tmp_path, flush=Flush.ASYNC)
        metrics = Metrics()
        service = TransactionService(store, max_body_bytes=1024, metrics=metrics, clock=clock)
        registry = ProducerRegistry()
        policy = CheckPolicy(transaction_timeout=1, round_limit=10)
        checks = CheckService(store, service, registry, policy, metrics=metrics, clock=clock)
        await store.create_topic("orders", 1)
        for group in ("gone", "busy", "g"):  # the oldest rows belong to a group with no producer online
            for n in range(50 if group != "g" else 1):
                txn = await service.prepare(CoreMessage(topic="orders", body=b"x", message_id=f"{group}-{n}"), group)
                clock.advance(0.001)
        busy, g = InboxSession("busy"), InboxSession("g")
        writers = [asyncio.create_task(s.outbox.run()) for s in (busy, g)]
        for session in (busy, g):
            registry.register(session)
        clock.advance(2)
        report = await checks.check_once()
        for writer in writers:
            writer.cancel()
        store.close()
        assert report.orphaned == 50
        return busy.inbox, g.inbox, txn.transaction_id

    busy_checked, g_checked, g_txid = asyncio.run(scenario())
    assert g_checked == [g_txid]
    assert 0 < len(busy_checked) <= 10


PARKED_PRODUCER = """
import sys, time
from producer_sdk import LocalTransactionState, TransactionListener, RocketMQTransactionProducer
class Unknown(TransactionListener):
    def execute_local_transaction(self, msg, arg): return LocalTransactionState.UNKNOWN
    def check_local_transaction(self, msg): return LocalTransactionState.UNKNOWN
with RocketMQTransactionProducer(group="parked", broker=sys.argv[1], listener=Unknown()):
    print("CONNECTED", flush=True)
    time.sleep(600)
"""


@pytest.mark.slow
def test_keepalive_drops_the_session_of_a_frozen_producer_process(broker):
    producer = subprocess.Popen(
        [sys.executable, "-c", PARKED_PRODUCER, broker.address], stdout=subprocess.PIPE, text=True
    )
    try:
        assert producer.stdout is not None and producer.stdout.readline().strip() == "CONNECTED"
        wait_until(lambda: len(broker.broker.registry.sessions("parked")) == 1)
        producer.send_signal(signal.SIGSTOP)  # its process can no longer answer anything, pings included
        wait_until(lambda: broker.broker.registry.sessions("parked") == [], timeout=45)
    finally:
        producer.kill()
        producer.wait()
