#!/usr/bin/env bash
# Response rate limiting under a flood: dnsperf sends RATE queries/s for one name from
# 127.0.0.1 (one /24) to the embedded server with `rate_limit = { responses_per_second =
# RPS, slip = 2 }`, while a second dnsperf asks 100 queries/s from 127.0.1.1 (another /24).
# Counted by the server itself (/metrics): full answers, slipped (truncated) answers and
# drops of the flood, and what the second network got.
#
#   bench/dns/rrl.sh [RATE] [DURATION] [RPS]   (after cargo build --profile dist)
#
# Needs dnsperf (Debian). Every address is on loopback.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
RATE=${1:-100000}
DURATION=${2:-10}
RPS=${3:-100}
BIN=target/dist/health-orchestrator
[[ -x $BIN ]] || { echo "build first: cargo build --profile dist" >&2; exit 1; }
command -v dnsperf >/dev/null || { echo "dnsperf is missing (apt-get install dnsperf)" >&2; exit 1; }
WORK=$(mktemp -d)
PID=""
trap '[[ -n $PID ]] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT

cat >"$WORK/ours.toml" <<EOF
[api]
listen = "127.0.0.1:5396"
[defaults.check]
kind = "tcp"
port = 9
interval = "5s"
[[endpoints]]
name = "a"
address = "127.0.0.21"
[[tenants]]
name = "bench"
domains = ["api.bench.test", "www.bench.test"]
sinks = ["dns"]
[sinks.dns]
kind = "dns_server"
listen = ["127.0.0.1:5395"]
zones = ["bench.test"]
rate_limit = { responses_per_second = $RPS, slip = 2 }
EOF
echo "api.bench.test A" >"$WORK/flood.txt"
echo "www.bench.test A" >"$WORK/other.txt"
$BIN run --config "$WORK/ours.toml" >"$WORK/ours.log" 2>&1 &
PID=$!
for _ in $(seq 100); do
  [[ $(dig @127.0.0.1 -p 5395 +tcp +short www.bench.test A | wc -l) == 1 ]] && break
  sleep 0.1
done
counter() { curl -fsS http://127.0.0.1:5396/metrics | awk -v m="$1" 'index($1, m) == 1 { s += $2 } END { print s + 0 }'; }
before_all=$(counter 'health_orchestrator_dns_queries_total')
dnsperf -s 127.0.0.1 -p 5395 -a 127.0.1.1 -d "$WORK/other.txt" -l "$DURATION" -Q 100 >"$WORK/other.out" 2>&1 &
OTHER=$!
dnsperf -s 127.0.0.1 -p 5395 -d "$WORK/flood.txt" -l "$DURATION" -Q "$RATE" -c 4 -q 20000 -t 0.2 >"$WORK/flood.out" 2>&1
wait "$OTHER"
sleep 1.5 # serving threads add their counts at the latest when idle for 200 ms, or each second
sent=$(sed -n 's/.*Queries sent: *\([0-9]*\).*/\1/p' "$WORK/flood.out")
other_sent=$(sed -n 's/.*Queries sent: *\([0-9]*\).*/\1/p' "$WORK/other.out")
other_done=$(sed -n 's/.*Queries completed: *\([0-9]*\).*/\1/p' "$WORK/other.out")
answered=$(( $(counter 'health_orchestrator_dns_queries_total') - before_all ))
slipped=$(counter 'health_orchestrator_dns_rate_limited_total{action="slipped"}')
dropped=$(counter 'health_orchestrator_dns_rate_limited_total{action="dropped"}')
full=$(( answered - slipped - other_done ))
echo "flood from 127.0.0.1: $sent queries in ${DURATION} s ($(( sent / DURATION ))/s), limit $RPS/s"
echo "  full answers $full ($(( full / DURATION ))/s), slipped (TC) $slipped, dropped $dropped"
echo "second network 127.0.1.1: $other_done of $other_sent answered"
