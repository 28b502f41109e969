#!/usr/bin/env bash
# A missed heartbeat, to the embedded DNS server's answer: the orchestrator with N pushing
# endpoints (heartbeatload keeps them alive) and one measured endpoint `m1` that pushes every
# 100 ms and then stops; from its last heartbeat (answered 200, as the pusher reports it) to
# `m1`'s address leaving
# the `dns_server` answer of `m.bench.test` (polled with dig every 5 ms), TRIALS times. The
# bound the issue sets is ttl + the detection bound (interval + timeout x fall + fast_interval
# x (fall - 1) + 5 ms, as the rehearsal computes it) + 20 ms.
#
#   bench/peers/heartbeat-detect.sh [--trials T] [--out DIR] [N]     (default 10 trials, N 1000)
#
# Writes DIR/heartbeat-detect.jsonl. Needs release builds of the binary and heartbeatload,
# dig, and what lib.sh needs. Everything on loopback: the API and DNS on 127.0.0.1, endpoint
# addresses in 127.3.0.0/16 and 127.4.0.1 (nothing is sent to them).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
trials=10 out="$repo/bench/results/$(date +%F)-heartbeats" sizes=() interval=1000
while (( $# )); do
  case "$1" in
    --trials) trials="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    [0-9]*) sizes+=("$1"); shift ;;
    *) echo "usage: $0 [--trials T] [--out DIR] [N]" >&2; exit 2 ;;
  esac
done
(( ${#sizes[@]} )) || sizes=(1000)
n=${sizes[0]}
source "$repo/bench/peers/lib.sh"
load="$repo/target/dist/heartbeatload"
[[ -x $load ]] || { echo "build first: cargo build --profile dist -p ho-loadtest" >&2; exit 1; }
command -v dig >/dev/null || { echo "dig is missing (Debian: dnsutils)" >&2; exit 1; }
mkdir -p "$out"
results="$out/heartbeat-detect.jsonl"
ttl_ms=1000 int_ms=200 timeout_ms=100 fast_ms=50 fall=2
bound_ms=$(( ttl_ms + int_ms + timeout_ms * fall + fast_ms * (fall - 1) + 5 + 20 ))
echo "bench-heartbeat-token" >"$state/token"
{
  printf '[api]\nlisten = "127.0.0.1:18090"\nheartbeat_token_file = "%s"\n\n' "$state/token"
  printf '[defaults.check]\nkind = "heartbeat"\nttl = "%sms"\ninterval = "%sms"\ntimeout = "%sms"\n' "$ttl_ms" "$int_ms" "$timeout_ms"
  printf 'fast_interval = "%sms"\nrise = 1\nfall = %s\n\n' "$fast_ms" "$fall"
  ips "$n" | awk '{ printf "[[endpoints]]\nname = \"e%d\"\naddress = \"%s\"\n\n", NR, $1 }'
  printf '[[endpoints]]\nname = "m1"\naddress = "127.4.0.1"\n\n'
  printf '[[tenants]]\nname = "m"\ndomains = ["m.bench.test"]\nendpoints = ["m1", "e1"]\nsinks = ["dns"]\n\n'
  printf '[[tenants]]\nname = "rest"\ndomains = ["rest.bench.test"]\nsinks = ["local"]\n\n'
  printf '[sinks.dns]\nkind = "dns_server"\nlisten = ["127.0.0.1:18054"]\nzones = ["bench.test"]\n\n'
  printf '[sinks.local]\nkind = "hosts_file"\ndir = "%s"\n' "$state"
} >"$state/ours.toml"
"$bin" run --config "$state/ours.toml" >"$state/ours.log" 2>&1 &
peer=$!
pids+=("$peer")
for _ in $(seq 100); do curl -fsS --max-time 1 http://127.0.0.1:18090/healthz >/dev/null 2>&1 && break; sleep 0.1; done
seconds=$(( trials * 8 + 30 ))
"$load" --api 127.0.0.1:18090 --count "$n" --seconds "$seconds" --token-file "$state/token" \
  >"$state/load.json" 2>"$state/load.err" &
pids+=("$!")
has_m1() { dig +short +time=1 +tries=1 -p 18054 @127.0.0.1 m.bench.test A | grep -qx 127.4.0.1; }
now_ns() { date +%s%N; }
for trial in $(seq "$trials"); do
  "$load" --api 127.0.0.1:18090 --prefix m --count 1 --every 100ms --seconds 3 \
    --token-file "$state/token" >"$state/m.json"
  t0=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["last_ok_unix_ns"])' "$state/m.json")
  # It was in the answer while pushing (checked right after the pusher ended).
  has_m1 || { echo "trial $trial: m1 was not published while pushing" >&2; exit 1; }
  while has_m1; do
    (( ($(now_ns) - t0) / 1000000 > 10000 )) && { echo "trial $trial: m1 still published after 10 s" >&2; exit 1; }
    sleep 0.005
  done
  ms=$(( ($(now_ns) - t0) / 1000000 ))
  echo "{\"n\": $n, \"trial\": $trial, \"detect_ms\": $ms, \"bound_ms\": $bound_ms}" | tee -a "$results" >&2
  sleep 1
done
python3 - "$results" "$n" "$bound_ms" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["n"] == int(sys.argv[2])]
ms = sorted(r["detect_ms"] for r in rows)
p99 = ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))]
print(f"\nlast heartbeat -> out of the dns_server answer, {len(ms)} trials beside {int(sys.argv[2]):,} pushing endpoints")
print(f"  p50 {statistics.median(ms):.0f} ms, p99 {p99} ms, max {ms[-1]} ms; bound {sys.argv[3]} ms")
PY
