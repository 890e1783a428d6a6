#!/bin/sh
# Reference solution: implement add.
printf 'def add(a, b):\n    return a + b\n' > /app/calc.py
