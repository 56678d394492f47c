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
# the cores that the tests bounding what the store takes under load want. Meanwhile the real
# brokers' jars, the Java client programs and the Go client's modules download, and the programs
# and the Go client compile into their caches, at a low priority, so that on a fresh machine no
# test waits on them. Its scenarios spread over the workers by client (tests/conftest.py groups
# them), not by file, and over four workers, not two: they spend half their time waiting on the
# brokers' timers.
nice -n 10 .venv/bin/python -m tests.conformance.fetch > .venv/fetch.log 2>&1 &
if command -v go >/dev/null; then
  (cd tests/conformance/programs/rmq_classic_go && go mod download && nice -n 10 go build -buildvcs=false -o /dev/null .) \
    > .venv/go-mod-download.log 2>&1 &
fi
# The three-minute disk soak mostly waits on its own steady load, so it runs beside the conformance
# suite, in a pytest of its own, rather than holding one of the first phase's two workers.
soak=tests/test_disk_bounds.py::test_a_steady_load_with_retention_keeps_the_data_directory_under_the_documented_bound
"${pytest[@]}" --ignore-glob='tests/test_conformance_*.py' --deselect "$soak"
wait
"${pytest[@]}" -n 0 "$soak" > .venv/soak.log 2>&1 &
soaking=$!
status=0
"${pytest[@]}" -n 4 --dist loadgroup tests/test_conformance_*.py || status=$?
wait "$soaking" || status=$?
cat .venv/soak.log
exit "$status"
