"""Which producer sessions are live, per producer group; checks go to them round-robin."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Protocol

from broker.model import StoredMessage


@dataclass(frozen=True)
class CheckRequest:
    """Ask a producer for the state of its local transaction."""

    transaction_id: str
    producer_group: str
    message: StoredMessage
    check_times: int


class ProducerSession(Protocol):
    """A live connection to one producer, over whatever protocol the front end speaks."""

    @property
    def producer_group(self) -> str: ...

    @property
    def client_id(self) -> str: ...

    async def deliver(self, request: CheckRequest) -> None:
        """Hand the request to the producer's connection; raise if it cannot be delivered."""


class ProducerRegistry:
    """Live producer sessions by group. Not thread-safe: used from the broker's event loop."""

    def __init__(self) -> None:
        self._sessions: dict[str, list[ProducerSession]] = {}
        self._turns = itertools.count()

    def register(self, session: ProducerSession) -> None:
        self._sessions.setdefault(session.producer_group, []).append(session)

    def unregister(self, session: ProducerSession) -> None:
        sessions = self._sessions.get(session.producer_group, [])
        if session in sessions:
            sessions.remove(session)
        if not sessions:
            self._sessions.pop(session.producer_group, None)

    def pick(self, producer_group: str) -> ProducerSession | None:
        """Return the next live session of the group in turn, or None if none is live."""
        sessions = self._sessions.get(producer_group)
        if not sessions:
            return None
        return sessions[next(self._turns) % len(sessions)]

    def session_count(self) -> int:
        return sum(len(s) for s in self._sessions.values())

    def sessions(self, producer_group: str) -> list[ProducerSession]:
        return list(self._sessions.get(producer_group, []))
