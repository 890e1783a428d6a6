#!/bin/sh
# Hidden verifier: the submitted answer must be 3.
export PATH=/opt/ridgeline/image/bin:/usr/bin:/bin
export PYTHONSAFEPATH=1 PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH PYTHONSTARTUP PYTHONHOME PYTEST_ADDOPTS PYTEST_PLUGINS
echo 0 > /logs/verifier/reward.txt
got=$(tr -d ' \n' < /logs/agent/answer.txt 2>/dev/null)
if [ "$got" = "3" ]; then
  echo 1 > /logs/verifier/reward.txt
fi
