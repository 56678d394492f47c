"""The check service: ask producers about half messages nobody has resolved (docs/architecture.md,
the transaction flow, step 4).

``decide`` is the pure rule for one transaction; ``CheckService.check_once(now)`` applies it to
every due pending transaction; ``CheckService.run`` is the thin periodic loop around it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum

from broker.clock import Clock, system_clock, to_ms
from broker.errors import ResolutionConflict
from broker.metrics import Metrics
from broker.model import Transaction, check_view
from broker.store import Store
from broker.transaction.outbox import OUTBOX_CAPACITY, Check, CheckRequest
from broker.transaction.registry import ProducerRegistry, ProducerSession
from broker.transaction.service import TransactionService

log = logging.getLogger(__name__)
_YIELD_EVERY = 500


@dataclass(frozen=True)
class CheckPolicy:
    """Check limits, in seconds: the defaults of docs/architecture.md, the transaction flow."""

    transaction_timeout: float = 6.0
    check_max: int = 5
    check_timeout: float = 3.0
    max_half_age: float = 72 * 3600.0
    round_limit: int = 100_000


class Action(Enum):
    CHECK = "check"
    DISCARD = "discard"
    WAIT_ANSWER = "wait-answer"
    ORPHANED = "orphaned"


def decide(txn: Transaction, now_ms: int, policy: CheckPolicy, producer_online: bool) -> Action:
    """What one round does with one pending transaction whose half is older than the timeout."""
    if now_ms - txn.half_stored_at >= to_ms(policy.max_half_age):
        return Action.DISCARD
    if txn.last_check_at is not None and now_ms - txn.last_check_at < to_ms(policy.check_timeout):
        return Action.WAIT_ANSWER
    if txn.check_times >= policy.check_max:
        return Action.DISCARD
    return Action.CHECK if producer_online else Action.ORPHANED


@dataclass(frozen=True)
class RoundReport:
    """What one round did: counts of pending transactions by what happened to them."""

    checked: int = 0
    discarded: int = 0
    waiting: int = 0
    orphaned: int = 0
    undelivered: int = 0
    # The transactions checked, for a caller that awaits their answers; left out of the logged report.
    delivered: tuple[str, ...] = field(default=(), repr=False)


class CheckService:
    """Runs check rounds over the store's pending transactions."""

    def __init__(
        self,
        store: Store,
        transactions: TransactionService,
        registry: ProducerRegistry,
        policy: CheckPolicy,
        *,
        metrics: Metrics,
        clock: Clock = system_clock,
    ) -> None:
        self._store = store
        self._transactions = transactions
        self._registry = registry
        self._policy = policy
        self._metrics = metrics
        self._clock = clock
        self._one_round = asyncio.Lock()

    async def check_once(self, now: float | None = None) -> RoundReport:
        """Run one round at broker time ``now`` (seconds; the clock's time when omitted).

        The round waits at most ``check_timeout`` for its checks to be written, whatever the
        sessions do: a check that is not written by then is undelivered and not counted. Rounds
        run one at a time (the periodic loop's and one asked for now), so none checks a
        transaction that another is checking.
        """
        async with self._one_round:
            return await self._round(to_ms(self._clock() if now is None else now))

    async def _round(self, now_ms: int) -> RoundReport:
        await self._settle_expired(now_ms)
        live = self._registry.groups()  # one view for the round, so its report counts each row once
        due = await self._due(now_ms, live)
        orphaned, waiting = await self._untouched(now_ms, due, live)
        counts = dict.fromkeys(Action, 0)
        sent: dict[asyncio.Future[None], tuple[Transaction, ProducerSession]] = {}
        discards: list[Transaction] = []
        full: set[str] = set()  # groups whose healthiest sessions can take no more checks this round
        undelivered = 0
        for n, txn in enumerate(due):
            if n % _YIELD_EVERY == 0:
                await asyncio.sleep(0)  # a round of 100,000 must not hold the event loop
            action = decide(txn, now_ms, self._policy, bool(self._registry.sessions(txn.producer_group)))
            counts[action] += 1
            if action is Action.DISCARD:
                discards.append(txn)
            elif action is Action.CHECK:
                offered = None if txn.producer_group in full else self._offer(txn, now_ms)
                if offered is None:
                    full.add(txn.producer_group)
                    undelivered += 1
                else:
                    sent[offered[0]] = (txn, offered[1])
        for start in range(0, len(discards), _YIELD_EVERY):  # concurrently: the writer commits them in groups
            await asyncio.gather(*(self._discard(txn) for txn in discards[start : start + _YIELD_EVERY]))
        delivered: list[tuple[str, str]] = []
        if sent:
            await asyncio.wait(sent, timeout=self._policy.check_timeout)
        for future, (txn, session) in sent.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                delivered.append((txn.transaction_id, session.client_id))
            else:
                future.cancel()
                self._registry.withdrawn(txn.transaction_id)
                undelivered += 1
        if delivered:
            await self._store.record_checks(delivered, now_ms)
        self._metrics.check("delivered", len(delivered))
        self._metrics.check("undelivered", undelivered)
        return RoundReport(
            checked=len(delivered),
            discarded=counts[Action.DISCARD],
            waiting=counts[Action.WAIT_ANSWER] + waiting,
            orphaned=counts[Action.ORPHANED] + orphaned,
            undelivered=undelivered,
            delivered=tuple(transaction_id for transaction_id, _ in delivered),
        )

    async def run(self, interval: float, check_round: Callable[[], Awaitable[RoundReport]] | None = None) -> None:
        """Run a round (``check_once``, or ``check_round`` in its place) every ``interval`` seconds until
        cancelled; a failed round is logged."""
        while True:
            try:
                began = time.monotonic()
                report = await (check_round or self.check_once)()
                if report != RoundReport():
                    log.info("check round took %.2fs: %s", time.monotonic() - began, report)
            except Exception:  # keep checking: the next round retries whatever failed
                log.exception("check round failed")
            await asyncio.sleep(interval)

    async def _settle_expired(self, now_ms: int) -> None:
        """Checks whose answer is overdue: strike their sessions, refund those that must not count."""
        expired = self._registry.expire(now_ms)
        refunds = [txid for txid, counts in expired if not counts]
        self._metrics.check("expired", len(expired))
        self._metrics.check("refunded", len(refunds))
        if refunds:
            await self._store.refund_checks(refunds)

    async def _due(self, now_ms: int, groups: list[str]) -> list[Transaction]:
        """The round's work, fairly shared and bounded: every live group gets an equal share of
        ``round_limit`` (at most what its sessions' outboxes can take) of its oldest rows that
        are due and not awaiting an answer, and rows past ``max_half_age`` of any group (orphaned
        ones included) are read apart, so no group's backlog starves another's."""
        before = now_ms - to_ms(self._policy.transaction_timeout)
        answered_before = now_ms - to_ms(self._policy.check_timeout)
        share = max(1, self._policy.round_limit // max(1, len(groups)))
        due: dict[str, Transaction] = {}
        for group in groups:
            room = len(self._registry.sessions(group)) * OUTBOX_CAPACITY
            for txn in await self._store.query(
                self._store.pending, before, min(share, room), group, checked_before_ms=answered_before
            ):
                due[txn.transaction_id] = txn
        aged = now_ms - to_ms(self._policy.max_half_age) + 1
        for txn in await self._store.query(self._store.pending, aged, self._policy.round_limit):
            due.setdefault(txn.transaction_id, txn)
        return list(due.values())

    async def _untouched(self, now_ms: int, due: list[Transaction], groups: list[str]) -> tuple[int, int]:
        """For the report, due rows the round did not read: (orphaned, waiting for an answer)."""
        per_group = await self._store.query(
            self._store.pending_counts,
            now_ms - to_ms(self._policy.transaction_timeout),
            now_ms - to_ms(self._policy.check_timeout),
        )
        live = set(groups)
        seen = sum(1 for txn in due if txn.producer_group not in live)
        orphaned = sum(total for group, (total, _) in per_group.items() if group not in live) - seen
        return orphaned, sum(waiting for group, (_, waiting) in per_group.items() if group in live)

    def _offer(self, txn: Transaction, now_ms: int) -> tuple[asyncio.Future[None], ProducerSession] | None:
        """Queue a check with the first of the group's healthiest sessions that has room."""

        async def load() -> CheckRequest:
            half = await self._store.query(self._store.half_message, txn)
            return CheckRequest(
                transaction_id=txn.transaction_id,
                producer_group=txn.producer_group,
                message=check_view(half),
                check_times=txn.check_times + 1,
            )

        for session in self._registry.pick(txn.producer_group):
            # Registered before the write, so that an answer quicker than the round still finds it.
            self._registry.sent(session, txn.transaction_id, now_ms + to_ms(self._policy.check_timeout))
            future = session.offer(Check(txn, load))
            if future is not None:
                return future, session
            self._registry.withdrawn(txn.transaction_id)
        return None

    async def _discard(self, txn: Transaction) -> None:
        try:
            await self._transactions.discard(txn.transaction_id)
            log.warning("discarded transaction %s after %d checks", txn.transaction_id, txn.check_times)
        except ResolutionConflict:
            pass  # resolved by its producer since the round read it: the first resolution wins
