"""The clients connected now, whatever protocol they speak: each front end reports a client's
producer and consumer groups while its connection (or session) lasts, and protocols that keep
their own membership (Kafka's consumer groups) are read from it when listed. The admin API, the
dashboard and ``halfmq clients`` show the list."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

PRODUCER, CONSUMER = "producer", "consumer"


@dataclass(frozen=True, order=True)
class Client:
    protocol: str  # the port's name: grpc, rocketmq, remoting, kafka
    group: str
    role: str  # PRODUCER or CONSUMER
    client_id: str
    address: str  # host:port the client connects from


class Clients:
    """Not thread-safe: used from the broker's event loop."""

    def __init__(self) -> None:
        self._live: Counter[Client] = Counter()  # a client may hold more than one connection
        self._sources: list[Callable[[], Iterable[Client]]] = []

    def joined(self, client: Client) -> None:
        self._live[client] += 1

    def left(self, client: Client) -> None:
        self._live[client] -= 1
        if self._live[client] <= 0:
            del self._live[client]

    def add_source(self, source: Callable[[], Iterable[Client]]) -> None:
        """A front end that keeps its own membership, read at each listing."""
        self._sources.append(source)

    def listed(self) -> list[Client]:
        """Every client, by protocol, group, role and id."""
        return sorted({*self._live, *(c for source in self._sources for c in source())})
