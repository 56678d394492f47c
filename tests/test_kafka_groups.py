"""Kafka's group coordinator without a network: a new group's first rebalance waits its initial
delay for more members (Kafka's group.initial.rebalance.delay.ms), and does not wait at 0."""

from __future__ import annotations

import asyncio
import time

from broker.kafka_api.groups import Coordinator, Joined


async def join(coordinator: Coordinator, client: str) -> Joined:
    return await coordinator.join(
        "g", "", client_id=client, client_host="127.0.0.1", protocol_type="consumer", protocols={"range": b""},
        session_timeout=10, rebalance_timeout=5,
    )  # fmt: skip


def test_members_joining_within_the_initial_delay_share_the_first_generation():
    async def scenario() -> tuple[list[Joined], float]:
        coordinator = Coordinator(initial_delay=0.4)
        started = time.monotonic()
        first = asyncio.create_task(join(coordinator, "a"))
        await asyncio.sleep(0.2)
        second = asyncio.create_task(join(coordinator, "b"))
        joined = [await first, await second]
        return joined, time.monotonic() - started

    (first, second), took = asyncio.run(scenario())
    assert first.generation == second.generation == 1
    assert len((first if first.members else second).members) == 2, "the leader sees both members"
    assert took >= 0.6, "the second member's join extended the delay by another 0.4 s"


def test_without_an_initial_delay_the_first_member_s_join_completes_alone():
    async def scenario() -> Joined:
        return await asyncio.wait_for(join(Coordinator(), "a"), 1)

    joined = asyncio.run(scenario())
    assert (joined.generation, len(joined.members)) == (1, 1)


def test_a_follower_joining_again_unchanged_gets_the_current_generation_and_a_leader_a_new_round():
    async def scenario() -> tuple[Joined, Joined, int]:
        coordinator = Coordinator()
        first = await join(coordinator, "a")
        await coordinator.sync("g", first.member_id, first.generation, {first.member_id: b""})
        second = asyncio.create_task(join(coordinator, "b"))
        await asyncio.sleep(0.05)  # the new member's join starts a round; the leader joins again
        again = await coordinator.join("g", first.member_id, client_id="a", client_host="127.0.0.1",
                                       protocol_type="consumer", protocols={"range": b""}, session_timeout=10,
                                       rebalance_timeout=5)  # fmt: skip
        follower = await second
        leader_assigns = coordinator.sync("g", again.member_id, again.generation, {})
        await asyncio.gather(leader_assigns, coordinator.sync("g", follower.member_id, follower.generation, {}))
        rejoined = await coordinator.join("g", follower.member_id, client_id="b", client_host="127.0.0.1",
                                          protocol_type="consumer", protocols={"range": b""}, session_timeout=10,
                                          rebalance_timeout=5)  # fmt: skip
        group = coordinator.group("g")
        assert group is not None
        return follower, rejoined, group.generation

    follower, rejoined, generation = asyncio.run(scenario())
    assert (follower.generation, rejoined.generation, generation) == (2, 2, 2), "no new round for an unchanged join"
    assert rejoined.members == [], "a follower learns no one's metadata"
