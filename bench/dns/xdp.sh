#!/usr/bin/env bash
# CPU per answered query of the embedded DNS server with and without `xdp`, against Knot
# DNS with and without its XDP mode, each answering across a veth pair of its own from a
# network namespace where dnsperf runs: queries cross an interface whose driver runs the
# XDP program, as on a network card (loopback has no XDP driver). ROUNDS interleaved
# rounds of (ours-xdp, ours, knot-xdp, knot), each a DURATION-second paced run at RATE
# queries/s with every latency recorded.
#
#   bench/dns/xdp.sh [ROUNDS] [DURATION]   (as root, after cargo build --profile dist)
#
# Columns: p50/p99 latency as dnsperf saw it; the server process's CPU per answered query
# (user + system, /proc/PID/stat), as bench/dns/dnsperf.sh; and the whole machine's busy
# CPU per answered query (/proc/stat, dnsperf included), which also counts kernel work
# done outside any process (softirq in ksoftirqd): a path that moved work there instead
# of saving it would show here. Same names and query mix as dnsperf.sh. Needs dnsperf,
# knot and iproute2; addresses are 10.234.K.0/24 inside the pairs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. bench/dns/common.sh
ROUNDS=${1:-3}
DURATION=${2:-10}
RATE=${RATE:-40000}
BIN=${BIN:-target/dist/health-orchestrator}
[[ -x $BIN ]] || { echo "build first: cargo build --profile dist" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "run as root (network namespaces, XDP)" >&2; exit 1; }
command -v dnsperf >/dev/null || { echo "dnsperf is missing (apt-get install dnsperf)" >&2; exit 1; }
[[ -x /usr/sbin/knotd ]] || { echo "knotd is missing (apt-get install knot)" >&2; exit 1; }
WORK=$(mktemp -d)
NS=ho-xdp-bench-$$
PIDS=()
declare -A PID_OF ADDR_OF
SERVERS=(ours-xdp ours knot-xdp knot)
cleanup() {
  kill "${PIDS[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  for k in 1 2 3 4; do ip link delete "hxb$k" 2>/dev/null || true; done
  ip netns delete "$NS" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
ip netns add "$NS"
ip -n "$NS" link set lo up
for k in 1 2 3 4; do
  ip link add "hxb$k" type veth peer name "hxc$k"
  ip link set "hxc$k" netns "$NS"
  ip addr add "10.234.$k.1/24" dev "hxb$k"
  ip link set "hxb$k" up
  ip -n "$NS" addr add "10.234.$k.2/24" dev "hxc$k"
  ip -n "$NS" link set "hxc$k" up
  ADDR_OF[${SERVERS[$((k - 1))]}]=10.234.$k.1
done

API_PORT=9391
{
  ours_config 10.234.1.1:53 "127.0.0.1:$API_PORT"
  echo 'xdp = { interface = "hxb1" }'
} >"$WORK/ours-xdp.toml"
ours_config 10.234.2.1:53 127.0.0.1:0 >"$WORK/ours.toml"
mkdir -p "$WORK/knot"
bench_zone >"$WORK/knot/bench.test.zone"
knot_config() { # NAME LISTEN_ADDR [XDP_INTERFACE]
  mkdir -p "$WORK/$1"
  cat <<EOC
server:
    listen: $2@53
    rundir: $WORK/$1
$([[ -n ${3:-} ]] && printf 'xdp:\n    listen: %s@53\n' "$3")
database:
    storage: $WORK/$1
zone:
  - domain: bench.test
    storage: $WORK/knot
    file: bench.test.zone
log:
  - target: stderr
    any: warning
EOC
}
knot_config knot-xdp 10.234.3.1 hxb3 >"$WORK/knot-xdp.conf"
knot_config knot 10.234.4.1 >"$WORK/knot.conf"
query_mix >"$WORK/queries.txt"

for s in ours-xdp ours; do
  $BIN run --config "$WORK/$s.toml" --log-format json >"$WORK/$s.log" 2>&1 &
  PIDS+=($!) PID_OF[$s]=$!
done
for s in knot-xdp knot; do
  /usr/sbin/knotd -c "$WORK/$s.conf" >"$WORK/$s.log" 2>&1 &
  PIDS+=($!) PID_OF[$s]=$!
done
for s in "${SERVERS[@]}"; do
  addr=${ADDR_OF[$s]}
  for _ in $(seq 100); do
    [[ $(ip netns exec "$NS" dig @"$addr" +time=1 +tries=1 +short api.bench.test A | wc -l) == 3 ]] && break
    sleep 0.1
  done
  [[ $(ip netns exec "$NS" dig @"$addr" +time=1 +tries=1 +short api.bench.test A | wc -l) == 3 ]] || {
    echo "$s on $addr does not answer; logs in $WORK" >&2; cat "$WORK/$s.log" >&2; exit 1; }
done
for k in 1 3; do
  ip link show "hxb$k" | grep -q "prog/xdp" || { echo "no XDP program on hxb$k" >&2; exit 1; }
done

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

measure() { # NAME ROUND
  local name=$1 round=$2 pid=${PID_OF[$1]} addr=${ADDR_OF[$1]}
  local t0 t1 b0 b1
  t0=$(cpu_ticks "$pid") b0=$(busy_ticks)
  ip netns exec "$NS" dnsperf -s "$addr" -d "$WORK/queries.txt" -l "$DURATION" -Q "$RATE" -v \
    2>/dev/null >"$WORK/paced.txt"
  t1=$(cpu_ticks "$pid") b1=$(busy_ticks)
  awk '/^> /{print $NF * 1e6}' "$WORK/paced.txt" | sort -n >"$WORK/lat.txt"
  local n p50 p99 answered hz
  n=$(wc -l <"$WORK/lat.txt")
  p50=$(sed -n "$(( n / 2 ))p" "$WORK/lat.txt")
  p99=$(sed -n "$(( n * 99 / 100 ))p" "$WORK/lat.txt")
  answered=$(sed -n 's/.*Queries completed: *\([0-9]*\).*/\1/p' "$WORK/paced.txt")
  hz=$(getconf CLK_TCK)
  awk -v name="$name" -v round="$round" -v p50="$p50" -v p99="$p99" -v q="$answered" -v hz="$hz" \
    -v t=$(( t1 - t0 )) -v b=$(( b1 - b0 )) \
    'BEGIN { printf "%-8s %d %8d %7.0f %7.0f %9.2f %10.2f\n", name, round, q, p50, p99, t / hz * 1e6 / q, b / hz * 1e6 / q }'
}

echo "name    round answered  p50_us  p99_us  cpu_us/q  machine_us/q   (paced at $RATE q/s)"
for round in $(seq "$ROUNDS"); do
  for s in "${SERVERS[@]}"; do
    measure "$s" "$round"
  done
done
# The XDP path answered (not the sockets behind it): its count covers the paced runs.
curl -s "http://127.0.0.1:$API_PORT/metrics" | grep "^health_orchestrator_dns_xdp_answers_total"
