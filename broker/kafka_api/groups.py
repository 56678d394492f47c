"""Kafka consumer groups' membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, as Kafka's
group coordinator runs them. Membership lives in memory (a restarted broker makes every member
join again, as a coordinator moving would); the groups' committed offsets are in the store.

A join while the group is stable starts a rebalance: each member learns of it from its next
heartbeat and joins again; the round ends when every member has, or at the longest rebalance
timeout, without those that did not. The leader (the first to join) gets every member's
subscription and sends the assignment in its SyncGroup, which every member then gets.

A new group's first round waits ``initial_delay`` for more members, and as long again after each
one that joins, within the longest rebalance timeout: Kafka's ``group.initial.rebalance.delay.ms``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from enum import Enum

from kafka.errors import (
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from broker.clients import CONSUMER, Client

SWEEP_INTERVAL = 0.25  # seconds between looks for members past their session timeout


class State(Enum):
    EMPTY = "Empty"
    JOINING = "PreparingRebalance"
    SYNCING = "CompletingRebalance"
    STABLE = "Stable"


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    protocol_type: str
    protocols: dict[str, bytes]
    session_timeout: float
    rebalance_timeout: float
    seen: float
    assignment: bytes = b""
    joined: asyncio.Future[Joined] | None = None
    synced: asyncio.Future[bytes] | None = None


@dataclass(frozen=True)
class Joined:
    generation: int
    protocol: str
    leader: str
    member_id: str
    members: list[tuple[str, bytes]]  # the leader's only: every member's metadata


@dataclass
class Group:
    name: str
    state: State = State.EMPTY
    generation: int = 0
    protocol_type: str = ""
    protocol: str = ""
    leader: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    deadline: asyncio.TimerHandle | None = None
    delay_left: float | None = None  # while a new group's first round waits: how much more it may


@dataclass(frozen=True)
class MemberView:
    """A live member as operators see it; ``assigned``: its partitions as ``topic/partition``."""

    member_id: str
    client_id: str
    client_host: str
    assigned: list[str]


@dataclass(frozen=True)
class GroupView:
    name: str
    state: str
    protocol: str
    generation: int
    members: list[MemberView]


class KafkaError(Exception):
    """A Kafka error code for the reply (``errno`` of one of kafka.errors' classes)."""

    def __init__(self, errno: int) -> None:
        super().__init__(errno)
        self.errno = errno


class Coordinator:
    """Session timeouts are wall-clock time (``time.monotonic``), never the broker's clock, which
    tests may move by hours."""

    def __init__(self, initial_delay: float = 0.0) -> None:
        self._groups: dict[str, Group] = {}
        self._initial_delay = initial_delay

    def group(self, name: str) -> Group | None:
        return self._groups.get(name)

    def groups(self) -> list[Group]:
        return list(self._groups.values())

    def forget_group(self, group: str) -> bool:
        """Drop a deleted group that has no member left (a live one is never deleted)."""
        kept = self._groups.get(group)
        if kept is None or kept.members:
            return False
        del self._groups[group]
        return True

    def forget_topic(self, topic: str) -> None:
        """Nothing to drop: a group's state names no topic once it has no member."""

    def clients(self) -> list[Client]:
        """Every live member of a group, as a consumer of it."""
        return [_as_client(group, m) for group in self._groups.values() for m in group.members.values()]

    def readers(self, group: str, topic: str) -> list[Client]:
        """The group's live members whose subscription (Kafka's consumer protocol metadata, of
        the group's protocol) names ``topic``, or cannot be read, as Kafka's OffsetDelete judges."""
        kept = self._groups.get(group)
        if kept is None:
            return []
        return [
            _as_client(kept, m)
            for m in kept.members.values()
            if (topics := _subscribed(kept, m)) is None or topic in topics
        ]

    def views(self) -> list[GroupView]:
        """Every group the coordinator knows, with its live members, by name."""
        return [
            GroupView(
                name=group.name,
                state=group.state.value,
                protocol=group.protocol,
                generation=group.generation,
                members=[
                    MemberView(m.member_id, m.client_id, m.client_host, _assigned(group.protocol_type, m.assignment))
                    for m in group.members.values()
                ],
            )
            for group in sorted(self._groups.values(), key=lambda g: g.name)
        ]

    async def join(
        self,
        name: str,
        member_id: str,
        *,
        client_id: str,
        client_host: str,
        protocol_type: str,
        protocols: dict[str, bytes],
        session_timeout: float,
        rebalance_timeout: float,
    ) -> Joined:
        group = self._groups.setdefault(name, Group(name))
        if group.members and protocol_type != group.protocol_type:
            raise KafkaError(InconsistentGroupProtocolError.errno)
        if group.members and not set(protocols) & _shared(group):
            raise KafkaError(InconsistentGroupProtocolError.errno)
        if member_id and member_id not in group.members:
            raise KafkaError(UnknownMemberIdError.errno)
        known = group.members.get(member_id)
        if known is not None and known.protocols == protocols and self._settled(group, member_id):
            known.seen = time.monotonic()  # nothing changed: as Kafka, no new round
            return self._joined(group, known)
        member = known or Member(
            member_id=f"{client_id or 'member'}-{uuid.uuid4()}",
            client_id=client_id,
            client_host=client_host,
            protocol_type=protocol_type,
            protocols=protocols,
            session_timeout=session_timeout,
            rebalance_timeout=rebalance_timeout,
            seen=time.monotonic(),
        )
        member.protocols, member.seen = protocols, time.monotonic()
        member.session_timeout, member.rebalance_timeout = session_timeout, rebalance_timeout
        group.members[member.member_id] = member
        group.protocol_type = protocol_type
        if member.synced is not None and not member.synced.done():
            member.synced.set_exception(KafkaError(RebalanceInProgressError.errno))
        member.joined = asyncio.get_running_loop().create_future()
        if group.state is State.EMPTY and self._initial_delay > 0:
            self._delay(group, rebalance_timeout)
        elif group.state is not State.JOINING:
            self._prepare(group)
        elif group.delay_left is not None and member_id == "":
            self._delay(group, group.delay_left)
        self._maybe_complete(group)
        return await member.joined

    def _delay(self, group: Group, left: float) -> None:
        """Wait ``initial_delay`` more (at most ``left``) before a new group's first round ends."""
        if group.deadline is not None:
            group.deadline.cancel()
        wait = min(self._initial_delay, left)
        group.state, group.delay_left = State.JOINING, left - wait
        group.deadline = asyncio.get_running_loop().call_later(wait, self._complete, group)

    def _prepare(self, group: Group) -> None:
        """Start a join round; members waiting for their assignment are told to join again."""
        group.state = State.JOINING
        for member in group.members.values():
            if member.synced is not None and not member.synced.done():
                member.synced.set_exception(KafkaError(RebalanceInProgressError.errno))
        timeout = max(m.rebalance_timeout for m in group.members.values())
        group.deadline = asyncio.get_running_loop().call_later(timeout, self._complete, group)

    def _maybe_complete(self, group: Group) -> None:
        waiting = all(m.joined is not None and not m.joined.done() for m in group.members.values())
        if waiting and group.delay_left is None:  # a new group's first round waits out its delay
            self._complete(group)

    def _complete(self, group: Group) -> None:
        """End a join round: members that did not join again are out; the rest get the new generation."""
        if group.deadline is not None:
            group.deadline.cancel()
            group.deadline = None
        group.delay_left = None
        for member_id, member in list(group.members.items()):
            if member.joined is None or member.joined.done():
                del group.members[member_id]
        if not group.members:
            group.state, group.generation, group.leader, group.protocol = State.EMPTY, group.generation + 1, "", ""
            return
        group.generation += 1
        group.state = State.SYNCING
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        shared = _shared(group)
        group.protocol = next(p for p in group.members[group.leader].protocols if p in shared)
        for member in group.members.values():
            assert member.joined is not None
            member.joined.set_result(self._joined(group, member))

    @staticmethod
    def _settled(group: Group, member_id: str) -> bool:
        """Whether a member's join with unchanged metadata gets the current generation back rather
        than a new round: while the group awaits its assignment, or when it is stable and the
        member is not its leader (a leader's join asks for a new assignment), as Kafka's
        coordinator does (a client may have given up on a join that completed)."""
        return group.state is State.SYNCING or (group.state is State.STABLE and member_id != group.leader)

    @staticmethod
    def _joined(group: Group, member: Member) -> Joined:
        """The current generation as ``member`` learns it; the leader gets every member's metadata."""
        leader = member.member_id == group.leader
        everyone = [(m.member_id, m.protocols[group.protocol]) for m in group.members.values()] if leader else []
        return Joined(group.generation, group.protocol, group.leader, member.member_id, everyone)

    async def sync(self, name: str, member_id: str, generation: int, assignments: dict[str, bytes]) -> bytes:
        group, member = self._member(name, member_id)
        if generation != group.generation:
            raise KafkaError(IllegalGenerationError.errno)
        if group.state is State.JOINING:
            raise KafkaError(RebalanceInProgressError.errno)
        member.seen = time.monotonic()
        if group.state is State.STABLE:
            return member.assignment
        member.synced = asyncio.get_running_loop().create_future()
        if member_id == group.leader:
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id, b"")
            group.state = State.STABLE
            for other in group.members.values():
                if other.synced is not None and not other.synced.done():
                    other.synced.set_result(other.assignment)
        return await member.synced

    def heartbeat(self, name: str, member_id: str, generation: int) -> None:
        group, member = self._member(name, member_id)
        member.seen = time.monotonic()
        if group.state is State.JOINING:
            raise KafkaError(RebalanceInProgressError.errno)
        if generation != group.generation:
            raise KafkaError(IllegalGenerationError.errno)

    def leave(self, name: str, member_id: str) -> None:
        group, member = self._member(name, member_id)
        self._remove(group, member)

    def check_generation(self, name: str, member_id: str, generation: int) -> None:
        """For an offset commit: -1 commits without a group membership (a consumer assigning its
        own partitions); else the member must be in the group's current generation. As Kafka's
        coordinator, a member of it still commits while a rebalance is being prepared (it owns
        its partitions until it joins again), not while the group awaits its assignment."""
        if generation < 0:
            return
        group, _ = self._member(name, member_id)
        if generation != group.generation:
            raise KafkaError(IllegalGenerationError.errno)
        if group.state is State.SYNCING:
            raise KafkaError(RebalanceInProgressError.errno)

    def _member(self, name: str, member_id: str) -> tuple[Group, Member]:
        group = self._groups.get(name)
        if group is None or member_id not in group.members:
            raise KafkaError(UnknownMemberIdError.errno)
        return group, group.members[member_id]

    def _remove(self, group: Group, member: Member) -> None:
        del group.members[member.member_id]
        for waiting in (member.joined, member.synced):
            if waiting is not None and not waiting.done():
                waiting.set_exception(KafkaError(UnknownMemberIdError.errno))
        if group.state is State.JOINING:
            self._maybe_complete(group)
        elif group.members:
            self._prepare(group)
        else:
            group.state, group.leader, group.protocol = State.EMPTY, "", ""

    async def run(self) -> None:
        """Remove the members whose session timed out (no heartbeat, join or sync in it)."""
        while True:
            now = time.monotonic()
            for group in list(self._groups.values()):
                for member in list(group.members.values()):
                    waiting = member.joined is not None and not member.joined.done()
                    if not waiting and now - member.seen > member.session_timeout:
                        self._remove(group, member)
            await asyncio.sleep(SWEEP_INTERVAL)


def _shared(group: Group) -> set[str]:
    """The protocols (assignors) every member of the group supports."""
    protocols = [set(m.protocols) for m in group.members.values()]
    return set.intersection(*protocols) if protocols else set()


def _as_client(group: Group, member: Member) -> Client:
    """A live member as a consumer of its group (its host: Kafka keeps no port)."""
    return Client("kafka", group.name, CONSUMER, member.client_id, member.client_host)


def _subscribed(group: Group, member: Member) -> set[str] | None:
    """The topics a member subscribes to, read from its metadata for the group's protocol
    (Kafka's consumer protocol: a version, then the topics); None, for any topic, when it is not
    that protocol, the protocol is not chosen yet, or the metadata is not understood."""
    metadata = member.protocols.get(group.protocol)
    if group.protocol_type != "consumer" or metadata is None:
        return None
    try:
        return set(ConsumerProtocolSubscription.decode(metadata).topics)
    except Exception:  # a client's own encoding: not ours to refuse
        return None


def _assigned(protocol_type: str, assignment: bytes) -> list[str]:
    """A consumer group member's partitions, read from its assignment (Kafka's consumer protocol:
    a version, then the topics and partitions); none for other protocols or one not understood."""
    if protocol_type != "consumer" or not assignment:
        return []
    try:
        decoded = ConsumerProtocolAssignment.decode(assignment)
    except Exception:  # a client's own encoding: not ours to refuse
        return []
    return [f"{topic}/{partition}" for topic, partitions in decoded.assigned_partitions for partition in partitions]
