#!/bin/sh
# Hidden verifier: reward 0 first; 1 only when /app/out/sum.txt holds the sum (19).
export PATH=/opt/ridgeline/image/bin:/usr/bin:/bin
export PYTHONSAFEPATH=1 PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH PYTHONSTARTUP PYTHONHOME PYTEST_ADDOPTS PYTEST_PLUGINS
echo 0 > /logs/verifier/reward.txt
cd /tests || exit 0
got=$(tr -d ' \n' < /app/out/sum.txt 2>/dev/null)
if [ "$got" = "19" ]; then
  echo 1 > /logs/verifier/reward.txt
fi
