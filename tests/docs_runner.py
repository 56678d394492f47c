"""Run the code blocks of a Markdown page as a reader would paste them, in order, in one folder.

A fenced block's language says what it is: ``python`` runs as a script, ``sh`` in bash (``-euo
pipefail``), ``text`` is output or a synopsis and is not run. Any other language is an error, so
no block goes untested by accident. An HTML comment on the line before a fence changes that:

- ``<!-- run: skip: REASON -->``: not run; the reason says what runs it instead, or why not.
- ``<!-- run: background "READY" -->``: started and left running (a broker) until the page ends,
  once its output shows READY.
- ``<!-- run: file NAME -->``: written to NAME in the folder (a module, a test file, an ini).
- ``<!-- run: expect "TEXT" -->``: run, and its output must contain TEXT.

The folder holds links to the repository's top-level entries (``.venv``, ``scripts``, ...), as a
clone would, and receives what the blocks write. Blocks run with the virtualenv's python by its
path, with the virtualenv off PATH and no PYSPARK_PYTHON, as for a reader who did not activate it.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"
RUN, NOT_RUN = {"python", "sh"}, {"text"}
_FENCE = re.compile(r"^```(\S*)\s*$")
_DIRECTIVE = re.compile(r"^<!-- run: (?P<verb>skip|background|file|expect)(?P<rest>.*?)\s*-->$")
# Not linked: what the tour writes, and what building a wheel writes beside the sources.
_TOUR_OUTPUTS = {
    ".git", "data", "ckpt", "ckpt-payments", "totals.db", "orders-parquet", "build", "dist", "halfmq.egg-info",
}  # fmt: skip
BLOCK_TIMEOUT = 600


class BlockFailed(AssertionError):
    """A block exited non-zero, timed out, or lacked its expected output."""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    code: str
    verb: str | None = None
    argument: str = ""

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks with the directive before each; an unknown language is refused."""
    lines = page.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        start, language = i, fence.group(1)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        directive = _DIRECTIVE.match(lines[start - 1]) if start else None
        verb = directive.group("verb") if directive else None
        argument = directive.group("rest").strip().lstrip(":").strip() if directive else ""
        block = Block(page, start + 1, language, "\n".join(lines[start + 1 : end]) + "\n", verb, argument)
        if verb is None and language not in RUN | NOT_RUN:
            raise BlockFailed(f"{block.where()}: a ```{language} block must be python, sh or text, or be marked")
        if verb == "skip" and not argument:
            raise BlockFailed(f"{block.where()}: a skipped block says why")
        found.append(block)
        i = end + 1
    return found


def workspace(folder: Path) -> Path:
    """A folder that looks like a clone to the blocks: links to the repository's entries."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in ROOT.iterdir():
        if entry.name not in _TOUR_OUTPUTS and not (folder / entry.name).exists():
            (folder / entry.name).symlink_to(entry)
    return folder


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "VIRTUAL_ENV", "PYTHONPATH")}
    venv_bin = str(PYTHON.parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def run_page(page: Path, folder: Path) -> list[str]:
    """Run every block of ``page`` in order in ``folder``; return what was run, as places."""
    work, env = workspace(folder), environment()
    background: list[subprocess.Popen[bytes]] = []
    ran = []
    try:
        for number, block in enumerate(blocks(page)):
            if block.verb == "skip" or (block.verb is None and block.language in NOT_RUN):
                continue
            if block.verb == "file":
                (work / block.argument).write_text(block.code)
                continue
            command = _command(block, work / f"block-{number}.{'py' if block.language == 'python' else 'sh'}")
            if block.verb == "background":
                background.append(_start(block, command, work, env))
            else:
                _run(block, command, work, env)
            ran.append(block.where())
    finally:
        for process in background:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(30)
    return ran


def _command(block: Block, script: Path) -> list[str]:
    script.write_text(block.code)
    return [str(PYTHON), script.name] if block.language == "python" else ["bash", "-euo", "pipefail", script.name]


def _quoted(argument: str) -> str:
    (text,) = shlex.split(argument)
    return text


def _run(block: Block, command: list[str], work: Path, env: dict[str, str]) -> None:
    try:
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise BlockFailed(f"{block.where()}: still running after {BLOCK_TIMEOUT} s\n{exc.output}") from None
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise BlockFailed(f"{block.where()}: exit code {done.returncode}\n{output[-4000:]}")
    if block.verb == "expect" and _quoted(block.argument) not in output:
        raise BlockFailed(f"{block.where()}: no {block.argument} in its output\n{output[-4000:]}")


def _start(block: Block, command: list[str], work: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    log = work / f"background-{block.line}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    ready, deadline = _quoted(block.argument), time.monotonic() + 60
    while ready not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
            raise BlockFailed(f"{block.where()}: never printed {ready!r}\n{log.read_text()[-4000:]}")
        time.sleep(0.1)
    return process
