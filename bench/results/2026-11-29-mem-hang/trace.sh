#!/bin/bash
# trace.sh LOADTEST_PID OUT: until the load test exits, the engine child's VmRSS (KiB) every
# 50 ms (OUT: "time pid rss") and its resident memory by kind every second (OUT.kinds,
# smaps-classes.py), so the peak can be told apart: binary, arenas, brk heap, stacks.
lt=$1; out=$2; : > "$out"; : > "$out.kinds"
here=$(dirname "$0"); n=0
while kill -0 "$lt" 2>/dev/null; do
  for c in $(cat /proc/$lt/task/*/children 2>/dev/null); do
    r=$(awk '/VmRSS/{print $2}' /proc/$c/status 2>/dev/null)
    [ -n "$r" ] || continue
    echo "$(date +%s.%N) $c $r" >> "$out"
    if [ $((n % 20)) -eq 0 ]; then
      k=$(python3 "$here/smaps-classes.py" "$c" 2>/dev/null)
      t=$(ls /proc/$c/task 2>/dev/null | wc -l)
      [ -n "$k" ] && echo "$(date +%s.%N) threads=$t $k" >> "$out.kinds"
    fi
  done
  n=$((n + 1))
  sleep 0.05
done
