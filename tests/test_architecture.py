"""The module boundaries of docs/architecture.md, read from the source: the front ends reach the
store only through services, and the core knows nothing of a wire format, a front end or Spark."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BROKER = Path(__file__).resolve().parents[1] / "broker"
FRONT_ENDS = ("grpc_api", "http_api", "kafka_api", "remoting", "rocketmq_api", "rocketmq")
CORE = ("store", "transaction")
# What the core must not import: the front ends, and the libraries of wire formats and of Spark.
NOT_IN_CORE = (
    *(f"broker.{name}" for name in FRONT_ENDS),
    "grpc",
    "google.protobuf",
    "halfmq_proto",
    "fastapi",
    "starlette",
    "kafka",
    "pyspark",
)


def imports(path: Path) -> set[str]:
    """Every module (and name from a module) ``path`` imports, at any depth of its code. The
    broker's imports are absolute."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module, f"{path}: a relative import"
            found.update({node.module, *(f"{node.module}.{alias.name}" for alias in node.names)})
    return found


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def sources(*packages: str) -> list[Path]:
    return sorted(path for package in packages for path in (BROKER / package).rglob("*.py"))


@pytest.mark.parametrize("path", sources(*FRONT_ENDS), ids=lambda p: str(p.relative_to(BROKER)))
def test_a_front_end_reaches_the_store_only_through_services(path: Path) -> None:
    assert not [name for name in imports(path) if within(name, ("broker.store",))]


@pytest.mark.parametrize("path", sources(*CORE), ids=lambda p: str(p.relative_to(BROKER)))
def test_the_core_knows_no_front_end_wire_format_or_spark(path: Path) -> None:
    assert not [name for name in imports(path) if within(name, NOT_IN_CORE)]


def test_the_checks_read_imports_of_both_forms_inside_functions_too() -> None:
    found = imports(BROKER / "grpc_api" / "convert.py")
    assert {"pyarrow", "broker.model.QueueColumns"} <= found  # pyarrow is imported inside its functions
