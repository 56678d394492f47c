"""The clients connected now, whatever protocol they speak: each front end reports a client's
producer and consumer groups while its connection (or session) lasts, and protocols that keep
their own membership (Kafka's consumer groups) are read from it when listed, and told when a
group or a topic is deleted. The admin API, the dashboard and ``halfmq clients`` show the list."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

PRODUCER, CONSUMER = "producer", "consumer"


@dataclass(frozen=True, order=True)
class Client:
    protocol: str  # the port's name: grpc, rocketmq, remoting, kafka
    group: str
    role: str  # PRODUCER or CONSUMER
    client_id: str
    address: str  # host:port the client connects from


class Membership(Protocol):
    """A front end that keeps groups' state of its own, beside the store."""

    def clients(self) -> Iterable[Client]:
        """Its live members, read at each listing."""
        ...

    def readers(self, group: str, topic: str) -> Iterable[Client]:
        """Its live members of ``group`` that consume ``topic``: all of them where it cannot tell."""
        ...

    def forget_group(self, group: str) -> bool:
        """Drop what it keeps of a deleted group (which has no live member); whether it knew the
        group itself (not only some state of it)."""
        ...

    def forget_topic(self, topic: str) -> None:
        """Drop what it keeps of a deleted topic."""
        ...


class Clients:
    """Not thread-safe: used from the broker's event loop."""

    def __init__(self) -> None:
        self._live: Counter[Client] = Counter()  # a client may hold more than one connection
        self._memberships: list[Membership] = []

    def joined(self, client: Client) -> None:
        self._live[client] += 1

    def left(self, client: Client) -> None:
        self._live[client] -= 1
        if self._live[client] <= 0:
            del self._live[client]

    def add_membership(self, membership: Membership) -> None:
        self._memberships.append(membership)

    def listed(self) -> list[Client]:
        """Every client, by protocol, group, role and id."""
        return sorted({*self._live, *(c for membership in self._memberships for c in membership.clients())})

    def readers(self, group: str, topic: str) -> list[Client]:
        """The live consumers of ``group`` that consume ``topic``: a client of a protocol that
        does not say which topics it consumes counts for every topic."""
        unknown = [c for c in self._live if c.group == group and c.role == CONSUMER]
        return sorted({*unknown, *(c for membership in self._memberships for c in membership.readers(group, topic))})

    def forget_group(self, group: str) -> bool:
        """Every membership told that ``group`` is deleted; whether any knew the group."""
        return any([membership.forget_group(group) for membership in self._memberships])

    def forget_topic(self, topic: str) -> None:
        for membership in self._memberships:
            membership.forget_topic(topic)
