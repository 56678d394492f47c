"""The check service: ask producers about half messages nobody has resolved (DESIGN section 2, step 4).

``decide`` is the pure rule for one transaction; ``CheckService.check_once(now)`` applies it to
every due pending transaction; ``CheckService.run`` is the thin periodic loop around it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from enum import Enum

from broker.clock import Clock, system_clock, to_ms
from broker.errors import ResolutionConflict
from broker.metrics import Metrics
from broker.model import Transaction
from broker.store import Store
from broker.transaction.registry import CheckRequest, ProducerRegistry
from broker.transaction.service import TransactionService

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckPolicy:
    """Check limits, in seconds: DESIGN section 2 defaults."""

    transaction_timeout: float = 6.0
    check_max: int = 5
    check_timeout: float = 3.0
    max_half_age: float = 72 * 3600.0
    max_in_flight: int = 64
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

    async def check_once(self, now: float | None = None) -> RoundReport:
        """Run one round at broker time ``now`` (seconds; the clock's time when omitted)."""
        now_ms = to_ms(self._clock() if now is None else now)
        due = self._store.pending(now_ms - to_ms(self._policy.transaction_timeout), self._policy.round_limit)
        counts = dict.fromkeys(Action, 0)
        to_check: list[Transaction] = []
        for txn in due:
            action = decide(txn, now_ms, self._policy, bool(self._registry.sessions(txn.producer_group)))
            counts[action] += 1
            if action is Action.CHECK:
                to_check.append(txn)
            elif action is Action.DISCARD:
                await self._discard(txn)
        gate = asyncio.Semaphore(self._policy.max_in_flight)
        delivered = await asyncio.gather(*(self._check(txn, now_ms, gate) for txn in to_check))
        return RoundReport(
            checked=sum(delivered),
            discarded=counts[Action.DISCARD],
            waiting=counts[Action.WAIT_ANSWER],
            orphaned=counts[Action.ORPHANED],
            undelivered=len(delivered) - sum(delivered),
        )

    async def run(self, interval: float) -> None:
        """Run a round every ``interval`` seconds until cancelled; a failed round is logged."""
        while True:
            try:
                report = await self.check_once()
                if report != RoundReport():
                    log.info("check round: %s", report)
            except Exception:  # keep checking: the next round retries whatever failed
                log.exception("check round failed")
            await asyncio.sleep(interval)

    async def _discard(self, txn: Transaction) -> None:
        try:
            await self._transactions.discard(txn.transaction_id)
            log.warning("discarded transaction %s after %d checks", txn.transaction_id, txn.check_times)
        except ResolutionConflict:
            pass  # resolved by its producer since the round read it: the first resolution wins

    async def _check(self, txn: Transaction, now_ms: int, gate: asyncio.Semaphore) -> bool:
        """Deliver one check to a live producer of the group; count it only once delivered."""
        async with gate:
            session = self._registry.pick(txn.producer_group)
            if session is None:
                return False
            request = CheckRequest(
                transaction_id=txn.transaction_id,
                producer_group=txn.producer_group,
                message=self._store.half_message(txn),
                check_times=txn.check_times + 1,
            )
            try:
                await session.deliver(request)
            except Exception as exc:  # any transport failure means "not delivered"
                log.info("check of %s not delivered to %s: %s", txn.transaction_id, session.client_id, exc)
                self._metrics.check("undelivered")
                return False
            self._metrics.check("delivered")
            await self._store.record_check(txn.transaction_id, now_ms, session.client_id)
            return True
