"""Hidden grader: exit 0 only when /app/out/sum.txt holds 19."""

import sys

try:
    with open("/app/out/sum.txt") as f:
        ok = f.read().strip() == "19"
except OSError:
    ok = False
sys.exit(0 if ok else 1)
