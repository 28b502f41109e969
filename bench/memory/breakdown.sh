#!/bin/bash
# Per-target memory breakdown: one load-test run of the engine under heaptrack, the heap
# still live when the window ends sorted into bench/README "Memory"'s parts, per target.
#
#   bench/memory/breakdown.sh OUT_DIR LABEL [N] [INTERVAL] [DURATION]
#
# ENGINE (default target/release/health-orchestrator) and LOADTEST (default the loadtest
# next to it) name the binaries; TIMEOUT bounds the whole run (default 1800 s); KEEP, a
# directory, keeps the engine's config and log there (the config is what the config
# loader's peak is measured with); REPLICAS, 2 or more, runs a ring of that many engines
# (`loadtest --replicas`), each under heaptrack, and sorts each one's heap (columns
# LABEL-r0, LABEL-r1, ... in the order they joined). Writes
# OUT_DIR/LABEL.json (the load test's report), OUT_DIR/LABEL-stacks.txt.gz (the live
# heap's stacks) and OUT_DIR/LABEL-parts.md (the table, from parts.py), and the same two for the heap at its
# peak (LABEL-peak-stacks.txt.gz, LABEL-peak-parts.md). Compare builds
# with `parts.py N a=A-stacks.txt b=B-stacks.txt`. Defaults: 100,000 endpoints @ 30 s in
# tenants of 100 on one shared listener, a 30 s window: steady state, every target probed
# and published before the window opens.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?OUT_DIR}; label=${2:?LABEL}; n=${3:-100000}; interval=${4:-30s}; window=${5:-30s}
target=${CARGO_TARGET_DIR:-$here/../../target}
engine=${ENGINE:-$target/release/health-orchestrator}
loadtest=${LOADTEST:-$(dirname "$engine")/loadtest}
mkdir -p "$out"
profiles=$(mktemp -d)
trap 'rm -rf "$profiles"' EXIT
HT_REAL=$engine HT_OUT=$profiles/engine timeout "${TIMEOUT:-1800}" "$loadtest" \
    --endpoints "$n" --interval "$interval" --duration "$window" --tenant-size 100 \
    --shared-listener --engine "$here/heaptrack-engine.sh" --json "$out/$label.json" \
    ${KEEP:+--keep "$KEEP"} ${REPLICAS:+--replicas "$REPLICAS"} \
    > "$out/$label.txt"
# One profile per engine, named by its PID: started one after the other, so PID order is
# the order the replicas joined.
mapfile -t found < <(ls "$profiles"/engine.*.zst | sed 's/.*engine\.\([0-9]*\)\.zst/\1/' | sort -n)
columns=()
peaks=()
for i in "${!found[@]}"; do
    profile=$profiles/engine.${found[$i]}.zst
    name=$label
    [ "${#found[@]}" -gt 1 ] && name=$label-r$i
    # The profile's writer finishes once the killed engine's pipe closes.
    for _ in $(seq 1200); do
        kill -0 "$(cat "$profile.writer")" 2> /dev/null || break
        sleep 0.5
    done
    heaptrack_print -f "$profile" --print-flamegraph "$profiles/$name-stacks.txt" \
        --flamegraph-cost-type leaked > "$profiles/summary.txt"
    grep -E '^(peak heap memory|peak RSS|total memory leaked)' "$profiles/summary.txt" \
        > "$out/$name-heaptrack-summary.txt" || true
    gzip -c "$profiles/$name-stacks.txt" > "$out/$name-stacks.txt.gz"
    columns+=("$name=$profiles/$name-stacks.txt")
    # The heap at its peak (heaptrack's second pass: each stack's bytes at the moment the
    # whole heap was largest), which sets the run's RSS peak when it is above the live heap.
    heaptrack_print -f "$profile" --print-flamegraph "$profiles/$name-peak-stacks.txt" \
        --flamegraph-cost-type peak > /dev/null
    gzip -c "$profiles/$name-peak-stacks.txt" > "$out/$name-peak-stacks.txt.gz"
    peaks+=("$name=$profiles/$name-peak-stacks.txt")
done
python3 "$here/parts.py" "$n" "${columns[@]}" | tee "$out/$label-parts.md"
python3 "$here/parts.py" "$n" "${peaks[@]}" | tee "$out/$label-peak-parts.md"
