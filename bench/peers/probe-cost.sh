#!/usr/bin/env bash
# Probe cost against HAProxy, in one run: one nginx farm of N endpoints on loopback, HAProxy
# and the orchestrator probing it in turn (the order alternates per round), each measured
# over the same window. Probes are counted at the farm (nginx stub_status), so neither peer
# reports on itself; CPU is utime+stime of the peer's process (all threads) over the window;
# RSS is its peak (VmHWM). Both check every endpoint every INTERVAL_MS with fall 2 / rise 1
# (ours re-checks a failing endpoint after max(50, INTERVAL/10) ms; nothing fails here).
#
#   bench/peers/probe-cost.sh [--rounds R] [--window S] [--interval-ms I] [--tls MODE] [--out DIR] N...
#
# --tls fresh|resume checks an HTTPS farm (lib.sh says what each mode means); the results go
# to probe-cost-tls-MODE.jsonl.
#
# Prints one table per N with each round's CPU per 1,000 probes and the median of the per-round
# ratios, and writes DIR/probe-cost.jsonl (one line per peer and round; `peerplot
# DIR/probe-cost.jsonl --svg F` draws it). Needs nginx and haproxy (Debian: nginx-light
# haproxy), curl, python3 and a release build (cargo build --profile dist). Runs as root (it
# raises the open-file limit and the listen backlog); every address is in 127.3.0.0/16.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds=3 window=30 interval=1000 out="$repo/bench/results/$(date +%F)-peers" sizes=()
while (( $# )); do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --interval-ms) interval="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --tls) tls="$2"; shift 2 ;;
    [0-9]*) sizes+=("$1"); shift ;;
    *) echo "usage: $0 [--rounds R] [--window S] [--interval-ms I] [--tls MODE] [--out DIR] N..." >&2; exit 2 ;;
  esac
done
(( ${#sizes[@]} )) || sizes=(1000 10000)
source "$repo/bench/peers/lib.sh"
mkdir -p "$out"
results="$out/probe-cost.jsonl"
[[ ${tls:-off} != off ]] && results="$out/probe-cost-tls-$tls.jsonl"

# Steady: the farm sees at least 95 % of the schedule over one second (at most 60 s), then
# 5 s more before the window opens.
wait_steady() { # N
  local want=$(( $1 * 1000 / interval * 95 / 100 )) a b
  for _ in $(seq 60); do
    a=$(requests); sleep 1; b=$(requests)
    (( b - a - 1 >= want )) && { sleep 5; return; }
    kill -0 "$peer" 2>/dev/null || { echo "$name exited: $(tail -5 "$state/$name.log")" >&2; exit 1; }
  done
  echo "$name: below 95 % of schedule after 60 s; measuring anyway" >&2
}

measure() { # NAME N ROUND
  name=$1
  "start_$name" "$2"
  pids+=("$peer")
  wait_steady "$2"
  local r0 c0 r1 c1 hz rss
  hz=$(getconf CLK_TCK)
  r0=$(requests); c0=$(cpu_ticks "$peer")
  sleep "$window"
  r1=$(requests); c1=$(cpu_ticks "$peer")
  rss=$(awk '/^VmHWM/ { print $2 }' "/proc/$peer/status")
  stop "$peer"
  python3 - "$name" "$2" "$3" "$interval" "$window" $(( r1 - r0 - 1 )) $(( c1 - c0 )) "$hz" "$rss" "$version" <<'PY' >>"$results"
import json, sys
name, n, rnd, interval, window, probes, ticks, hz, rss, version = sys.argv[1:]
n, interval, window, probes = int(n), int(interval), int(window), int(probes)
cpu_s = int(ticks) / int(hz)
print(json.dumps({
    "peer": "ours" if name == "ours" else name, "n": n, "round": int(rnd),
    "interval_ms": interval, "window_s": window, "probes": probes,
    "of_schedule": round(probes / (n * window * 1000 / interval), 4),
    "cpu_s": cpu_s, "cpu_ms_per_1k_probes": round(cpu_s * 1e6 / max(probes, 1), 2),
    "rss_mb_peak": round(int(rss) / 1024, 1), "version": version}))
PY
  tail -1 "$results" >&2
  sleep 3
}

farm_up
for n in "${sizes[@]}"; do
  for round in $(seq "$rounds"); do
    if (( round % 2 )); then order=(haproxy ours); else order=(ours haproxy); fi
    for name in "${order[@]}"; do measure "$name" "$n" "$round"; done
  done
done
python3 - "$results" "$rounds" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for n in sorted({r["n"] for r in rows}):
    at = [r for r in rows if r["n"] == n]
    by = {(r["peer"], r["round"]): r for r in at}
    rounds = sorted({r["round"] for r in at if ("ours", r["round"]) in by and ("haproxy", r["round"]) in by})
    cpu = [by["ours", k]["cpu_ms_per_1k_probes"] / by["haproxy", k]["cpu_ms_per_1k_probes"] for k in rounds]
    rss = [by["ours", k]["rss_mb_peak"] / by["haproxy", k]["rss_mb_peak"] for k in rounds]
    fmt = lambda p, key: ", ".join(f'{by[p, k][key]:g}' for k in rounds)
    print(f"\n{n:,} endpoints @ {at[0]['interval_ms']} ms, {len(rounds)} rounds")
    print(f"  CPU ms / 1k probes  HAProxy {fmt('haproxy', 'cpu_ms_per_1k_probes')}  ours {fmt('ours', 'cpu_ms_per_1k_probes')}")
    print(f"  of schedule         HAProxy {fmt('haproxy', 'of_schedule')}  ours {fmt('ours', 'of_schedule')}")
    print(f"  RSS peak MB         HAProxy {fmt('haproxy', 'rss_mb_peak')}  ours {fmt('ours', 'rss_mb_peak')}")
    if rounds:
        print(f"  ours / HAProxy      CPU {statistics.median(cpu):.2f}x  RSS {statistics.median(rss):.2f}x  (medians of per-round ratios)")
PY
echo "raw: $results"
