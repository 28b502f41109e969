#!/bin/bash
# gdb-probe.sh LOADTEST_PID OUT: once the engine's RSS passes 70 MiB, asks glibc through gdb
# for malloc_stats (per arena: system bytes vs in use; printed to the engine's stderr, the
# load test's engine log), trims with malloc_trim(0), and prints the RSS before and after.
lt=$1; out=$2
while kill -0 "$lt" 2>/dev/null; do
  for c in $(cat /proc/$lt/task/*/children 2>/dev/null); do
  r=$(awk '/VmRSS/{print $2}' /proc/$c/status 2>/dev/null)
  if [ -n "$r" ] && [ "$r" -gt 71680 ]; then
    { echo "rss before: $r KiB; threads:"; cat /proc/$c/task/*/comm | sort | uniq -c
      gdb -p "$c" -batch -ex 'call (void)malloc_stats()' -ex 'call (int)malloc_trim(0)' -ex 'call (void)malloc_stats()' 2>&1 | grep -v "^\[" | tail -3
      echo "rss after trim: $(awk '/VmRSS/{print $2}' /proc/$c/status) KiB"; } > "$out"
    cp /proc/$c/fd/2 "$out.stats" 2>/dev/null
    exit
  fi
  done
  sleep 0.05
done
