#!/bin/bash
# Every 2 s: time, pid, comm, parent's loadtest pid, VmHWM, VmRSS (kB) of each engine process.
while [ ! -e /work/ring-measure/all.done ]; do
  for p in $(pgrep -x 'ho-before|ho-after|ho-after2'); do
    echo "$(date +%s) $p $(cat /proc/$p/comm 2>/dev/null) $(awk '/VmHWM|VmRSS/{printf "%s ", $2}' /proc/$p/status 2>/dev/null)"
  done
  sleep 2
done
