#!/bin/bash
# rss-trace.sh LOADTEST_PID OUT: samples the engine child's VmRSS every 50 ms until it exits.
lt=$1; out=$2; : > "$out"
while kill -0 "$lt" 2>/dev/null; do
  for c in $(cat /proc/$lt/task/*/children 2>/dev/null); do
    r=$(awk '/VmRSS/{print $2}' /proc/$c/status 2>/dev/null)
    [ -n "$r" ] && echo "$(date +%s.%N) $c $r" >> "$out"
  done
  sleep 0.05
done
