#!/bin/sh
# Defect: /tests/grade.py does not exist.
export PATH=/opt/ridgeline/image/bin:/usr/bin:/bin
export PYTHONSAFEPATH=1 PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH PYTHONSTARTUP PYTHONHOME PYTEST_ADDOPTS PYTEST_PLUGINS
echo 0 > /logs/verifier/reward.txt
if python3 -I /tests/grade.py; then
  echo 1 > /logs/verifier/reward.txt
fi
