#!/bin/sh
# Defect: 6 s of a 10 s agent timeout.
sleep 6
mkdir -p /app/out && awk '{ s += $1 } END { print s }' /app/numbers.txt > /app/out/sum.txt
