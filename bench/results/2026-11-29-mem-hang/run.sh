#!/bin/bash
# run.sh OUT BIN ARENAS ARGS...: one load test of engine BIN (MALLOC_ARENA_MAX=ARENAS, "-" for
# glibc's default) with the engine's RSS traced (trace.sh); prints the run's summary line.
# The load test binary is $BINS/loadtest (default /work/t-hang/bins).
out=$1; bin=$2; arenas=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
[ "$arenas" = - ] && arenas=
MH_REAL=$bin MH_ARENAS=$arenas "${BINS:-/work/t-hang/bins}/loadtest" --engine "$here/engine-env.sh" "$@" \
  --json "$out.json" > "$out.txt" 2>&1 &
lt=$!
"$here/trace.sh" $lt "$out.rss" &
wait $lt
echo "$out: load $(cut -d' ' -f1-3 /proc/loadavg) | $(grep -E 'rss_peak|false_trans|late_probe_p99|cpu_ms_per_1k|probes_per_sec' "$out.txt" | awk '{printf "%s ", $0}')"
