"""Which producer sessions are live, per producer group, and how well each answers its checks.

Checks go round-robin, per group, to the group's healthiest sessions: those with the fewest
*strikes* (checks that expired unanswered since the session last answered). A session that
lets a check expire is demoted while a healthier one exists; any answer, UNKNOWN included,
clears its strikes.

How an unanswered check counts (docs/architecture.md, guarantee 9): it counts against the message's
``check_max`` unless, when it expires, another live session of the group has no strikes. Then
the group still has a producer that may answer, and the check is refunded. So silent sessions
beside one honest producer never use up a budget (the honest one never gets a strike), while
with only silent sessions every one of them is demoted after one refund each, and from then on
every expired check counts: the message is discarded after ``check_max`` counted checks.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from broker.transaction.outbox import Check


class ProducerSession(Protocol):
    """A live connection to one producer, over whatever protocol the front end speaks."""

    @property
    def producer_group(self) -> str: ...

    @property
    def client_id(self) -> str: ...

    def offer(self, check: Check) -> asyncio.Future[None] | None:
        """Queue a check for this producer (see ``Outbox.offer``); None when it cannot take it."""


@dataclass
class _Sent:
    session: ProducerSession
    deadline_ms: int


class ProducerRegistry:
    """Live producer sessions by group, their health, and the checks awaiting their answers.

    Not thread-safe: used from the broker's event loop.
    """

    def __init__(self) -> None:
        self._sessions: dict[str, list[ProducerSession]] = {}
        self._strikes: dict[ProducerSession, int] = {}
        self._turns: defaultdict[str, Iterator[int]] = defaultdict(itertools.count)
        self._awaiting: dict[str, _Sent] = {}

    def register(self, session: ProducerSession) -> None:
        self._sessions.setdefault(session.producer_group, []).append(session)
        self._strikes[session] = 0

    def unregister(self, session: ProducerSession) -> None:
        sessions = self._sessions.get(session.producer_group, [])
        if session in sessions:
            sessions.remove(session)
        if not sessions:
            self._sessions.pop(session.producer_group, None)
        self._strikes.pop(session, None)

    def pick(self, producer_group: str) -> list[ProducerSession]:
        """The group's healthiest live sessions, the one whose turn it is first; empty if none."""
        sessions = self._sessions.get(producer_group)
        if not sessions:
            return []
        fewest = min(self._strikes[s] for s in sessions)
        healthiest = [s for s in sessions if self._strikes[s] == fewest]
        turn = next(self._turns[producer_group]) % len(healthiest)
        return healthiest[turn:] + healthiest[:turn]

    def sent(self, session: ProducerSession, transaction_id: str, deadline_ms: int) -> None:
        """A check of ``transaction_id`` went to ``session``; its answer is due by ``deadline_ms``."""
        self._awaiting[transaction_id] = _Sent(session, deadline_ms)

    def withdrawn(self, transaction_id: str) -> None:
        """The check of ``transaction_id`` was not delivered after all."""
        self._awaiting.pop(transaction_id, None)

    def answered(self, transaction_id: str) -> None:
        """A producer answered the check of ``transaction_id`` (on its session or by EndTransaction)."""
        sent = self._awaiting.pop(transaction_id, None)
        if sent is not None and sent.session in self._strikes:
            self._strikes[sent.session] = 0

    def awaiting(self, transaction_id: str) -> bool:
        """Whether a check of the transaction was sent and neither answered nor expired yet."""
        return transaction_id in self._awaiting

    def expire(self, now_ms: int) -> list[tuple[str, bool]]:
        """Strike the sessions whose checks went unanswered by ``now_ms``.

        Returns ``(transaction_id, counts)`` for each expired check: ``counts`` is False when
        the check is refunded because another live session of the group has no strikes.
        """
        expired = [(txid, sent) for txid, sent in self._awaiting.items() if sent.deadline_ms <= now_ms]
        outcomes = []
        for txid, sent in expired:
            del self._awaiting[txid]
            session = sent.session
            if session in self._strikes:
                self._strikes[session] += 1
            others = self._sessions.get(session.producer_group, [])
            refunded = any(self._strikes[s] == 0 for s in others if s is not session)
            outcomes.append((txid, not refunded))
        return outcomes

    def strikes(self, session: ProducerSession) -> int:
        """Checks the session let expire since it last answered (0 for an unknown session)."""
        return self._strikes.get(session, 0)

    def groups(self) -> list[str]:
        """Producer groups with at least one live session."""
        return list(self._sessions)

    def session_count(self) -> int:
        return sum(len(s) for s in self._sessions.values())

    def sessions(self, producer_group: str) -> list[ProducerSession]:
        return list(self._sessions.get(producer_group, []))
