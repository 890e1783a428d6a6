#!/bin/sh
# A wrong solution: counts the lines instead of adding them up.
mkdir -p /app/out && wc -l < /app/numbers.txt > /app/out/sum.txt
