"""Kafka's clients judge halfmq: each scenario program runs against halfmq and against Apache
Kafka (the ``kafka_peer`` fixture, started once per run), and the two outcomes must agree field
by field, or differ only where tests/conformance/departures.toml says why."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from halfmq_testing import EmbeddedBroker
from tests.conformance.judge import judge

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


def outcome(client: str, bootstrap: str, prefix: str, scenario: str) -> dict[str, Any]:
    ran = subprocess.run([*CLIENTS[client], bootstrap, prefix, scenario], capture_output=True, text=True, timeout=240)
    assert ran.returncode == 0, f"{client} {scenario} against {bootstrap} failed:\n{ran.stderr[-4000:]}"
    result: dict[str, Any] = json.loads(ran.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("client", CLIENTS)
def test_the_scenario_s_outcome_is_the_real_kafka_s(client: str, scenario: str, halfmq_kafka, kafka_peer):
    prefix = f"{scenario}-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(2) as both:
        ours = both.submit(outcome, client, halfmq_kafka.kafka_bootstrap, prefix, scenario)
        theirs = both.submit(outcome, client, kafka_peer.endpoints["bootstrap"], prefix, scenario)
        judge("kafka", scenario, client, _unprefixed(ours.result(), prefix), _unprefixed(theirs.result(), prefix))


def _unprefixed(found: Any, prefix: str) -> Any:
    """The outcome with the run's prefix in names replaced by ``P``, so runs compare."""
    return json.loads(json.dumps(found).replace(prefix, "P"))
