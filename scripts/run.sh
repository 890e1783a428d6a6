#!/usr/bin/env bash
# Installs everything, then runs Ridgeline's main job with its embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
RIDGELINE_EXTRAS="${RIDGELINE_EXTRAS:-dev,train}" bash scripts/bootstrap.sh
exec .venv/bin/ridgeline quickstart "$@"
