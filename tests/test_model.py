"""Model-based test: random interleavings of sends, ends, check rounds, check answers, producers
coming and going and broker restarts, against a reference model of what must be readable."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.errors import ResolutionConflict
from broker.metrics import Metrics
from broker.model import DISCARD_TOPIC, Message, Resolution, Source, TransactionState
from broker.store import Flush, Store
from broker.transaction.check import CheckPolicy, CheckService
from broker.transaction.outbox import Check, CheckRequest, Outbox
from broker.transaction.registry import ProducerRegistry
from broker.transaction.service import TransactionService
from tests.support import FakeClock, topic_rows

POLICY = CheckPolicy(transaction_timeout=6, check_max=3, check_timeout=3, max_half_age=300)
RESOLVED = {Resolution.COMMIT: TransactionState.COMMITTED, Resolution.ROLLBACK: TransactionState.ROLLED_BACK}


class InboxSession:
    """A producer session whose delivered checks wait in an inbox until the test answers them."""

    def __init__(self, name: str, loop: asyncio.AbstractEventLoop) -> None:
        self.producer_group = "g"
        self.client_id = name
        self.inbox: list[CheckRequest] = []
        self.outbox = Outbox(self._write, write_timeout=POLICY.check_timeout, on_stuck=lambda: None)
        self.writer = loop.create_task(self.outbox.run())

    def offer(self, check: Check) -> asyncio.Future[None] | None:
        return self.outbox.offer(check)

    async def _write(self, request: CheckRequest) -> None:
        self.inbox.append(request)


@dataclass
class Expected:
    intent: Resolution
    stored_at: float
    state: TransactionState = TransactionState.PENDING
    checks: int = 0
    message_id: str = ""
    transaction_id: str = ""
    checks_after_resolution: int = 0


class TransactionsModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="halfmq-model-"))
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.sessions = [InboxSession("p0", self.loop), InboxSession("p1", self.loop)]
        self.online = [True, False]
        self.txns: list[Expected] = []
        self.open()
        self.run(self.store.create_topic("orders", 2))

    def open(self) -> None:
        self.store = Store(self.dir, flush=Flush.ASYNC)
        self.registry = ProducerRegistry()
        for session, online in zip(self.sessions, self.online, strict=True):
            session.inbox.clear()
            if online:
                self.registry.register(session)
        metrics = Metrics()
        self.service = TransactionService(self.store, max_body_bytes=1024, metrics=metrics, clock=self.clock)
        self.checks = CheckService(self.store, self.service, self.registry, POLICY, metrics=metrics, clock=self.clock)

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        for session in self.sessions:
            session.writer.cancel()
        self.loop.run_until_complete(asyncio.gather(*(s.writer for s in self.sessions), return_exceptions=True))
        self.store.close()
        self.loop.close()
        shutil.rmtree(self.dir)

    @rule(intent=st.sampled_from([Resolution.COMMIT, Resolution.ROLLBACK]))
    def send(self, intent: Resolution) -> None:
        message_id = f"m-{len(self.txns)}"
        txn = self.run(
            self.service.prepare(Message(topic="orders", body=message_id.encode(), message_id=message_id), "g")
        )
        self.txns.append(Expected(intent, self.clock.now, message_id=message_id, transaction_id=txn.transaction_id))

    @rule(intents=st.lists(st.sampled_from([Resolution.COMMIT, Resolution.ROLLBACK]), min_size=1, max_size=4),
          retried=st.integers(0, 3))  # fmt: skip
    def send_a_batch(self, intents: list[Resolution], retried: int) -> None:
        """Half messages in one batch, the last repeating an earlier id (a retry inside the batch)."""
        ids = [f"m-{len(self.txns) + n}" for n in range(len(intents))]
        items = [(Message(topic="orders", body=i.encode(), message_id=i), "g") for i in ids]
        items.append(items[min(retried, len(items) - 1)])
        txns = self.run(self.service.prepare_many(items))
        assert txns[-1].transaction_id == txns[min(retried, len(ids) - 1)].transaction_id
        for intent, message_id, txn in zip(intents, ids, txns, strict=False):
            self.txns.append(Expected(intent, self.clock.now, message_id=message_id, transaction_id=txn.transaction_id))

    @precondition(lambda self: self.txns)
    @rule(data=st.data(), says_unknown=st.booleans())
    def end_a_batch(self, data: st.DataObject, says_unknown: bool) -> None:
        """Ends in one batch, a transaction possibly twice; outcomes are checked item by item."""
        chosen = data.draw(st.lists(st.sampled_from(self.txns), min_size=1, max_size=4))
        resolutions = [Resolution.UNKNOWN if says_unknown else e.intent for e in chosen]
        results = self.run(self.service.end_many([(e.transaction_id, "g", r, Source.CLIENT)
                                                   for e, r in zip(chosen, resolutions, strict=True)]))  # fmt: skip
        for expected, resolution, result in zip(chosen, resolutions, results, strict=True):
            if isinstance(result, ResolutionConflict):
                assert expected.state is TransactionState.DISCARDED
                continue
            if resolution is not Resolution.UNKNOWN and expected.state is TransactionState.PENDING:
                assert not result.already_resolved
                expected.state = RESOLVED[resolution]
            assert result.state is expected.state

    @precondition(lambda self: self.txns)
    @rule(data=st.data())
    def retry_send(self, data: st.DataObject) -> None:
        expected = data.draw(st.sampled_from(self.txns))
        message = Message(topic="orders", body=expected.message_id.encode(), message_id=expected.message_id)
        assert self.run(self.service.prepare(message, "g")).transaction_id == expected.transaction_id

    @precondition(lambda self: self.txns)
    @rule(data=st.data(), says_unknown=st.booleans(), source=st.sampled_from(Source))
    def end(self, data: st.DataObject, says_unknown: bool, source: Source) -> None:
        expected = data.draw(st.sampled_from(self.txns))
        self._end(expected, Resolution.UNKNOWN if says_unknown else expected.intent, source)

    @precondition(lambda self: self.txns)
    @rule(data=st.data())
    def rogue_end_with_the_opposite_resolution(self, data: st.DataObject) -> None:
        expected = data.draw(st.sampled_from(self.txns))
        opposite = Resolution.ROLLBACK if expected.intent is Resolution.COMMIT else Resolution.COMMIT
        if expected.state is TransactionState.PENDING:
            return  # only a second, conflicting resolution is under test here
        try:
            self.run(self.service.end(expected.transaction_id, "g", opposite, Source.CLIENT))
        except ResolutionConflict as exc:
            assert expected.state.value in str(exc)
        else:
            raise AssertionError("a conflicting resolution was accepted")

    def _end(self, expected: Expected, resolution: Resolution, source: Source) -> None:
        try:
            result = self.run(self.service.end(expected.transaction_id, "g", resolution, source))
        except ResolutionConflict:
            assert expected.state is TransactionState.DISCARDED
            return
        if resolution is Resolution.UNKNOWN:
            assert result.state is expected.state
            return
        assert result.already_resolved == (expected.state is not TransactionState.PENDING)
        if expected.state is TransactionState.PENDING:
            expected.state = RESOLVED[resolution]
        assert result.state is expected.state

    @rule(seconds=st.sampled_from([0.5, 2, 4, 7, 40, 120]))
    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def check_round(self) -> None:
        before = {s.client_id: len(s.inbox) for s in self.sessions}
        self.run(self.checks.check_once())
        by_id = {t.transaction_id: t for t in self.txns}
        for session in self.sessions:
            for request in session.inbox[before[session.client_id] :]:
                expected = by_id[request.transaction_id]
                expected.checks += 1
                if expected.state is not TransactionState.PENDING:
                    expected.checks_after_resolution += 1
                assert self.clock.now - expected.stored_at >= POLICY.transaction_timeout
        for expected in self.txns:
            stored = self.store.transaction(expected.transaction_id)
            if stored.state is TransactionState.DISCARDED and expected.state is TransactionState.PENDING:
                aged = self.clock.now - expected.stored_at >= POLICY.max_half_age
                assert aged or expected.checks >= POLICY.check_max, "discarded before its check budget was spent"
                expected.state = TransactionState.DISCARDED

    @rule(data=st.data(), says_unknown=st.booleans())
    def answer_a_check(self, data: st.DataObject, says_unknown: bool) -> None:
        waiting = [(s, i) for s in self.sessions for i in range(len(s.inbox))]
        if not waiting:
            return
        session, index = data.draw(st.sampled_from(waiting))
        request = session.inbox.pop(index)
        expected = next(t for t in self.txns if t.transaction_id == request.transaction_id)
        self.registry.answered(request.transaction_id)
        self._end(expected, Resolution.UNKNOWN if says_unknown else expected.intent, Source.CHECK)

    @rule(which=st.integers(0, 1))
    def toggle_producer(self, which: int) -> None:
        session = self.sessions[which]
        if self.online[which]:
            self.registry.unregister(session)
            session.inbox.clear()
        else:
            self.registry.register(session)
        self.online[which] = not self.online[which]

    @rule()
    def restart_broker(self) -> None:
        self.store.close()
        self.open()

    @invariant()
    def real_topic_holds_exactly_the_committed_messages_once(self) -> None:
        readable = [m.message_id for q in range(2) for m in self.store.read("orders", q, 0, 10_000, 1 << 30)]
        committed = [t.message_id for t in self.txns if t.state is TransactionState.COMMITTED]
        assert sorted(readable) == sorted(committed)

    @invariant()
    def discarded_messages_are_kept_aside_and_states_match(self) -> None:
        discarded = {r[0] for r in topic_rows(self.dir, DISCARD_TOPIC)}
        assert discarded == {t.message_id for t in self.txns if t.state is TransactionState.DISCARDED}
        for expected in self.txns:
            assert self.store.transaction(expected.transaction_id).state is expected.state
            assert expected.checks_after_resolution == 0
            # Deliveries may exceed the budget: an unanswered check is refunded while the other session is healthy.
            assert self.store.transaction(expected.transaction_id).check_times <= POLICY.check_max


TransactionsModel.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_transactions_match_the_reference_model = TransactionsModel.TestCase
