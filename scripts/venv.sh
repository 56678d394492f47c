# Sourced by the set-up scripts: create .venv with Python 3.11+ if missing, install the project with the given extras.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
extras=$1
stamp=".venv/.installed-$extras-$(cat pyproject.toml | cksum | cut -d' ' -f1)"
if [ ! -f "$stamp" ]; then
  # uv fetches and installs the dependencies in parallel: on a fresh machine, in under half pip's time.
  # Unlike pip, uv leaves them uncompiled unless told: every Python process (Spark starts one per
  # streaming query) would then compile what it imports, where PYTHONDONTWRITEBYTECODE is set.
  .venv/bin/python -m pip install --quiet --disable-pip-version-check uv
  .venv/bin/uv pip install --quiet --compile-bytecode --python .venv/bin/python -e ".[$extras]"
  touch "$stamp"
fi
# The project's own modules too (an editable install is not compiled; stale files are skipped).
.venv/bin/python -m compileall -q -j 0 broker producer_sdk spark_consumer halfmq_proto halfmq_cli halfmq_testing \
  halfmq_peers > /dev/null
