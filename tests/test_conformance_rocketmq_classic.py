"""RocketMQ's classic (remoting) clients judge halfmq: each scenario of a client's program runs
against halfmq's name server and against Apache RocketMQ's (the ``rocketmq_peer`` fixture,
started once per run), and the two outcomes must agree field by field, or differ only where
tests/conformance/departures.toml says why (protocol ``rocketmq-classic``). The clients:
- Java's org.apache.rocketmq:rocketmq-client (conformance/programs/RmqClassicJava.java), fetched
  from Maven Central once, into the peers' cache;
- RocketMQ's Spring Boot starter, org.apache.rocketmq:rocketmq-spring-boot-starter, with the
  Spring Boot it names (conformance/programs/RmqSpring.java), fetched as the Java client is;
- Go's github.com/apache/rocketmq-client-go/v2 (conformance/programs/rmq_classic_go), at the
  version its go.mod names, fetched from the Go module proxy into Go's module cache (kept
  between runs) and built once per run. Go is needed: without it the test fails.

Both brokers are set alike, as in test_conformance_rocketmq.py (its ``alike``), and each
scenario's topics are created on both before it runs; a remoting client's producer and consumer
groups need no creating."""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from halfmq_peers.java import java_program
from halfmq_peers.rocketmq import CLASSIC_CLIENT
from halfmq_testing import EmbeddedBroker
from halfmq_testing.peers import RunningPeer
from tests.conformance.judge import judge_program
from tests.test_conformance_rocketmq import Client, alike, needs, prepare_halfmq, prepare_peer

# A cold Go build fetches the client and its dependencies and compiles them on two busy cores.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

PROGRAMS = Path(__file__).resolve().parent / "conformance" / "programs"
# The newest 5.x whole on Maven Central (5.5.1 lacks rocketmq-client: halfmq_peers/rocketmq.py),
# and the last 4.x, which much code in production still runs.
JAVA_CLIENT_4 = "org.apache.rocketmq:rocketmq-client:4.9.8"
SPRING_STARTER = "org.apache.rocketmq:rocketmq-spring-boot-starter:2.3.5"
GO_PROGRAM = PROGRAMS / "rmq_classic_go"
GO_MODULE = "github.com/apache/rocketmq-client-go/v2"
BUILD_TIMEOUT = 600  # seconds
# Each client's scenarios, by the fixture that builds it.
SCENARIOS = {
    "java_client": ["quickstart", "async-oneway", "batch", "transaction", "retry", "orderly", "scheduled", "filter",
                    "broadcasting"],
    "java_client_4": ["quickstart", "async-oneway", "batch", "transaction", "retry", "orderly", "scheduled", "filter",
                      "broadcasting"],
    "go_client": ["quickstart", "transaction", "scheduled", "retry", "orderly"],
    "spring_client": ["transaction"],
}  # fmt: skip


def go_client_version() -> str:
    """The Go client's module and version as the program's go.mod requires it: what the Go module
    proxy gives as its newest, a commit of the default branch (the last tag, v2.1.2, is of 2023)."""
    go_mod = GO_PROGRAM / "go.mod"
    found = re.search(rf"^(?:require)?\s*{re.escape(GO_MODULE)} (\S+)", go_mod.read_text(), re.M)
    assert found is not None, f"{go_mod} requires no {GO_MODULE}"
    return f"{GO_MODULE} {found[1]}"


GO_CLIENT = go_client_version()


@pytest.fixture(scope="module")
def java_client() -> Client:
    """The classic Java client and its scenario program, the library fetched once."""
    return Client("rocketmq-client", java_program(PROGRAMS / "RmqClassicJava.java", [CLASSIC_CLIENT]))


@pytest.fixture(scope="module")
def java_client_4() -> Client:
    """The same program with the 4.9.x client."""
    return Client("rocketmq-client-4", java_program(PROGRAMS / "RmqClassicJava.java", [JAVA_CLIENT_4]))


@pytest.fixture(scope="module")
def spring_client() -> Client:
    """A Spring Boot application of RocketMQ's starter (RocketMQTemplate and its listeners)."""
    program = java_program(PROGRAMS / "RmqSpring.java", [SPRING_STARTER])
    return Client("rocketmq-spring-boot-starter", program)


def go_program(folder: Path) -> Path:
    """The Go scenario program, built into ``folder``; its modules come from Go's module cache."""
    go = shutil.which("go")
    assert go is not None, "the Go client's conformance program needs Go (go on PATH) to build"
    binary = folder / "rmq_classic_go"
    built = subprocess.run(
        [go, "build", "-buildvcs=false", "-o", str(binary), "."],
        cwd=GO_PROGRAM, capture_output=True, text=True, timeout=BUILD_TIMEOUT,
    )  # fmt: skip
    assert built.returncode == 0, f"go build failed:\n{built.stderr[-4000:]}"
    return binary


@pytest.fixture(scope="module")
def go_client(tmp_path_factory: pytest.TempPathFactory) -> Client:
    """The Go scenario program, built for this run."""
    return Client("rocketmq-client-go", [str(go_program(tmp_path_factory.mktemp("rmq-classic-go")))])


@pytest.fixture(scope="module")
def halfmq_classic(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("conformance-classic"), flags=alike(pytestconfig)) as broker:
        yield broker


@pytest.mark.parametrize(
    ("built", "scenario"), [(built, scenario) for built, scenarios in SCENARIOS.items() for scenario in scenarios]
)
def test_the_scenario_s_outcome_is_the_real_rocketmq_s(
    request: pytest.FixtureRequest, built: str, scenario: str, halfmq_classic: EmbeddedBroker,
    rocketmq_peer: RunningPeer,
) -> None:  # fmt: skip
    client: Client = request.getfixturevalue(built)
    prefix = f"{scenario}-{uuid.uuid4().hex[:8]}"
    plan = needs(client, prefix, scenario)
    prepare_halfmq(halfmq_classic, plan)
    prepare_peer(rocketmq_peer.endpoints, plan)
    judge_program("rocketmq-classic", scenario, client.name, client.command, prefix, halfmq_classic.namesrv_endpoint,
                  rocketmq_peer.endpoints["namesrv"])  # fmt: skip
