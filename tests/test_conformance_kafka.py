"""Kafka's clients judge halfmq: each scenario program runs against halfmq and against Apache
Kafka (the ``kafka_peer`` fixture, started once per run), and the two outcomes must agree field
by field, or differ only where tests/conformance/departures.toml says why. The Python clients'
programs run in this venv; kafkajs's is installed from npm once per run, and Kafka's own Java
client (the broker's version) is fetched from Maven Central once, into the peers' cache."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from halfmq_peers.java import java_program
from halfmq_testing import EmbeddedBroker
from halfmq_testing.peers import RunningPeer
from tests.conformance.judge import judge_program
from tests.support import npm_install

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROGRAMS = Path(__file__).resolve().parent / "conformance" / "programs"
PYTHON_CLIENTS = {
    "confluent-kafka": [sys.executable, str(PROGRAMS / "kafka_confluent.py")],
    "aiokafka": [sys.executable, str(PROGRAMS / "kafka_aiokafka.py")],
    "kafka-python": [sys.executable, str(PROGRAMS / "kafka_kafkapython.py")],
}
# The other clients' commands come from fixtures, which install them once.
INSTALLED_CLIENTS = {"kafkajs": "kafkajs_program", "kafka-clients": "kafka_java_program"}
# Kafka's own Java client at the broker's version; slf4j-nop because kafka-clients logs through
# slf4j 1.7, which otherwise warns that it has no binding.
KAFKA_JAVA = ["org.apache.kafka:kafka-clients:4.4.0", "org.slf4j:slf4j-nop:1.7.36"]
KAFKAJS = "kafkajs@2.2.4"
CLIENTS = [*PYTHON_CLIENTS, *INSTALLED_CLIENTS]
SCENARIOS = [
    "produce-consume", "topics", "auto-create", "group-together", "group-late-and-leaving", "offsets", "idempotent",
    "transactions", "fencing", "send-offsets", "transaction-timeout",
]  # fmt: skip


@pytest.fixture(scope="module")
def halfmq_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("conformance")) as broker:
        yield broker


@pytest.fixture(scope="module")
def kafkajs_program(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    node_modules = npm_install(tmp_path_factory.mktemp("kafkajs"), KAFKAJS)
    if isinstance(node_modules, str):
        pytest.skip(node_modules)
    return ["env", f"NODE_PATH={node_modules}", "node", str(PROGRAMS / "kafka_kafkajs.js")]


@pytest.fixture(scope="module")
def kafka_java_program() -> list[str]:
    return java_program(PROGRAMS / "KafkaJava.java", KAFKA_JAVA)


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("client", CLIENTS)
def test_the_scenario_s_outcome_is_the_real_kafka_s(
    client: str, scenario: str, halfmq_kafka: EmbeddedBroker, kafka_peer: RunningPeer, request: pytest.FixtureRequest
) -> None:
    command = PYTHON_CLIENTS.get(client) or request.getfixturevalue(INSTALLED_CLIENTS[client])
    prefix = f"{scenario}-{uuid.uuid4().hex[:8]}"
    judge_program("kafka", scenario, client, command, prefix, halfmq_kafka.kafka_bootstrap,
                  kafka_peer.endpoints["bootstrap"])  # fmt: skip
