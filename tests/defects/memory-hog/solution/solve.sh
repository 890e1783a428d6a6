#!/bin/sh
# Defect: holds 170 MB of a 256 MB limit.
python3 -c 'b = b"x" * (170 * 1024 * 1024); print(len(b))' >/dev/null || exit 1
mkdir -p /app/out && awk '{ s += $1 } END { print s }' /app/numbers.txt > /app/out/sum.txt
