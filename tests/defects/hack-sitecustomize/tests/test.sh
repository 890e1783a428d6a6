#!/bin/sh
# Defect: PYTHONPATH includes the workspace.
export PATH=/opt/ridgeline/image/bin:/usr/bin:/bin
export PYTHONSAFEPATH=1 PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH PYTHONSTARTUP PYTHONHOME PYTEST_ADDOPTS PYTEST_PLUGINS
echo 0 > /logs/verifier/reward.txt
cd /tests || exit 0
if PYTHONPATH=/app python3 /tests/grade.py; then
  echo 1 > /logs/verifier/reward.txt
fi
