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
  .venv/bin/python -m pip install --quiet --disable-pip-version-check uv
  .venv/bin/uv pip install --quiet --python .venv/bin/python -e ".[$extras]"
  touch "$stamp"
fi
