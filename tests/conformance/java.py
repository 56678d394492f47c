"""A conformance program written in Java: one source file run by Java's source launcher, with
its client library and that library's dependencies fetched from Maven Central once (the same
cache as the real brokers')."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from halfmq_peers import maven


def java_program(source: Path, artifacts: Sequence[str]) -> list[str]:
    """The command that runs ``source`` with ``artifacts`` (``group:artifact:version``) on its classpath."""
    return ["java", "-Xmx256m", "-cp", maven.classpath(f"client-{source.stem}", artifacts), str(source)]
