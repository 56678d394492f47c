"""A real broker's Java processes: started in a session of their own, awaited until they answer,
stopped by PID."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from halfmq_testing.embedded import free_port

__all__ = ["Jvm", "PeerFailed", "free_port", "wait_ready"]

# What RocketMQ and Kafka reach into on JDK 17 (RocketMQ's own start scripts pass these).
_OPENS = (
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
)
_PR_SET_PDEATHSIG = 1


class PeerFailed(Exception):
    """Raised when a real broker could not be fetched, started, or did not answer in time."""


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the thread that started it ends (its process
    dying included), so a test run killed outright leaves no broker behind. Start JVMs from a
    thread that lives as long as they should: the main thread."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Jvm:
    """One Java process, its output in ``workdir/<name>.log``."""

    def __init__(
        self,
        name: str,
        main_class: str,
        args: Sequence[str],
        *,
        classpath: str,
        heap_mb: int,
        workdir: Path,
        env: Mapping[str, str] | None = None,
        options: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.log = workdir / f"{name}.log"
        command = ["java", f"-Xms{heap_mb}m", f"-Xmx{heap_mb}m", *_OPENS, *options, "-cp", classpath, main_class]
        with self.log.open("ab") as out:
            self._process = subprocess.Popen(
                [*command, *args],
                cwd=workdir,
                env={**os.environ, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        self.pid = self._process.pid

    def alive(self) -> bool:
        return self._process.poll() is None

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM (the brokers' shutdown hooks flush and close), then SIGKILL after ``timeout``."""
        if not self.alive():
            return
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def wait_ready(ready: Callable[[], bool], jvms: Sequence[Jvm], *, timeout: float, what: str) -> None:
    """Poll ``ready()`` (an exception counts as not ready) until it is true. Raises PeerFailed,
    with the end of each log, when a process exits or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        dead = [jvm for jvm in jvms if not jvm.alive()]
        if dead:
            raise PeerFailed(f"{what}: {dead[0].name} exited\n{dead[0].tail()}")
        try:
            if ready():
                return
        except Exception:  # not answering yet: connection refused, a timeout, an error status
            pass
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {jvm.name}\n{jvm.tail(2000)}" for jvm in jvms)
            raise PeerFailed(f"{what}: not ready within {timeout:g} s\n{logs}")
        time.sleep(0.5)
