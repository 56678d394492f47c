"""Orderly consumers' queue locks, as RocketMQ's broker keeps them (``RebalanceLockManager``):
a consumer of a group locks the queues it was given before it reads them, one client per queue,
and a lock it does not renew expires after a minute, so a queue left by a crashed consumer
passes to another."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

LOCK_LIFETIME = 60.0  # seconds: rocketmq.broker.rebalance.lockMaxLiveTime

Queue = tuple[str, int]  # topic, queue id


@dataclass
class _Lock:
    client_id: str
    renewed: float


class QueueLocks:
    def __init__(self) -> None:
        self._groups: dict[str, dict[Queue, _Lock]] = {}

    def lock(self, group: str, client_id: str, queues: Iterable[Queue], now: float) -> list[Queue]:
        """Lock for ``client_id`` each queue that is free, expired or already its own (renewing
        those); return the queues it now holds."""
        locks = self._groups.setdefault(group, {})
        held = []
        for queue in queues:
            current = locks.get(queue)
            if current is None or current.client_id == client_id or now - current.renewed > LOCK_LIFETIME:
                locks[queue] = _Lock(client_id, now)
                held.append(queue)
        return held

    def unlock(self, group: str, client_id: str, queues: Iterable[Queue]) -> None:
        """Release those of ``queues`` that ``client_id`` holds."""
        locks = self._groups.get(group, {})
        for queue in queues:
            if queue in locks and locks[queue].client_id == client_id:
                del locks[queue]
        if not locks:
            self._groups.pop(group, None)

    def any_live(self, group: str, now: float) -> bool:
        """Whether a consumer of ``group`` holds a lock that has not expired: the group consumes
        in order."""
        return any(now - lock.renewed <= LOCK_LIFETIME for lock in self._groups.get(group, {}).values())
