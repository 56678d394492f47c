#!/usr/bin/env bash
# End-to-end demo: a broker on its embedded SQLite store, transactional producers, a consumer.
set -euo pipefail
source "$(dirname "$0")/venv.sh" dev,spark,rocketmq
exec .venv/bin/python -m examples.demo "$@"
