#!/usr/bin/env bash
# Detection and recovery against HAProxy, in one run: the farm of probe-cost.sh with N
# endpoints, each peer in turn; TRIALS endpoints (the same, drawn once) fail one at a time
# and heal. From the 503 being visible at the farm to HAProxy's stats showing the server
# DOWN, and to the address leaving the hosts file the orchestrator writes (its whole path:
# probe, hysteresis, decision, sink write); the same for recovery. Same checks as
# probe-cost.sh (interval, fall 2 / rise 1; ours re-checks after max(50, INTERVAL/10) ms).
#
#   bench/peers/detect.sh [--trials T] [--interval-ms I] [--out DIR] N
#
# Prints one line per trial and a JSON summary per peer, written to DIR/detect.jsonl.
# Needs what probe-cost.sh needs.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
trials=10 interval=1000 out="$repo/bench/results/$(date +%F)-peers" sizes=()
while (( $# )); do
  case "$1" in
    --trials) trials="$2"; shift 2 ;;
    --interval-ms) interval="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    [0-9]*) sizes+=("$1"); shift ;;
    *) echo "usage: $0 [--trials T] [--interval-ms I] [--out DIR] N" >&2; exit 2 ;;
  esac
done
(( ${#sizes[@]} == 1 )) || { echo "usage: $0 [--trials T] [--interval-ms I] [--out DIR] N" >&2; exit 2; }
n=${sizes[0]}
source "$repo/bench/peers/lib.sh"
mkdir -p "$out"
idx=$(python3 -c "import random; random.seed($n); print(' '.join(str(i) for i in random.sample(range($n), min($trials, $n))))")

farm_up
for name in haproxy ours; do
  "start_$name" "$n"
  pids+=("$peer")
  kind=$([[ $name == ours ]] && echo hosts || echo haproxy)
  python3 "$repo/bench/peers/detect.py" --kind "$kind" --state "$state" --port "$farm_port" \
    --n "$n" $(printf -- '--idx %s ' $idx) | sed "s/\"peer\": \"$kind\"/\"peer\": \"$name\", \"n\": $n, \"version\": \"$version\"/" \
    | tee -a "$out/detect.jsonl"
  stop "$peer"
  sleep 3
done
