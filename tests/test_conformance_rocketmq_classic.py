"""RocketMQ's classic (remoting) Java client judges halfmq: each scenario of
conformance/programs/RmqClassicJava.java runs against halfmq's name server and against Apache
RocketMQ's (the ``rocketmq_peer`` fixture, started once per run), and the two outcomes must agree
field by field, or differ only where tests/conformance/departures.toml says why (protocol
``rocketmq-classic``). The client, org.apache.rocketmq:rocketmq-client, is fetched from Maven
Central once, into the peers' cache.

Both brokers are set alike, as in test_conformance_rocketmq.py (its ``alike``), and each
scenario's topics are created on both before it runs; a remoting client's producer and consumer
groups need no creating."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from halfmq_testing import EmbeddedBroker
from halfmq_testing.peers import RunningPeer
from tests.conformance.java import java_program
from tests.conformance.judge import judge_program
from tests.test_conformance_rocketmq import Client, alike, needs, prepare_halfmq, prepare_peer

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROGRAMS = Path(__file__).resolve().parent / "conformance" / "programs"
# The newest 5.x whole on Maven Central (5.5.1 lacks rocketmq-client: halfmq_peers/rocketmq.py).
JAVA_CLIENT = "org.apache.rocketmq:rocketmq-client:5.5.0"
SCENARIOS = ["quickstart", "async-oneway", "batch", "transaction"]


@pytest.fixture(scope="module")
def client() -> Client:
    """The classic Java client and its scenario program, the library fetched once."""
    return Client("rocketmq-client", java_program(PROGRAMS / "RmqClassicJava.java", [JAVA_CLIENT]))


@pytest.fixture(scope="module")
def halfmq_classic(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("conformance-classic"), flags=alike(pytestconfig)) as broker:
        yield broker


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_scenario_s_outcome_is_the_real_rocketmq_s(
    client: Client, scenario: str, halfmq_classic: EmbeddedBroker, rocketmq_peer: RunningPeer
) -> None:
    prefix = f"{scenario}-{uuid.uuid4().hex[:8]}"
    plan = needs(client, prefix, scenario)
    prepare_halfmq(halfmq_classic, plan)
    prepare_peer(rocketmq_peer.endpoints, plan)
    judge_program("rocketmq-classic", scenario, client.name, client.command, prefix, halfmq_classic.namesrv_endpoint,
                  rocketmq_peer.endpoints["namesrv"])  # fmt: skip
