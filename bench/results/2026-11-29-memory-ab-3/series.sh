#!/bin/bash
# series.sh: the runs of this folder, in the order they ran. $BINS holds ho-base (816483c),
# ho-new (4486fdc) and one loadtest (the harness of the earlier A/Bs, for both); ab.sh is
# ../2026-11-29-memory-ab/ab.sh (its header names the builds of that day's first A/B; the
# script is the same). Run from this folder.
ab=../2026-11-29-memory-ab/ab.sh
bash $ab one100k 3 --endpoints 100000 --interval 10s --duration 30s --tenant-size 100 --shared-listener >> one100k.log 2>&1
bash $ab hang10k 3 --endpoints 10000 --interval 1s --duration 20s --tenant-size 100 --scenario ../../../loadtest/scenarios/hang-all.toml >> hang10k.log 2>&1
bash $ab ring4-100k 1 --endpoints 100000 --interval 80s --duration 30s --tenant-size 100 --replicas 4 >> ring.log 2>&1
for b in new base; do
  HO_LIMITS__MAX_ENDPOINTS=2000000 timeout 1500 $BINS/loadtest --engine $BINS/ho-$b --endpoints 1000000 --interval 120s --duration 60s --tenant-size 100 --shared-listener --json one1m-$b.json > one1m-$b.txt 2>&1
  echo "one1m-$b: load $(cut -d' ' -f1-3 /proc/loadavg) | $(grep -E 'published all|rss_peak|false_trans|late_probe_p99|cpu_ms_per_1k|probes_per_sec' one1m-$b.txt | awk '{printf "%s ", $0}')" >> one1m.log
done
echo SERIES-DONE >> one1m.log
# Then: three more rounds at 100,000 (CPU per probe: the first three's medians were 1.035x
# apart, within their spread) and the idle process (the load test's engine at 10 endpoints).
bash $ab one100k-b 3 --endpoints 100000 --interval 10s --duration 30s --tenant-size 100 --shared-listener >> one100k.log 2>&1
bash $ab idle10 3 --endpoints 10 --interval 10s --duration 20s --tenant-size 100 --shared-listener >> idle.log 2>&1
# Then two more rounds of the ring (its first run's CPU per probe was 1.13x, one run each).
bash $ab ring4-100k-b 2 --endpoints 100000 --interval 80s --duration 30s --tenant-size 100 --replicas 4 >> ring.log 2>&1
