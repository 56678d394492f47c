#!/usr/bin/env bash
# Run the conformance suite against halfmq and the real brokers, then write docs/parity.md from it.
set -euo pipefail
source "$(dirname "$0")/venv.sh" dev,spark,rocketmq
results=$(mktemp)
trap 'rm -f "$results"' EXIT
HALFMQ_PARITY_RESULTS="$results" .venv/bin/python -m pytest -q -p no:cacheprovider -n 4 --dist loadgroup tests/test_conformance_*.py
.venv/bin/python -m tests.conformance.parity "$results" docs/parity.md
echo "wrote docs/parity.md"
