"""The official Kafka clients, unmodified, against halfmq's Kafka port: confluent-kafka,
kafka-python, aiokafka (from PyPI) and kafkajs (from npm), each in its own process."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from halfmq_cli.main import main
from halfmq_testing import EmbeddedBroker
from tests.kafka_clients import CLIENTS, ClientProcess, run_client, wait_for
from tests.support import npm_install

PARTITIONS = 4


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    """One broker for the module: each test has its own topics and groups."""
    with EmbeddedBroker() as running:
        yield running


@pytest.fixture(scope="module")
def kafkajs(tmp_path_factory: pytest.TempPathFactory) -> Path | str:
    return npm_install(tmp_path_factory.mktemp("kafkajs"), "kafkajs@2.2.4")


@pytest.fixture(params=CLIENTS)
def client(request: pytest.FixtureRequest, kafkajs: Path | str) -> tuple[str, Path | None]:
    if request.param != "kafkajs":
        return request.param, None
    if isinstance(kafkajs, str):
        pytest.skip(kafkajs)
    return request.param, kafkajs


def stable(broker: EmbeddedBroker, group: str) -> bool:
    with urllib.request.urlopen(f"{broker.http_url}/kafka-groups") as reply:
        return any(g["name"] == group and g["state"] == "Stable" and len(g["members"]) == 2 for g in json.load(reply))


def expected(first: int, count: int) -> dict[str, dict[str, object]]:
    """The records a produce of ``count`` from ``first`` sends, by key, as the programs print them."""
    return {
        f"k{i}": {"value": f"v{i}", "headers": [["n", str(i).encode().hex()], ["bin", "00ff"]]}
        for i in range(first, first + count)
    }


def test_a_client_creates_a_topic_produces_and_a_group_of_two_splits_and_rebalances(broker, client):
    name, modules = client
    topic, group = f"orders-{name}", f"billing-{name}"
    bootstrap = broker.kafka_bootstrap
    assert run_client(name, bootstrap, modules, "create", topic, str(PARTITIONS)) == [{"created": topic}]

    def produce(first: int) -> dict[str, dict[str, object]]:
        acks = run_client(name, bootstrap, modules, "produce", topic, "12", str(first))
        assert len(acks) == 12 and len({(a["partition"], a["offset"]) for a in acks}) == 12
        return {a["key"]: a for a in acks}

    def got(records: list[dict[str, object]]) -> dict[str, dict[str, object]]:
        return {r["key"]: {"value": r["value"], "headers": r["headers"]} for r in records}  # type: ignore[misc]

    acked = produce(0)
    first = ClientProcess(name, bootstrap, modules, "consume", topic, group)
    second = None
    try:
        wait_for(lambda: len(first.records()) == 12, 60, "the first member to read the 12 records")
        assert first.assignment() == list(range(PARTITIONS))
        assert got(first.records()) == expected(0, 12)
        assert {r["key"]: (r["partition"], r["offset"]) for r in first.records()} == {
            k: (a["partition"], a["offset"]) for k, a in acked.items()
        }

        second = ClientProcess(name, bootstrap, modules, "consume", topic, group)

        def split() -> bool:
            mine, theirs = first.assignment() or [], second.assignment() or []
            return bool(mine and theirs) and sorted(mine + theirs) == list(range(PARTITIONS))

        wait_for(split, 60, "the group of two to split the partitions")
        wait_for(lambda: stable(broker, group), 30, "the group to be stable")
        shown: list[str] = []
        main(["--url", broker.http_url, "consumers", "kafka-groups"], out=shown.append)
        rows = [line.split() for line in shown[0].splitlines() if line.startswith(group)]
        assert len(rows) == 2 and {r[1] for r in rows} == {"Stable"}
        assert sorted(p for r in rows for p in r[5:]) == [f"{topic}/{p}" for p in range(PARTITIONS)]
        owner = {p: member for member in (first, second) for p in member.assignment() or []}
        before = {member: len(member.records()) for member in (first, second)}
        acked = produce(12)
        wait_for(lambda: sum(len(m.records()) - n for m, n in before.items()) == 12, 60, "the next 12 records")
        for member, n in before.items():
            for record in member.records()[n:]:
                assert owner[record["partition"]] is member, "a record went to the member without its partition"
        assert got(first.records()[before[first] :] + second.records()[before[second] :]) == expected(12, 12)

        second.stop()
        wait_for(lambda: first.assignment() == list(range(PARTITIONS)), 60, "the remaining member to take all")
        seen = len(first.records())
        acked = {**acked, **produce(24)}
        wait_for(lambda: len(first.records()) == seen + 12, 60, "the last 12 records")
        assert got(first.records()[seen:]) == expected(24, 12)
        first.stop()
    finally:
        for member in (first, second):
            if member is not None:
                member.kill()

    ends: dict[int, int] = {}
    for ack in acked.values():
        ends[ack["partition"]] = max(ends.get(ack["partition"], 0), ack["offset"] + 1)  # type: ignore[index,call-overload]
    (line,) = run_client(name, bootstrap, modules, "committed", topic, group, str(PARTITIONS))
    assert {int(p): o for p, o in line["committed"].items() if o is not None and o >= 0} == ends
    with urllib.request.urlopen(f"{broker.http_url}/consumers") as reply:
        listed = json.load(reply)["items"]
    assert {c["queue_id"]: c["offset"] for c in listed if c["group"] == group} == ends
