"""Judging a scenario: the outcome a client program records against halfmq and against the real
broker, compared field by field; a field that differs fails unless departures.toml lists it,
with its reason. With ``HALFMQ_PARITY_RESULTS`` set, every judgement is appended there as a
JSON line, from which ``python -m tests.conformance.parity`` writes docs/parity.md.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import tomllib
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = "HALFMQ_PARITY_RESULTS"


@dataclass(frozen=True)
class Difference:
    field: str
    halfmq: Any
    real: Any


@dataclass(frozen=True)
class Departure:
    """A field of a scenario's outcome where halfmq knowingly differs from the real broker."""

    protocol: str
    scenario: str
    field: str
    reason: str
    clients: tuple[str, ...] = ()  # none: every client

    def covers(self, protocol: str, scenario: str, client: str, field: str) -> bool:
        return (
            (self.protocol, self.scenario) == (protocol, scenario)
            and (field == self.field or field.startswith(f"{self.field}."))
            and (not self.clients or client in self.clients)
        )


@cache
def departures() -> tuple[Departure, ...]:
    listed = tomllib.loads((HERE / "departures.toml").read_text()).get("departure", [])
    return tuple(Departure(**{**entry, "clients": tuple(entry.get("clients", ()))}) for entry in listed)


def differences(halfmq: Any, real: Any, path: str = "") -> list[Difference]:
    """Where two outcomes differ: mappings field by field (a dotted path), anything else whole."""
    if isinstance(halfmq, Mapping) and isinstance(real, Mapping):
        found = []
        for key in sorted(set(halfmq) | set(real)):
            found += differences(halfmq.get(key), real.get(key), f"{path}.{key}" if path else str(key))
        return found
    return [] if halfmq == real else [Difference(path, halfmq, real)]


def judge(protocol: str, scenario: str, client: str, halfmq: Mapping[str, Any], real: Mapping[str, Any]) -> None:
    """Fail, naming each field, when the outcomes differ where no departure explains it."""
    found = differences(halfmq, real)
    explained = {
        d.field: next(x for x in departures() if x.covers(protocol, scenario, client, d.field))
        for d in found
        if any(x.covers(protocol, scenario, client, d.field) for x in departures())
    }
    if RESULTS in os.environ:
        line = {"protocol": protocol, "scenario": scenario, "client": client, "halfmq": halfmq, "real": real,
                "departures": [{"field": f, "reason": d.reason} for f, d in explained.items()]}  # fmt: skip
        with open(os.environ[RESULTS], "a") as out:
            fcntl.flock(out, fcntl.LOCK_EX)  # pytest-xdist's workers append to the same file
            out.write(json.dumps(line) + "\n")
    unexplained = [d for d in found if d.field not in explained]
    assert not unexplained, f"{protocol} {scenario} with {client} differs from the real broker:\n" + "\n".join(
        f"  {d.field}: halfmq {json.dumps(d.halfmq)}, real {json.dumps(d.real)}" for d in unexplained
    )


def outcome(command: Sequence[str], endpoint: str, prefix: str, scenario: str) -> dict[str, Any]:
    """What a scenario program printed last, run against ``endpoint``, with the run's ``prefix``
    in names replaced by ``P`` so that runs compare."""
    ran = subprocess.run([*command, endpoint, prefix, scenario], capture_output=True, text=True, timeout=240)
    assert ran.returncode == 0, f"{scenario} against {endpoint} failed:\n{ran.stderr[-4000:]}"
    found: dict[str, Any] = json.loads(ran.stdout.strip().splitlines()[-1].replace(prefix, "P"))
    return found


def judge_program(
    protocol: str, scenario: str, client: str, command: Sequence[str], prefix: str, halfmq: str, real: str
) -> None:
    """Run a scenario program against halfmq's endpoint and the real broker's at once, and judge."""
    with ThreadPoolExecutor(2) as both:
        ours = both.submit(outcome, command, halfmq, prefix, scenario)
        theirs = both.submit(outcome, command, real, prefix, scenario)
        judge(protocol, scenario, client, ours.result(), theirs.result())


Normalize = Callable[[str, dict[str, Any], str], dict[str, Any]]


def steps_outcome(
    command: Sequence[str], endpoint: str, prefix: str, steps: Sequence[Mapping[str, Any]], normalized: Normalize
) -> dict[str, Any]:
    """What a tools program (KafkaTools.java, MqAdmin.java) printed for each step, run against
    ``endpoint`` with ``P-`` in the steps made the run's ``prefix``, each step ``normalized``."""
    script = json.dumps(list(steps)).replace("P-", f"{prefix}-")
    ran = subprocess.run([*command, endpoint], input=script, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, f"the tools against {endpoint} failed:\n{ran.stderr[-4000:]}"
    outputs: dict[str, Any] = json.loads(ran.stdout.strip().splitlines()[-1])
    return {name: normalized(name, output, prefix) for name, output in outputs.items()}


def judge_steps(
    protocol: str, scenario: str, client: str, command: Sequence[str], steps: Sequence[Mapping[str, Any]],
    normalized: Normalize, halfmq: str, real: str,
) -> None:  # fmt: skip
    """Run a scenario's tool steps against halfmq's endpoint and the real broker's at once, and judge."""
    prefix = f"{scenario}-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(2) as both:
        ours = both.submit(steps_outcome, command, halfmq, prefix, steps, normalized)
        theirs = both.submit(steps_outcome, command, real, prefix, steps, normalized)
        judge(protocol, scenario, client, ours.result(), theirs.result())
