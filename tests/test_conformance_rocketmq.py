"""RocketMQ 5's official clients judge halfmq: each scenario program runs against halfmq and against
Apache RocketMQ 5 (the ``rocketmq_peer`` fixture, started once per run), and the two outcomes must
agree field by field, or differ only where tests/conformance/departures.toml says why. The clients
are Python's (from the venv), Node.js's (installed from npm once per run) and Java's (fetched from
Maven Central once, into the peers' cache).

Both brokers are set alike: the real one by pyproject's ``halfmq_rocketmq_config``, halfmq by the
flags that translate it (``ALIKE``); and each scenario's topics and consumer groups are created
on both before it runs, as an operator creates them for RocketMQ 5's clients."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from halfmq_peers import rocketmq
from halfmq_peers.java import java_program
from halfmq_testing import EmbeddedBroker
from halfmq_testing.peers import RunningPeer
from tests.conformance.judge import judge_program
from tests.support import npm_install

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROGRAMS = Path(__file__).resolve().parent / "conformance" / "programs"
CLIENTS = ["python", "nodejs", "java"]
# Each client's newest release.
NODEJS_CLIENT = "rocketmq-client-nodejs@1.0.8"
JAVA_CLIENT = "org.apache.rocketmq:rocketmq-client-java:5.2.0"
SCENARIOS = [
    "normal", "async-send", "delay", "fifo", "transaction", "invisible-duration", "dead-letter", "recall",
]  # fmt: skip
CONFIG = "halfmq_rocketmq_config"
# The real broker's settings (broker.conf, milliseconds) and the halfmq flags (seconds) that mean
# the same; the proxy's minimums (long polling, invisible time) have none: halfmq has no minimum.
ALIKE = {
    "transactionCheckInterval": ("check_interval", 1000),
    "transactionTimeOut": ("transaction_timeout", 1000),
    "transactionCheckMax": ("check_max", 1),
}


class Client(NamedTuple):
    name: str
    command: list[str]  # runs its scenario program, to which ENDPOINT PREFIX SCENARIO are added


@pytest.fixture(scope="module", params=CLIENTS)
def client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Client:
    """A client and its scenario program, its library installed for the run."""
    name = request.param
    if name == "nodejs":
        modules = npm_install(tmp_path_factory.mktemp("rmq5-nodejs"), NODEJS_CLIENT)
        if isinstance(modules, str):
            pytest.skip(modules)
        return Client(name, ["env", f"NODE_PATH={modules}", "node", str(PROGRAMS / "rmq5_nodejs.js")])
    if name == "java":
        return Client(name, java_program(PROGRAMS / "Rmq5Java.java", [JAVA_CLIENT]))
    return Client(name, [sys.executable, str(PROGRAMS / "rmq5_python.py")])


@pytest.fixture(scope="module")
def halfmq_rocketmq(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("conformance"), flags=alike(pytestconfig)) as broker:
        yield broker


def alike(config: pytest.Config) -> dict[str, object]:
    """halfmq's flags for the settings the real broker runs with."""
    settings = dict(line.partition("=")[::2] for line in config.getini(CONFIG))
    flags: dict[str, object] = {}
    for key, (flag, per_unit) in ALIKE.items():
        if key in settings:
            value = int(settings[key].strip()) / per_unit
            flags[flag] = int(value) if value.is_integer() else value
    return flags


def needs(client: Client, prefix: str, scenario: str) -> dict[str, list[list[Any]]]:
    ran = subprocess.run([*client.command, "--needs", prefix, scenario], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr[-4000:]
    plan: dict[str, list[list[Any]]] = json.loads(ran.stdout)
    return plan


def prepare_halfmq(broker: EmbeddedBroker, plan: Mapping[str, list[list[Any]]]) -> None:
    for name, queues, message_type in plan["topics"]:
        broker.request("POST", "/topics", {"name": name, "queues": queues, "message_type": message_type})
    for group, max_attempts, fifo in plan["groups"]:
        broker.request("PUT", f"/consumers/{group}/retry-policy", {"max_attempts": max_attempts, "fifo": fifo})


def prepare_peer(endpoints: Mapping[str, str], plan: Mapping[str, list[list[Any]]]) -> None:
    peer = rocketmq.RocketMQ.running_at(endpoints)
    for name, queues, message_type in plan["topics"]:
        peer.create_topic(name, queues, message_type)
    for group, max_attempts, fifo in plan["groups"]:
        peer.set_group(group, max_attempts=max_attempts, fifo=fifo)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_scenario_s_outcome_is_the_real_rocketmq_s(
    client: Client, scenario: str, halfmq_rocketmq: EmbeddedBroker, rocketmq_peer: RunningPeer
) -> None:
    prefix = f"{scenario}-{uuid.uuid4().hex[:8]}"
    plan = needs(client, prefix, scenario)
    prepare_halfmq(halfmq_rocketmq, plan)
    prepare_peer(rocketmq_peer.endpoints, plan)
    judge_program("rocketmq", scenario, client.name, client.command, prefix, halfmq_rocketmq.rocketmq_endpoint,
                  rocketmq_peer.endpoints["proxy"])  # fmt: skip
