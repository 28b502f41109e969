#!/usr/bin/env bash
# What pushed health costs: the orchestrator with N endpoints of kind `heartbeat` (ttl 3 s,
# checked every second), each pushing one heartbeat per second to its API over 16 kept
# connections (`heartbeatload`, paced evenly). CPU of the orchestrator's process over the
# window, per heartbeat received (its scheduled checks of those endpoints included: the whole
# cost of a pushing endpoint), its peak RSS, and the answer time the pushers saw.
#
#   bench/peers/heartbeat-cost.sh [--rounds R] [--window S] [--out DIR] N
#
# Prints one line per round and the medians; writes DIR/heartbeat-cost.jsonl. Needs a release
# build of the binary and of heartbeatload (cargo build --profile dist -p ho-loadtest), and what
# lib.sh needs. Every address is loopback (the API on 127.0.0.1; endpoints in 127.3.0.0/16
# receive nothing).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds=3 window=20 interval=1000 out="$repo/bench/results/$(date +%F)-heartbeats" sizes=()
while (( $# )); do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    [0-9]*) sizes+=("$1"); shift ;;
    *) echo "usage: $0 [--rounds R] [--window S] [--out DIR] N" >&2; exit 2 ;;
  esac
done
(( ${#sizes[@]} == 1 )) || { echo "one N" >&2; exit 2; }
n=${sizes[0]}
source "$repo/bench/peers/lib.sh"
load="$repo/target/dist/heartbeatload"
[[ -x $load ]] || { echo "build first: cargo build --profile dist -p ho-loadtest" >&2; exit 1; }
mkdir -p "$out"
results="$out/heartbeat-cost.jsonl"
warm=10
echo "bench-heartbeat-token" >"$state/token"
{
  printf '[api]\nlisten = "127.0.0.1:18090"\nheartbeat_token_file = "%s"\n' "$state/token"
  printf 'max_requests_per_second = 50\n\n[defaults.check]\nkind = "heartbeat"\nttl = "3s"\n'
  printf 'interval = "1s"\ntimeout = "500ms"\nfast_interval = "100ms"\nrise = 1\nfall = 2\n\n'
  ips "$n" | awk '{ printf "[[endpoints]]\nname = \"e%d\"\naddress = \"%s\"\n\n", NR, $1 }'
  printf '[[tenants]]\nname = "bench"\ndomains = ["api.bench.test"]\nsinks = ["local"]\n\n'
  printf '[sinks.local]\nkind = "hosts_file"\ndir = "%s"\n' "$state"
} >"$state/ours.toml"

for round in $(seq "$rounds"); do
  "$bin" run --config "$state/ours.toml" >"$state/ours.log" 2>&1 &
  peer=$!
  pids+=("$peer")
  for _ in $(seq 100); do curl -fsS --max-time 1 http://127.0.0.1:18090/healthz >/dev/null 2>&1 && break; sleep 0.1; done
  "$load" --api 127.0.0.1:18090 --count "$n" --seconds $(( warm + window + 2 )) \
    --token-file "$state/token" >"$state/load.json" &
  loader=$!
  sleep "$warm"
  hz=$(getconf CLK_TCK); c0=$(cpu_ticks "$peer")
  sleep "$window"
  c1=$(cpu_ticks "$peer")
  rss=$(awk '/^VmHWM/ { print $2 }' "/proc/$peer/status")
  up=$(curl -fsS http://127.0.0.1:18090/metrics | awk '/^health_orchestrator_healthy_nodes/ { print $2 }')
  wait "$loader"
  stop "$peer"
  python3 - "$n" "$round" "$window" $(( c1 - c0 )) "$hz" "$rss" "$up" "$state/load.json" <<'PY' >>"$results"
import json, sys
n, rnd, window, ticks, hz, rss, up, load = sys.argv[1:]
pushed = json.load(open(load))
beats = int(n) * int(window)  # one per endpoint per second over the window
cpu_s = int(ticks) / int(hz)
print(json.dumps({
    "n": int(n), "round": int(rnd), "window_s": int(window), "cpu_s": cpu_s,
    "cpu_us_per_heartbeat": round(cpu_s * 1e6 / beats, 2), "rss_mb_peak": round(int(rss) / 1024, 1),
    "healthy_at_end": float(up or 0), "pushed": pushed}))
PY
  tail -1 "$results" >&2
  sleep 2
done
python3 - "$results" "$n" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["n"] == int(sys.argv[2])]
cpu = [r["cpu_us_per_heartbeat"] for r in rows]
print(f"\n{int(sys.argv[2]):,} pushing endpoints, one heartbeat each per second, {len(rows)} rounds")
print(f"  CPU µs per heartbeat  {', '.join(f'{c:g}' for c in cpu)}  (median {statistics.median(cpu):.1f})")
print(f"  RSS peak MB           {', '.join(str(r['rss_mb_peak']) for r in rows)}")
print(f"  answered 200          {', '.join(str(r['pushed']['ok']) + '/' + str(r['pushed']['sent']) for r in rows)}")
print(f"  answer p50 / p99 µs   {', '.join(str(r['pushed']['answer_p50_us']) + ' / ' + str(r['pushed']['answer_p99_us']) for r in rows)}")
print(f"  healthy at the end    {', '.join(str(int(r['healthy_at_end'])) for r in rows)}")
PY
echo "raw: $results"
