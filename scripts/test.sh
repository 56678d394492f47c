#!/usr/bin/env bash
# Run every check CI runs: lint, types, and the whole test suite, in the project's own virtualenv.
set -euo pipefail
source "$(dirname "$0")/venv.sh" dev,spark,rocketmq
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest -q -n auto --dist loadfile "$@"
