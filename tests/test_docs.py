"""Every code block of README.md and docs/ runs as pasted (see ``tests/docs_runner.py`` for the
markers), against a real broker and a real local Spark where the page starts them; and the pages
speak to users, not of how the work went."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_runner import ROOT, BlockFailed, blocks, run_page

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
pytestmark = pytest.mark.e2e


@pytest.mark.timeout(1200)  # a page runs several Spark jobs, each up to a minute on a busy machine
@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_code_block_of_the_page_runs_as_pasted(page: Path, tmp_path: Path):
    ran = run_page(page, tmp_path / "work")
    print(f"{page.name}: ran {len(ran)} blocks: {', '.join(ran)}")


def test_the_readme_is_short_and_no_page_narrates_the_work():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300
    history = re.compile(r"[Ss]top [0-9]+|[Ii]ssue [0-9]+|DESIGN\.md")
    for page in PAGES:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            assert not history.search(line), f"{page.name}:{number}: {line}"


def test_the_operating_page_s_table_of_ports_names_every_port_flag_of_the_broker():
    shown = subprocess.run([sys.executable, "-m", "broker", "--help"], capture_output=True, text=True, check=True)
    flags = set(re.findall(r"--[a-z-]+-port\b", shown.stdout))
    assert {"--grpc-port", "--http-port", "--kafka-port"} <= flags  # the help was read
    page = (ROOT / "docs" / "operating.md").read_text()
    table = page[page.index("| port flag |") :].split("\n\n", 1)[0]
    assert flags <= set(re.findall(r"^\| `(--[a-z-]+)`", table, re.MULTILINE))


def test_the_producers_page_names_every_error_the_sdk_raises():
    import producer_sdk
    from producer_sdk import errors

    raised = {name for name, kind in vars(errors).items() if isinstance(kind, type) and issubclass(kind, Exception)}
    assert {"HalfmqError", "StorageFull", "ProducerFenced"} <= raised
    assert all(hasattr(producer_sdk, name) for name in raised)
    page = (ROOT / "docs" / "producers.md").read_text()
    named = set(re.findall(r"\b[A-Z][A-Za-z]+\b", page[page.index("## Errors") :].split("\n## ", 1)[0]))
    assert raised <= named


def test_the_parity_page_lists_every_departure_the_conformance_suite_allows():
    from tests.conformance.judge import departures

    page = (ROOT / "docs" / "parity.md").read_text()
    assert departures(), "the departures were read"
    for departure in departures():
        assert f"| {departure.scenario} | `{departure.field}` | {departure.reason} |" in page, departure


def write(folder: Path, text: str) -> Path:
    page = folder / "page.md"
    page.write_text(text)
    return page


@pytest.mark.parametrize(
    ("page", "complaint"),
    [
        ("```python\nraise SystemExit(3)\n```\n", "exit code 3"),
        ("```sh\nfalse | cat\n```\n", "exit code 1"),
        ('<!-- run: expect "COMMITTED" -->\n```python\nprint("PENDING")\n```\n', 'no "COMMITTED" in its output'),
        ("```yaml\na: 1\n```\n", "must be python, sh or text, or be marked"),
        ("<!-- run: skip -->\n```python\npass\n```\n", "says why"),
        ('<!-- run: background "ready" -->\n```sh\necho starting\n```\n', "never printed 'ready'"),
    ],
)
def test_a_broken_block_fails_its_page(tmp_path: Path, page: str, complaint: str):
    with pytest.raises(BlockFailed, match=re.escape(complaint)):
        run_page(write(tmp_path, page), tmp_path / "work")


def test_blocks_share_their_folder_and_files_are_written_where_the_next_block_finds_them(tmp_path: Path):
    page = write(
        tmp_path,
        "<!-- run: file orders.py -->\n```python\nTOTAL = 42\n```\n"
        '<!-- run: expect "42" -->\n```python\nfrom orders import TOTAL\nprint(TOTAL)\n```\n'
        "<!-- run: skip: shows a failure -->\n```python\nraise SystemExit(1)\n```\n"
        "```text\nnot code\n```\n",
    )
    assert [b.language for b in blocks(page)] == ["python", "python", "python", "text"]
    assert len(run_page(page, tmp_path / "work")) == 1
