"""A client program written in Java (a conformance scenario, a benchmark): one source file, with
its client library and that library's dependencies fetched from Maven Central once (the same
cache as the real brokers'), compiled once per version of its text and run from its classes."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from halfmq_peers import maven


def java_program(source: Path, artifacts: Sequence[str]) -> list[str]:
    """The command that runs ``source`` with ``artifacts`` (``group:artifact:version``) on its
    classpath; one program may run with several versions of its client, each fetched apart."""
    versions = hashlib.sha256("\n".join(artifacts).encode()).hexdigest()[:8]
    classpath = maven.classpath(f"client-{source.stem}-{versions}", artifacts)
    return ["java", "-Xmx256m", "-cp", f"{compiled(source, artifacts, classpath)}{os.pathsep}{classpath}", source.stem]


def compiled(source: Path, artifacts: Sequence[str], classpath: str) -> Path:
    """The classes of ``source``, compiled the first time this text meets these artifacts: a run
    then starts in a tenth of a second, where Java's source launcher compiles for about 3 s (5 s
    of CPU) at every run. Concurrent test workers may both compile; the first one's classes stay."""
    digest = hashlib.sha256(source.read_bytes() + "\n".join(artifacts).encode()).hexdigest()[:16]
    target = maven.cache_dir() / "classes" / f"{source.stem}-{digest}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=target.parent, prefix=".building-"))
    javac = ["javac", "-d", str(building), "-cp", classpath, str(source)]
    built = subprocess.run(javac, capture_output=True, text=True)
    if built.returncode != 0:
        shutil.rmtree(building)
        raise RuntimeError(f"javac {source.name} failed:\n{built.stderr[-4000:]}")
    try:
        building.rename(target)
    except OSError:  # another worker's classes came first
        shutil.rmtree(building)
    return target
