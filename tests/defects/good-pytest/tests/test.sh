#!/bin/sh
# Hidden verifier: pytest on a copy of calc.py only, in isolated mode, no conftest.
export PATH=/opt/ridgeline/image/bin:/usr/bin:/bin
export PYTHONSAFEPATH=1 PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH PYTHONSTARTUP PYTHONHOME PYTEST_ADDOPTS PYTEST_PLUGINS
echo 0 > /logs/verifier/reward.txt
rm -rf /tmp/grade && mkdir -p /tmp/grade
cp /app/calc.py /tmp/grade/calc.py 2>/dev/null
cp /tests/check_calc.py /tmp/grade/check_calc.py
cd /tmp/grade || exit 0
if python3 -I -m pytest -q -p no:cacheprovider --noconftest -c /dev/null --rootdir=/tmp/grade check_calc.py; then
  echo 1 > /logs/verifier/reward.txt
fi
