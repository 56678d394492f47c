"""Kafka's clients judge halfmq: each scenario program runs against halfmq and against Apache
Kafka (the ``kafka_peer`` fixture, started once per run), and the two outcomes must agree field
by field, or differ only where tests/conformance/departures.toml says why."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from halfmq_testing import EmbeddedBroker
from tests.conformance.judge import judge_program

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROGRAMS = Path(__file__).resolve().parent / "conformance" / "programs"
CLIENTS = {
    "confluent-kafka": [sys.executable, str(PROGRAMS / "kafka_confluent.py")],
    "aiokafka": [sys.executable, str(PROGRAMS / "kafka_aiokafka.py")],
    "kafka-python": [sys.executable, str(PROGRAMS / "kafka_kafkapython.py")],
}
SCENARIOS = [
    "produce-consume", "topics", "auto-create", "group-together", "group-late-and-leaving", "offsets", "idempotent",
    "transactions", "fencing", "send-offsets", "transaction-timeout",
]  # fmt: skip


@pytest.fixture(scope="module")
def halfmq_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("conformance")) as broker:
        yield broker


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("client", CLIENTS)
def test_the_scenario_s_outcome_is_the_real_kafka_s(client: str, scenario: str, halfmq_kafka, kafka_peer):
    prefix = f"{scenario}-{uuid.uuid4().hex[:8]}"
    judge_program("kafka", scenario, client, CLIENTS[client], prefix, halfmq_kafka.kafka_bootstrap,
                  kafka_peer.endpoints["bootstrap"])  # fmt: skip
