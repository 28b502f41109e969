#!/bin/bash
# scrape.sh BIN N: the engine's CPU (ms, from /proc) over N back-to-back `/metrics` scrapes,
# and over as much wall time again without scrapes (what probing costs meanwhile).
# Config: `bench/memory/gen-config.py 100000 cfg.toml 100 300000` (100,000 endpoints @ 300 s
# on loopback addresses nothing listens on, so probes are refused: little background), with
# `[api] listen = "127.0.0.1:18999"`; run from the folder holding cfg.toml. scrape.out: two
# rounds, 816483c (ho-new3) and 4486fdc (ho-new4) interleaved, 20 scrapes each.
bin=$1; n=$2
HO_LIMITS__MAX_ENDPOINTS=2000000 $bin run --config cfg.toml > engine.log 2>&1 &
pid=$!
for i in $(seq 1 60); do curl -s -o /dev/null http://127.0.0.1:18999/healthz && break; sleep 1; done
sleep 20
cpu() { awk '{print $14+$15}' /proc/$pid/stat; }
tck=$(getconf CLK_TCK)
c0=$(cpu); t0=$(date +%s.%N)
for i in $(seq 1 $n); do curl -s -o /dev/null http://127.0.0.1:18999/metrics; done
c1=$(cpu); t1=$(date +%s.%N)
sleep $(echo "$t1 - $t0" | bc)
c2=$(cpu)
size=$(curl -s http://127.0.0.1:18999/metrics | wc -c)
echo "$(basename $bin): scrapes=$n wall_s=$(echo "$t1 - $t0" | bc) cpu_scrapes_ms=$(( (c1-c0)*1000/tck )) cpu_idle_same_wall_ms=$(( (c2-c1)*1000/tck )) bytes=$size"
kill $pid; wait $pid 2>/dev/null
