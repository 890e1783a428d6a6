#!/usr/bin/env bash
# Installs what the tests need, then runs lint, format check, the type checker and the test suite.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -m slow -k sandbox`).
set -euo pipefail
cd "$(dirname "$0")/.."
RIDGELINE_EXTRAS="${RIDGELINE_EXTRAS:-dev,train}" bash scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff check";  ruff check src tests bench
echo "== ruff format"; ruff format --check src tests bench
echo "== mypy";        mypy
echo "== pytest"
# pytest exits 5 when it collects no tests: that fails this script like any other non-zero code.
pytest -q "$@"
