#!/usr/bin/env bash
# Queries/s, latency and CPU per query of the embedded DNS server (`dns_server` sink) against
# Knot DNS and pdns_server answering the same names, on loopback, in the same run: ROUNDS
# interleaved rounds of (ours, knot, pdns), each a DURATION-second dnsperf run at full speed
# (100 queries in flight) and a paced run (RATE queries/s, every latency recorded) for
# p50/p99 and the server's CPU per answered query. dnsperf shares the 2 cores, so full-speed
# throughput is bound by the load generator; CPU per query at the paced rate is the fair
# comparison.
#
#   bench/dns/dnsperf.sh [ROUNDS] [DURATION]   (after cargo build --profile dist)
#   DNSSEC=1 bench/dns/dnsperf.sh [ROUNDS] [DURATION]
#   BIN=path/to/health-orchestrator bench/dns/dnsperf.sh ...   (another build: an A/B)
#
# With DNSSEC=1 every query carries the DO bit and every server signs: ours online with
# one ECDSA P-256 key (`dnssec keygen`), Knot with its default policy (ECDSA P-256 KSK +
# ZSK, the zone signed when loaded, NSEC), pdns_server with `pdnsutil secure-zone` (ECDSA
# P-256, signed online, signature and packet caches); a fourth server, `plain`, is ours
# without `dnssec`, answering the same DO queries unsigned: the cost of signing.
#
# Every server holds api.bench.test and www.bench.test with three A records; the query mix
# is 80% A of those two names, 10% AAAA (NODATA), 10% a missing name (NXDOMAIN). pdns runs
# with its defaults (gsqlite3 backend, packet cache on), Knot with its defaults from a zone file. The orchestrator's endpoints are three
# loopback addresses nothing listens on, so it publishes all three (fail-open) and its
# probes stay on loopback. Needs dnsperf, knot, pdns-server, pdns-backend-sqlite3 and
# sqlite3 (Debian packages; bash .ci/test installs all but dnsperf).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. bench/dns/common.sh
ROUNDS=${1:-3}
DURATION=${2:-10}
RATE=${RATE:-40000}
OURS_PORT=5391
PDNS_PORT=5392
KNOT_PORT=5393
PLAIN_PORT=5394
DNSSEC=${DNSSEC:-0}
BIN=${BIN:-target/dist/health-orchestrator}
[[ -x $BIN ]] || { echo "build first: cargo build --profile dist" >&2; exit 1; }
command -v dnsperf >/dev/null || { echo "dnsperf is missing (apt-get install dnsperf)" >&2; exit 1; }
[[ -x /usr/sbin/pdns_server ]] || { echo "pdns_server is missing (apt-get install pdns-server)" >&2; exit 1; }
[[ -x /usr/sbin/knotd ]] || { echo "knotd is missing (apt-get install knot)" >&2; exit 1; }
WORK=$(mktemp -d)
PIDS=()
declare -A PID_OF
trap 'kill "${PIDS[@]}" 2>/dev/null; rm -rf "$WORK"' EXIT

ours_config "127.0.0.1:$OURS_PORT" "127.0.0.1:0" >"$WORK/ours.toml"
DO_FLAG=()
SERVERS=(ours knot pdns)
if [[ $DNSSEC == 1 ]]; then
  DO_FLAG=(-D)
  SERVERS=(ours plain knot pdns)
  sed -e "s/:$OURS_PORT/:$PLAIN_PORT/" "$WORK/ours.toml" >"$WORK/plain.toml"
  $BIN dnssec keygen --zone bench.test --out "$WORK/keys" >/dev/null 2>&1
  echo "dnssec = { keys = \"$WORK/keys\" }" >>"$WORK/ours.toml"
fi
SCHEMA=/usr/share/doc/pdns-backend-sqlite3/schema.sqlite3.sql
sqlite3 "$WORK/pdns.sqlite3" <"$SCHEMA"
{
  echo "INSERT INTO domains (name, type) VALUES ('bench.test', 'NATIVE');"
  echo "INSERT INTO records (domain_id, name, type, content, ttl, auth) VALUES (1, 'bench.test', 'SOA', 'ns1.bench.test hostmaster.bench.test 1 3600 600 604800 5', 30, 1);"
  echo "INSERT INTO records (domain_id, name, type, content, ttl, auth) VALUES (1, 'bench.test', 'NS', 'ns1.bench.test', 30, 1);"
  for name in api www; do
    for ip in 127.0.0.21 127.0.0.22 127.0.0.23; do
      echo "INSERT INTO records (domain_id, name, type, content, ttl, auth) VALUES (1, '$name.bench.test', 'A', '$ip', 30, 1);"
    done
  done
} | sqlite3 "$WORK/pdns.sqlite3"
cat >"$WORK/pdns.conf" <<EOF
launch=gsqlite3
gsqlite3-database=$WORK/pdns.sqlite3
local-address=127.0.0.1
local-port=$PDNS_PORT
socket-dir=$WORK
guardian=no
daemon=no
disable-syslog=yes
write-pid=no
EOF
if [[ $DNSSEC == 1 ]]; then
  echo "gsqlite3-dnssec=yes" >>"$WORK/pdns.conf"
  pdnsutil --config-dir="$WORK" secure-zone bench.test >/dev/null 2>&1 \
    || { echo "pdnsutil secure-zone failed" >&2; exit 1; }
fi
mkdir -p "$WORK/knot"
bench_zone >"$WORK/knot/bench.test.zone"
cat >"$WORK/knot.conf" <<EOF
server:
    listen: 127.0.0.1@$KNOT_PORT
    rundir: $WORK/knot
database:
    storage: $WORK/knot
zone:
  - domain: bench.test
    storage: $WORK/knot
    file: bench.test.zone
$([[ $DNSSEC == 1 ]] && echo "    dnssec-signing: on")
log:
  - target: stderr
    any: warning
EOF
query_mix >"$WORK/queries.txt"

$BIN run --config "$WORK/ours.toml" --log-format json >"$WORK/ours.log" 2>&1 &
PIDS+=($!) PID_OF[ours]=$!
/usr/sbin/pdns_server --config-dir="$WORK" --config-name= >"$WORK/pdns.log" 2>&1 &
PIDS+=($!) PID_OF[pdns]=$!
/usr/sbin/knotd -c "$WORK/knot.conf" >"$WORK/knot.log" 2>&1 &
PIDS+=($!) PID_OF[knot]=$!
PORTS=($OURS_PORT $PDNS_PORT $KNOT_PORT)
if [[ $DNSSEC == 1 ]]; then
  $BIN run --config "$WORK/plain.toml" --log-format json >"$WORK/plain.log" 2>&1 &
  PIDS+=($!) PID_OF[plain]=$!
  PORTS+=($PLAIN_PORT)
fi
for port in "${PORTS[@]}"; do
  for _ in $(seq 100); do
    [[ $(dig @127.0.0.1 -p $port +short api.bench.test A | wc -l) == 3 ]] && break
    sleep 0.1
  done
  [[ $(dig @127.0.0.1 -p $port +short api.bench.test A | wc -l) == 3 ]] || {
    echo "the server on port $port does not answer; logs in $WORK" >&2; cat "$WORK"/*.log >&2; exit 1; }
  if [[ $DNSSEC == 1 && $port != "$PLAIN_PORT" ]]; then
    for _ in $(seq 100); do
      [[ $(dig @127.0.0.1 -p $port +dnssec api.bench.test A) == *RRSIG* ]] && break
      sleep 0.1
    done
    [[ $(dig @127.0.0.1 -p $port +dnssec api.bench.test A) == *RRSIG* ]] || {
      echo "the server on port $port does not sign; logs in $WORK" >&2; cat "$WORK"/*.log >&2; exit 1; }
  fi
done

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# One line per run: name round qps p50_us p99_us cpu_us_per_query
measure() {
  local name=$1 port=$2 round=$3 pid=${PID_OF[$1]}
  local qps
  qps=$(dnsperf "${DO_FLAG[@]}" -s 127.0.0.1 -p "$port" -d "$WORK/queries.txt" -l "$DURATION" -q 100 2>&1 \
    | sed -n 's/.*Queries per second: *\([0-9.]*\).*/\1/p')
  local t0 t1
  t0=$(cpu_ticks "$pid")
  dnsperf "${DO_FLAG[@]}" -s 127.0.0.1 -p "$port" -d "$WORK/queries.txt" -l "$DURATION" -Q "$RATE" -v 2>/dev/null \
    >"$WORK/paced.txt"
  t1=$(cpu_ticks "$pid")
  awk '/^> /{print $NF * 1e6}' "$WORK/paced.txt" | sort -n >"$WORK/lat.txt"
  local n p50 p99 answered cpu
  n=$(wc -l <"$WORK/lat.txt")
  p50=$(sed -n "$(( n / 2 ))p" "$WORK/lat.txt")
  p99=$(sed -n "$(( n * 99 / 100 ))p" "$WORK/lat.txt")
  answered=$(sed -n 's/.*Queries completed: *\([0-9]*\).*/\1/p' "$WORK/paced.txt")
  cpu=$(awk -v t=$(( t1 - t0 )) -v hz="$(getconf CLK_TCK)" -v q="$answered" \
    'BEGIN { printf "%.2f", t / hz * 1e6 / q }')
  printf '%-5s %d %10.0f %8.0f %8.0f %8s\n' "$name" "$round" "$qps" "$p50" "$p99" "$cpu"
}

echo "name  round   queries/s  p50_us  p99_us  cpu_us/q   (paced at $RATE q/s: latency and CPU)"
declare -A PORT_OF=([ours]=$OURS_PORT [plain]=$PLAIN_PORT [knot]=$KNOT_PORT [pdns]=$PDNS_PORT)
for round in $(seq "$ROUNDS"); do
  for server in "${SERVERS[@]}"; do
    measure "$server" "${PORT_OF[$server]}" "$round"
  done
done
