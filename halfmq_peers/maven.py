"""Fetch a real broker's jars from Maven Central once: a pom of the broker's artifacts, and
Maven's ``dependency:copy-dependencies`` into a cached ``lib/`` (Maven's own ``~/.m2`` caches
the downloads too)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from halfmq_peers.jvm import PeerFailed

# Maven's start-up dominates a fetch that downloads nothing; a real download of a broker's
# jars is tens of MB.
_FETCH_TIMEOUT = 1200


def cache_dir() -> Path:
    """Where fetched brokers are kept: ``$HALFMQ_PEERS_CACHE``, else ``~/.cache/halfmq/peers``."""
    configured = os.environ.get("HALFMQ_PEERS_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "halfmq" / "peers"


def classpath(name: str, artifacts: Sequence[str]) -> str:
    """The Java classpath of ``artifacts`` (``group:artifact:version``) and their runtime
    dependencies, fetched into ``cache_dir()/name/lib`` unless a fetch of the same artifacts
    finished there before. Raises PeerFailed with Maven's output when Maven fails."""
    home = cache_dir() / name
    pom = _pom(name, artifacts)
    done = home / f".fetched-{hashlib.sha256(pom.encode()).hexdigest()[:16]}"
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one fetch at a time into lib/: another process may be at it
        if not done.exists():
            _fetch(name, home, pom)
        done.touch()
    return str(home / "lib" / "*")


def _fetch(name: str, home: Path, pom: str) -> None:
    """Copy the pom's dependencies into ``home/lib`` through Maven. Raises PeerFailed."""
    shutil.rmtree(home / "lib", ignore_errors=True)  # no jar of another set of artifacts stays
    (home / "pom.xml").write_text(pom)
    command = ["mvn", "-B", "-q", "dependency:copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory=lib"]
    try:
        fetched = subprocess.run(command, cwd=home, capture_output=True, text=True, timeout=_FETCH_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerFailed(f"fetching {name} through Maven: {exc}") from exc
    if fetched.returncode != 0:
        raise PeerFailed(f"fetching {name} through Maven failed:\n{(fetched.stdout + fetched.stderr)[-4000:]}")


def _pom(name: str, artifacts: Sequence[str]) -> str:
    dependencies = []
    for artifact in artifacts:
        group, artifact_id, version = artifact.split(":")
        dependencies.append(
            f"<dependency><groupId>{escape(group)}</groupId><artifactId>{escape(artifact_id)}</artifactId>"
            f"<version>{escape(version)}</version></dependency>"
        )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>halfmq.peers</groupId>
  <artifactId>{escape(name)}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>{"".join(dependencies)}</dependencies>
</project>
"""
