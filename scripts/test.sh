#!/usr/bin/env bash
# Runs every test: installs the project with its dev extras into .venv (created if missing), checks that the
# generated protobuf code is current and that ruff and mypy are clean, then runs pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
.venv/bin/python scripts/gen_proto.py --check
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
