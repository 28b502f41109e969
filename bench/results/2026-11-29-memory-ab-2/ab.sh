#!/bin/bash
# ab.sh LABEL ROUNDS ARGS...: the load test against the engine before (ho-base, 44d610f) and
# after (ho-new) the memory cuts, one harness binary for both, interleaved (the order
# alternates each round); prints each run's summary and the load average at its end.
# Binaries in $BINS: ho-base, ho-new, loadtest.
label=$1; rounds=$2; shift 2
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="base new"; else order="new base"; fi
  for b in $order; do
    out=$label-$b-$r
    timeout 600 "$BINS/loadtest" --engine "$BINS/ho-$b" "$@" --json "$out.json" > "$out.txt" 2>&1
    echo "$out: load $(cut -d' ' -f1-3 /proc/loadavg) | $(grep -E 'published all|rss_peak|false_trans|late_probe_p99|cpu_ms_per_1k|probes_per_sec' "$out.txt" | awk '{printf "%s ", $0}')"
  done
done
