#!/bin/bash
# run.sh BIN LABEL TENANT_SIZE [N]: `loadtest` with every gateway hanging for 10 s
# (loadtest/scenarios/hang-all.toml) at N (20,000) endpoints @ 1 s in tenants of
# TENANT_SIZE (0: one tenant), writing LABEL.txt, LABEL.json and LABEL.threads (each
# engine thread's CPU, user + system, in clock ticks, read once a second until the run
# ends); prints each thread name's CPU in seconds. LOADTEST names the harness (default
# the loadtest next to BIN). Run from this folder.
# The runs here, interleaved: for r in 1 2 3; do ./run.sh BEFORE base-$r 0; ./run.sh AFTER new-$r 0; done
bin=$1; label=$2; ts=$3; n=${4:-20000}
here=$(cd "$(dirname "$0")" && pwd)
out=$here/$label
"${LOADTEST:-$(dirname "$bin")/loadtest}" --engine $bin --endpoints $n --interval 1s --duration 40s --tenant-size $ts \
  --scenario "$here/../../../loadtest/scenarios/hang-all.toml" --json $out.json > $out.txt 2>&1 &
lt=$!
pid=
for i in $(seq 600); do
  pid=$(pgrep -f "^$bin run" | head -1); [ -n "$pid" ] && break; sleep 0.2; done
: > $out.threads
while kill -0 $lt 2>/dev/null; do
  if kill -0 $pid 2>/dev/null; then
    for t in /proc/$pid/task/*; do echo "$(cat $t/comm 2>/dev/null) $(awk '{print $14+$15}' $t/stat 2>/dev/null)"; done > $out.threads.tmp 2>/dev/null && mv $out.threads.tmp $out.threads
  fi
  sleep 1
done
wait $lt
awk '{a[$1]+=$2} END {for (k in a) print k, a[k]/100 " s"}' $out.threads | sort -k2 -n -r | head
grep -E "cpu_ms|detect_p|false|rss|empty" $out.txt
