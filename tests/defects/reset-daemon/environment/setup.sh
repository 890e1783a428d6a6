#!/bin/sh
# Defect: a clock that keeps writing into the workdir.
nohup setsid sh -c 'while :; do date +%s%N > /app/clock.txt; sleep 0.01; done' >/dev/null 2>&1 &
sleep 0.1
