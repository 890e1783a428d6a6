#!/bin/sh
# Defect: a path that only exists on the author's machine.
export PATH=/opt/ridgeline/image/bin:/usr/bin:/bin
export PYTHONSAFEPATH=1 PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH PYTHONSTARTUP PYTHONHOME PYTEST_ADDOPTS PYTEST_PLUGINS
echo 0 > /logs/verifier/reward.txt
if [ "$(cat /app/out/sum.txt 2>/dev/null)" = "$(cat /home/alice/expected.txt 2>/dev/null || echo 19)" ]; then
  echo 1 > /logs/verifier/reward.txt
fi
