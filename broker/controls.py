"""Test controls (``--test-controls``): a clock a test can move, faults it can inject, and a check
round on demand. Off by default; the production paths do not consult any of this, the broker is
only wired differently when it is on (the clock, the gRPC fault interceptor, the check loop).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from broker.delays import DelayService
from broker.store import Store
from broker.transaction.check import CheckService, RoundReport
from broker.transaction.registry import ProducerRegistry

POLL = 0.01  # seconds between looks at the checks still awaiting an answer


class ControlledClock:
    """The system clock plus an offset that only grows: ``advance`` moves broker time forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> float:
        self.offset += seconds
        return self()


@dataclass
class Faults:
    """What the next calls will suffer: ends lost before they are recorded, half messages
    stored whose acknowledgement is lost, sends of Kafka-model transactions lost before they are
    stored, commits of Kafka-model transactions stored before the broker is killed, and a wait
    before each check round delivers."""

    drop_end_transactions: int = 0
    lose_half_acks: int = 0
    drop_txn_sends: int = 0
    crash_in_commits: int = 0
    delay_checks: float = 0.0

    def set(self, **faults: float) -> None:
        """Replace every fault in place (the gRPC interceptor holds this object); those not given are cleared."""
        for name, default in vars(Faults()).items():
            setattr(self, name, faults.get(name, default))

    def take(self, kind: str, count: int) -> bool:
        """Whether a call carrying ``count`` items of ``kind`` (a count field above) is hit; a hit
        uses up that many of the faults left."""
        left: int = getattr(self, kind)
        if left <= 0:
            return False
        setattr(self, kind, max(0, left - count))
        return True


@dataclass(frozen=True)
class CheckNowReport:
    """A round run on demand, and how its delivered checks ended: answered or expired."""

    round: RoundReport
    answered: int
    unanswered: int


class TestControls:
    """The controls of one broker."""

    def __init__(
        self,
        clock: ControlledClock,
        store: Store,
        checks: CheckService,
        registry: ProducerRegistry,
        delays: DelayService,
    ) -> None:
        self.clock = clock
        self.faults = Faults()
        self._store = store
        self._checks = checks
        self._registry = registry
        self._delays = delays

    async def advance(self, seconds: float) -> float:
        """Move the clock ``seconds`` forward and deliver the delayed messages due by then, before
        returning: a test reads them at once. Returns the new time."""
        now = self.clock.advance(seconds)
        await self._delays.deliver_due()
        return now

    async def run_checks(self, interval: float) -> None:
        """The periodic check loop, each round after the injected delay."""
        await self._checks.run(interval, self._delayed_round)

    async def check_now(self, answer_timeout: float) -> CheckNowReport:
        """Run a round now, after the injected delay; return once each check it delivered was
        answered, and the answer committed, or ``answer_timeout`` seconds have passed."""
        report = await self._delayed_round()
        deadline = time.monotonic() + answer_timeout
        while any(map(self._registry.awaiting, report.delivered)) and time.monotonic() < deadline:
            await asyncio.sleep(POLL)
        unanswered = sum(map(self._registry.awaiting, report.delivered))
        await asyncio.sleep(0)  # answers just received start ending their transactions
        await self._store.barrier()
        return CheckNowReport(report, answered=report.checked - unanswered, unanswered=unanswered)

    async def _delayed_round(self) -> RoundReport:
        await asyncio.sleep(self.faults.delay_checks)
        return await self._checks.check_once()
