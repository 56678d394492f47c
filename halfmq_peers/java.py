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

# A program that runs for seconds (a scenario) spends more CPU on C2's compiling and on parallel GC
# threads than they save: with C1 only and the serial collector, a classic Java scenario took
# 2.0 to 2.8 s of CPU instead of 3.5 to 4.4 s.
SHORT_RUN = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def java_program(source: Path, artifacts: Sequence[str], jvm_options: Sequence[str] = SHORT_RUN) -> list[str]:
    """The command that runs ``source`` with ``artifacts`` (``group:artifact:version``) on its
    classpath; one program may run with several versions of its client, each fetched apart.
    ``jvm_options``: the JVM's own, for a short run unless given."""
    versions = hashlib.sha256("\n".join(artifacts).encode()).hexdigest()[:8]
    classpath = maven.classpath(f"client-{source.stem}-{versions}", artifacts)
    classes = f"{compiled(source, artifacts, classpath)}{os.pathsep}{classpath}"
    return ["java", "-Xmx256m", *jvm_options, "-cp", classes, source.stem]


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
