"""Kafka's own command-line tools judge halfmq: each scenario runs the same commands of
kafka-topics, kafka-consumer-groups, kafka-console-producer, kafka-console-consumer and
kafka-transactions (the conformance Kafka's version) against halfmq's Kafka port and against
Apache Kafka, and what each command printed, and its exit status, must be the same, or differ
only where tests/conformance/departures.toml says why.

What varies from run to run whatever the broker (the run's names, member and producer ids,
times, the broker's node id and port) is masked before the comparison; see ``normalized``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from halfmq_peers import kafka
from halfmq_peers.java import java_program
from halfmq_testing import EmbeddedBroker
from halfmq_testing.peers import RunningPeer
from tests.conformance.judge import judge_steps

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROGRAM = Path(__file__).resolve().parent / "conformance" / "programs" / "KafkaTools.java"
BOOTSTRAP = ["--bootstrap-server", "{bootstrap}"]
SHOW = ["--formatter-property", "print.key=true", "--formatter-property", "print.headers=true",
        "--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true"]  # fmt: skip
RECORDS = "h1:v1,h2:v2\tk1\tone\nh1:v3\tk2\ttwo\nh2:v4\tk3\tthree\nh1:v5\tk4\tfour\n"
PRODUCE = ["--reader-property", "parse.key=true", "--reader-property", "parse.headers=true"]


def step(name: str, tool: str, *args: str, stdin: str = "") -> dict[str, Any]:
    return {"name": name, "tool": tool, "args": list(args), "stdin": stdin}


def topics(name: str, *args: str) -> dict[str, Any]:
    return step(name, "kafka-topics", *BOOTSTRAP, *args)


def create(partitions: int) -> list[dict[str, Any]]:
    """The run's topic created, and listed by the broker (Kafka's a moment after it answered)."""
    return [
        topics("create", "--create", "--topic", "P-t", "--partitions", str(partitions)),
        step("created", "listed", "P-t", "yes"),
    ]


def groups(name: str, *args: str) -> dict[str, Any]:
    return step(name, "kafka-consumer-groups", *BOOTSTRAP, *args)


def read_in_group(name: str, topic: str) -> dict[str, Any]:
    """The console consumer reads the topic's four records as group P-g, which commits them."""
    return step(name, "kafka-console-consumer", *BOOTSTRAP, "--topic", topic, "--group", "P-g", "--from-beginning",
                "--max-messages", "4", "--timeout-ms", "30000")  # fmt: skip


def reset(name: str, *args: str) -> dict[str, Any]:
    return groups(name, "--reset-offsets", "--group", "P-g", "--topic", "P-t", *args)


SCENARIOS: dict[str, list[dict[str, Any]]] = {
    "topics": [
        *create(3),
        topics("create-existing", "--create", "--topic", "P-t", "--partitions", "3"),
        topics("create-if-not-exists", "--create", "--if-not-exists", "--topic", "P-t"),
        topics("list", "--list", "--exclude-internal"),
        topics("list-internal", "--list"),
        topics("describe", "--describe", "--topic", "P-t"),
        topics("delete", "--delete", "--topic", "P-t"),
        step("deleted", "listed", "P-t", "no"),
        topics("list-after-delete", "--list", "--exclude-internal"),
        topics("delete-missing", "--delete", "--topic", "P-missing"),
        topics("delete-if-exists", "--delete", "--if-exists", "--topic", "P-missing"),
        topics("describe-missing", "--describe", "--topic", "P-missing"),
    ],
    "console": [
        *create(2),
        step("produce", "kafka-console-producer", *BOOTSTRAP, "--topic", "P-t", *PRODUCE, stdin=RECORDS),
        step(
            "consume",
            "kafka-console-consumer",
            *BOOTSTRAP,
            "--topic",
            "P-t",
            "--from-beginning",
            "--max-messages",
            "4",
            "--timeout-ms",
            "30000",
            *SHOW,
        ),
        step(
            "consume-partition",
            "kafka-console-consumer",
            *BOOTSTRAP,
            "--topic",
            "P-t",
            "--partition",
            "1",
            "--offset",
            "1",
            "--max-messages",
            "1",
            "--timeout-ms",
            "30000",
            *SHOW,
        ),
        step(
            "consume-past-end",
            "kafka-console-consumer",
            *BOOTSTRAP,
            "--topic",
            "P-t",
            "--partition",
            "0",
            "--offset",
            "latest",
            "--timeout-ms",
            "2000",
        ),
    ],
    "consumer-groups": [
        *create(2),
        step("produce", "kafka-console-producer", *BOOTSTRAP, "--topic", "P-t", *PRODUCE, stdin=RECORDS),
        read_in_group("consume", "P-t"),
        groups("list", "--list"),
        groups("list-empty", "--list", "--state", "Empty"),
        groups("describe", "--describe", "--group", "P-g"),
        groups("describe-state", "--describe", "--group", "P-g", "--state"),
        step("join", "join", "P-g", "P-t"),
        groups("describe-live", "--describe", "--group", "P-g", "--members"),
        reset("reset-live", "--to-earliest", "--execute"),
        groups("delete-live", "--delete", "--group", "P-g"),
        step("leave", "leave"),
        reset("reset-earliest-dry-run", "--to-earliest"),
        reset("reset-earliest", "--to-earliest", "--execute"),
        groups("describe-after-reset", "--describe", "--group", "P-g"),
        reset("reset-latest", "--to-latest", "--execute"),
        reset("reset-offset", "--to-offset", "1", "--execute"),
        step(
            "consume-after-reset",
            "kafka-console-consumer",
            *BOOTSTRAP,
            "--topic",
            "P-t",
            "--group",
            "P-g",
            "--max-messages",
            "2",
            "--timeout-ms",
            "30000",
            *SHOW,
        ),
        reset("reset-datetime-past", "--to-datetime", "2000-01-01T00:00:00.000", "--execute"),
        reset("reset-datetime-future", "--to-datetime", "2999-01-01T00:00:00.000", "--execute"),
        groups("delete-offsets", "--delete-offsets", "--group", "P-g", "--topic", "P-t"),
        groups("describe-after-delete-offsets", "--describe", "--group", "P-g"),
        groups("delete", "--delete", "--group", "P-g"),
        groups("delete-missing", "--delete", "--group", "P-missing"),
        groups("describe-missing", "--describe", "--group", "P-missing"),
    ],
    # A running group's offsets of a topic its members no longer consume can be deleted; of the
    # topic they consume, not.
    "delete-offsets-live": [
        *create(1),
        topics("create-old", "--create", "--topic", "P-old", "--partitions", "1"),
        step("created-old", "listed", "P-old", "yes"),
        step("produce", "kafka-console-producer", *BOOTSTRAP, "--topic", "P-t", "--sync", *PRODUCE, stdin=RECORDS),
        step(
            "produce-old", "kafka-console-producer", *BOOTSTRAP, "--topic", "P-old", "--sync", *PRODUCE, stdin=RECORDS
        ),
        read_in_group("consume-t", "P-t"),
        read_in_group("consume-old", "P-old"),
        step("join", "join", "P-g", "P-t"),
        groups("delete-offsets-consumed", "--delete-offsets", "--group", "P-g", "--topic", "P-t"),
        groups("delete-offsets-no-longer-consumed", "--delete-offsets", "--group", "P-g", "--topic", "P-old"),
        groups("describe-live", "--describe", "--group", "P-g", "--offsets"),
        step("leave", "leave"),
    ],
    "transactions": [
        *create(1),
        step("open", "open", "P-tx", "P-t"),
        step("list", "kafka-transactions", *BOOTSTRAP, "list"),
        step("describe-open", "kafka-transactions", *BOOTSTRAP, "describe", "--transactional-id", "P-tx"),
        step("commit", "commit"),
        step("settle", "sleep", "1000"),  # Kafka completes a commit after answering it
        step("describe-committed", "kafka-transactions", *BOOTSTRAP, "describe", "--transactional-id", "P-tx"),
        step("describe-missing", "kafka-transactions", *BOOTSTRAP, "describe", "--transactional-id", "P-missing"),
    ],
    # A group only an open transaction's offsets are kept of: listed, deleted, and then the
    # transaction's commit writes no offset of it.
    "group-with-pending-offsets": [
        *create(1),
        # --sync: the records are stored before the step ends (the tool closes its producer only
        # in its shutdown hook, which is not run here)
        step("produce", "kafka-console-producer", *BOOTSTRAP, "--topic", "P-t", "--sync", *PRODUCE, stdin=RECORDS),
        step("open", "open", "P-tx", "P-t"),
        step("offsets", "offsets", "P-g", "P-t", "1"),
        groups("list-pending", "--list", "--state", "Empty"),
        groups("describe-pending", "--describe", "--group", "P-g"),
        groups("delete-pending", "--delete", "--group", "P-g"),
        step("commit", "commit"),
        step("settle", "sleep", "1000"),  # Kafka completes a commit after answering it
        groups("describe-after-commit", "--describe", "--group", "P-g"),
        groups("list-after-commit", "--list"),
    ],
}
# Steps whose lines come in an order the broker does not promise (records of several partitions).
UNORDERED = {
    "consume",
    "consume-t",
    "consume-old",
    "consume-after-reset",
    "list",
    "list-empty",
    "list-pending",
    "list-after-commit",
}

# What varies whatever the broker, each with its mask: ids the clients or brokers draw, the
# broker's address and node id (in the tools' columns that show it), times.
MASKS: list[tuple[str, str]] = [
    (r"\b(console-consumer-\d+|consumer-P-g-\d+)-[0-9a-f-]{36}", "<member>"),
    (r"\b(console-consumer-\d+|consumer-P-g-\d+)\b", "<client>"),
    (r"127\.0\.0\.1:\d+\s+\(\d+\)", "<broker>"),
    (r"(Leader|Replicas|Isr): \d+", r"\1: <node>"),
    # kafka-transactions: list's coordinator and producer id; describe's coordinator, producer
    # id, and the open transaction's start time and duration
    (r"^(P-tx)\s+\d+\s+\d+", r"\1 <node> <producer>"),
    (r"^\d+(\s+P-tx)\s+\d+(\s+\d+\s+\w+\s+\d+)\s+\d+\s+\d+", r"<node>\1 <producer>\2 <time> <time>"),
    (r"^\d+(\s+P-tx)\s+\d+", r"<node>\1 <producer>"),
]


def normalized(name: str, ran: dict[str, Any], prefix: str) -> dict[str, Any]:
    """A step's status and output lines, the run's prefix as ``P``, masked, whitespace runs as one
    space; only lines that name the run (``P-``) or name nothing of another run's."""
    lines = []
    for line in (ran["out"] + ran["err"]).replace(prefix, "P").splitlines():
        for pattern, mask in MASKS:
            line = re.sub(pattern, mask, line)
        line = " ".join(line.split())
        if line and not line.startswith(("at ", "... ")) and not _another_run(line):  # no stack frames
            lines.append(line)
    return {"status": ran["status"], "lines": sorted(lines) if name in UNORDERED else lines}


def _another_run(line: str) -> bool:
    """A line of a listing that names another test's topic, group or transaction (the run's own
    are named P-...; a console consumer's group is another scenario's)."""
    first = line.split(" ")[0]
    other = bool(re.fullmatch(r"[\w.-]+", first)) and "-" in first and not first.startswith(("P-", "__"))
    return other or first == "<client>"


@pytest.fixture(scope="module")
def halfmq_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("kafka-tools")) as broker:
        yield broker


@pytest.fixture(scope="module")
def tools_program() -> list[str]:
    return java_program(PROGRAM, kafka.TOOLS_ARTIFACTS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_tools_print_what_they_print_against_the_real_kafka(
    scenario: str, halfmq_kafka: EmbeddedBroker, kafka_peer: RunningPeer, tools_program: list[str]
) -> None:
    steps = SCENARIOS[scenario]
    judge_steps("kafka-tools", scenario, "kafka-tools", tools_program, steps, normalized, halfmq_kafka.kafka_bootstrap,
                kafka_peer.endpoints["bootstrap"])  # fmt: skip
