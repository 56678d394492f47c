"""RocketMQ's own command-line admin tool judges halfmq: each scenario runs the same mqadmin
commands (rocketmq-tools, the conformance RocketMQ's version) against halfmq's name server and
against Apache RocketMQ's (the ``rocketmq_peer`` fixture), and what each command printed must be
the same, or differ only where tests/conformance/departures.toml says why (protocol
``rocketmq-tools``). mqadmin ends with status 0 whether a command worked or not; a failed command
prints its exception, whose message (error code and description) is compared, its stack not.

What varies from run to run whatever the broker (the run's names, message ids, addresses and
ports, times, the broker's name, load and store figures) is masked before the comparison; see
``normalized``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from halfmq_peers import rocketmq
from halfmq_peers.java import java_program
from halfmq_testing import EmbeddedBroker
from halfmq_testing.peers import RunningPeer
from tests.conformance.judge import judge_steps
from tests.test_conformance_rocketmq import alike

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROGRAM = Path(__file__).resolve().parent / "conformance" / "programs" / "MqAdmin.java"
TOOLS_ARTIFACTS = (f"org.apache.rocketmq:rocketmq-tools:{rocketmq.VERSION}",)
CLUSTER = ["-c", "DefaultCluster"]


def step(name: str, tool: str, *args: str) -> dict[str, Any]:
    return {"name": name, "tool": tool, "args": list(args)}


def mqadmin(name: str, *args: str) -> dict[str, Any]:
    """A command of mqadmin; the program adds ``-n`` and the name server's address."""
    return step(name, "mqadmin", *args)


def send(name: str, key: str, tag: str, body: str) -> dict[str, Any]:
    """One message to P-t, to its queues in turn (queue 0 first), with the key and tag given."""
    return step(name, "send", "P-t", key, tag, body)


CREATE = mqadmin("create", "updateTopic", "-t", "P-t", *CLUSTER, "-r", "4", "-w", "4")

SCENARIOS: dict[str, list[dict[str, Any]]] = {
    "topics": [
        CREATE,
        mqadmin("list", "topicList"),
        mqadmin("route", "topicRoute", "-t", "P-t"),
        mqadmin("status", "topicStatus", "-t", "P-t"),
        mqadmin("cluster", "clusterList"),
        mqadmin("delete", "deleteTopic", "-t", "P-t", *CLUSTER),
        mqadmin("route-after-delete", "topicRoute", "-t", "P-t"),
    ],
    "groups": [
        CREATE,
        mqadmin("create-group", "updateSubGroup", "-g", "P-g", *CLUSTER),
        send("send-1", "k1", "TagA", "one"),
        send("send-2", "k2", "TagA", "two"),
        send("send-3", "k3", "TagA", "three"),
        step("consume", "consume", "P-g", "P-t", "3"),
        mqadmin("progress", "consumerProgress", "-g", "P-g"),
        # -s: a time in ms since the epoch, "now" or yyyy-MM-dd#HH:mm:ss:SSS; 0, to the first offsets
        mqadmin("reset-to-earliest", "resetOffsetByTime", "-g", "P-g", "-t", "P-t", "-s", "0"),
        mqadmin("progress-after-reset", "consumerProgress", "-g", "P-g"),
        step("consume-after-reset", "consume", "P-g", "P-t", "3"),
        mqadmin("delete-group", "deleteSubGroup", "-g", "P-g", *CLUSTER),
    ],
    "messages": [
        CREATE,
        send("send", "order-7", "TagA", "o-7 created"),
        mqadmin("by-key", "queryMsgByKey", "-t", "P-t", "-k", "order-7"),
        mqadmin("by-unique-key", "queryMsgByUniqueKey", "-t", "P-t", "-i", "{uniq}"),
        mqadmin("by-offset-id", "queryMsgById", "-t", "P-t", "-i", "{offsetId}"),
        mqadmin("by-key-missing", "queryMsgByKey", "-t", "P-t", "-k", "order-missing"),
    ],
}
# Steps whose lines come in an order of no meaning (resetOffsetByTime's queues, from a hash map).
UNORDERED = {"reset-to-earliest"}
# Steps that list every topic of the broker, of which only the run's own (P-...) are compared.
THE_RUN_S_ONLY = {"list"}

# What varies whatever the broker, each with its mask, in the order applied.
MASKS: list[tuple[str, str]] = [
    # clusterList's row: the broker's version stays; its load, timer, put latency, store age and
    # disk use go
    (
        r"^(\S+\s+)(?:broker-a|halfmq)(\s+\d+\s+)127\.0\.0\.1:\d+(\s+\S+\s+).*?\s(true|false)\s*$",
        r"\1<broker>\2<addr>\3<load> \4",
    ),
    # queryMsgByKey's index key: the time of its index slot, the key's message id and its place
    # in the commit log
    (r"\b\d+@(P-t@\w@[^@\s]*)@[0-9A-F]{32,}@\d+\b", r"<slot>@\1@<id>@<position>"),
    (r"\b(broker-a|halfmq)\b", "<broker>"),
    (r"\b127\.0\.0\.1:\d+\b", "<addr>"),
    (r"\b[0-9A-F]{32,}\b", "<id>"),  # message ids, offset message ids
    (r"\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(,\d{3})?\b", "<time>"),
    (r"(TPS: )[\d.]+", r"\1<tps>"),
    (r"^(CommitLog Offset:\s+)\d+", r"\1<position>"),  # where the broker's commit log put it
]


def normalized(name: str, ran: dict[str, Any], prefix: str) -> dict[str, Any]:
    """A step's status and output lines, the run's prefix as ``P``, masked, whitespace runs as one
    space, stack frames left out."""
    lines = []
    for line in (ran["out"] + ran["err"]).replace(prefix, "P").splitlines():
        for pattern, mask in MASKS:
            line = re.sub(pattern, mask, line)
        line = " ".join(line.split())
        if line and not line.startswith(("at ", "... ")) and (name not in THE_RUN_S_ONLY or "P-" in line):
            lines.append(line)
    return {"status": ran["status"], "lines": sorted(lines) if name in UNORDERED else lines}


@pytest.fixture(scope="module")
def halfmq_namesrv(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("mqadmin"), flags=alike(pytestconfig)) as broker:
        yield broker


@pytest.fixture(scope="module")
def mqadmin_program() -> list[str]:
    return java_program(PROGRAM, TOOLS_ARTIFACTS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_mqadmin_prints_what_it_prints_against_the_real_rocketmq(
    scenario: str, halfmq_namesrv: EmbeddedBroker, rocketmq_peer: RunningPeer, mqadmin_program: list[str]
) -> None:
    steps = SCENARIOS[scenario]
    judge_steps("rocketmq-tools", scenario, "mqadmin", mqadmin_program, steps, normalized,
                halfmq_namesrv.namesrv_endpoint, rocketmq_peer.endpoints["namesrv"])  # fmt: skip
