#!/bin/bash
# ab.sh LABEL ROUNDS ARGS...: runs loadtest against base and new engines, alternating which goes first.
label=$1; rounds=$2; shift 2
cd /work/tgt-mem/meas
for r in $(seq 1 $rounds); do
  if [ $((r % 2)) -eq 1 ]; then order="base new"; else order="new base"; fi
  for b in $order; do
    bin=/work/tgt-mem/bins/ho-$b
    /work/tgt-mem/bins/loadtest --engine $bin "$@" --json $label-$b-$r.json > $label-$b-$r.txt 2>&1 &
    lt=$!
    ./rss-trace.sh $lt $label-$b-$r.rss &
    wait $lt
    echo "$label $b round $r: $(grep -E 'cpu_ms_per_1k|rss_peak|false_trans|probes_per_sec|late_probe_p99' $label-$b-$r.txt | awk '{printf "%s=%s ", $1, $2}')"
  done
done
