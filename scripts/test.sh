#!/usr/bin/env bash
# Run every check CI runs: lint, types, and the whole test suite, in the project's own virtualenv.
# Arguments go to pytest (one run of what they name, e.g. a test file).
set -euo pipefail
source "$(dirname "$0")/venv.sh" dev,spark,rocketmq
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
pytest=(.venv/bin/python -m pytest -q -n auto --dist loadfile --durations=25)
if [ $# -gt 0 ]; then
  exec "${pytest[@]}" "$@"
fi
# The conformance suite runs after the rest, on its own: its real brokers and clients would take
# the cores that the tests bounding what the store takes under load want. Meanwhile the
# Go client's modules download (network, not cores), so its program only compiles then. Its
# scenarios spread over the workers by client (tests/conftest.py groups them), not by file, and
# over four workers, not two: they spend half their time waiting on the brokers' timers.
if command -v go >/dev/null; then
  (cd tests/conformance/programs/rmq_classic_go && go mod download) > .venv/go-mod-download.log 2>&1 &
fi
"${pytest[@]}" --ignore-glob='tests/test_conformance_*.py'
wait
"${pytest[@]}" -n 4 --dist loadgroup tests/test_conformance_*.py
