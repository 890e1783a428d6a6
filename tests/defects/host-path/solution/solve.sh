#!/bin/sh
# Reference solution: add up the numbers.
mkdir -p /app/out && awk '{ s += $1 } END { print s }' /app/numbers.txt > /app/out/sum.txt
