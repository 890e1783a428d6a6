#!/bin/sh
# Defect: right only when a random byte is even.
mkdir -p /app/out
if [ $(( $(od -An -N1 -tu1 /dev/urandom) % 2 )) -eq 0 ]; then
  awk '{ s += $1 } END { print s }' /app/numbers.txt > /app/out/sum.txt
else
  echo 0 > /app/out/sum.txt
fi
