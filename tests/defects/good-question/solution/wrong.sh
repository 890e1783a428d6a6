#!/bin/sh
# A wrong answer: the sum instead of the count.
echo 19 > /logs/agent/answer.txt
