#!/usr/bin/env bash
# A fault, to a BIND secondary's answer: the orchestrator's `dns_server` is the hidden
# primary of bench.test, BIND 9 `named` its secondary (TSIG, NOTIFY, IXFR). One endpoint
# (`m1`, a TCP check of a listener on 127.4.0.1) fails TRIALS times; from the moment its
# listener is killed to its address leaving the answer of `m.bench.test`, at the primary
# and at the secondary (each polled with dig every 5 ms). The bound the issue sets is the
# detection bound (interval + timeout x fall + fast_interval x (fall - 1) + 5 ms) + 100 ms.
#
#   bench/dns/secondary.sh [TRIALS]     (default 20; after cargo build --profile dist)
#
# Prints one line per trial and the p50/p99 of both; needs named (bind9), tsig-keygen, dig
# and python3. Everything on loopback.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
TRIALS=${1:-20}
BIN=target/dist/health-orchestrator
[[ -x $BIN ]] || { echo "build first: cargo build --profile dist" >&2; exit 1; }
for tool in /usr/sbin/named /usr/sbin/tsig-keygen dig python3; do
  command -v "$tool" >/dev/null || { echo "$tool is missing (Debian: bind9, dnsutils)" >&2; exit 1; }
done
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; kill "${LISTENER:-}" 2>/dev/null; rm -rf "$WORK"' EXIT
PRIMARY_PORT=18154 SECONDARY_PORT=18155 M1=127.4.0.1 M1_PORT=18156 OTHER=127.4.0.2
int_ms=200 timeout_ms=100 fast_ms=50 fall=2
bound_ms=$(( int_ms + timeout_ms * fall + fast_ms * (fall - 1) + 5 + 100 ))
/usr/sbin/tsig-keygen -a hmac-sha256 ho-xfr >"$WORK/key.conf"
SECRET=$(awk -F'"' '/secret/ { print $2 }' "$WORK/key.conf")
cat >"$WORK/ours.toml" <<EOF
[api]
listen = "127.0.0.1:0"
[defaults.check]
kind = "tcp"
port = $M1_PORT
interval = "${int_ms}ms"
timeout = "${timeout_ms}ms"
fast_interval = "${fast_ms}ms"
rise = 1
fall = $fall
[[endpoints]]
name = "m1"
address = "$M1"
[[endpoints]]
name = "other"
address = "$OTHER"
[[tenants]]
name = "m"
domains = ["m.bench.test"]
endpoints = ["m1", "other"]
sinks = ["dns"]
[sinks.dns]
kind = "dns_server"
listen = ["127.0.0.1:$PRIMARY_PORT"]
zones = ["bench.test"]
transfer = { notify = ["127.0.0.1:$SECONDARY_PORT"], allow = ["127.0.0.0/8"], tsig = { name = "ho-xfr", secret_file = "$WORK/key.conf" } }
EOF
cat >"$WORK/named.conf" <<EOF
options {
  directory "$WORK";
  listen-on port $SECONDARY_PORT { 127.0.0.1; };
  listen-on-v6 { none; };
  pid-file "$WORK/named.pid";
  session-keyfile "$WORK/session.key";
  managed-keys-directory "$WORK";
  recursion no;
  dnssec-validation no;
  notify no;
};
controls { };
key "ho-xfr" { algorithm hmac-sha256; secret "$SECRET"; };
server 127.0.0.1 { keys { "ho-xfr"; }; };
zone "bench.test" { type secondary; primaries { 127.0.0.1 port $PRIMARY_PORT key "ho-xfr"; }; file "$WORK/bench.test.db"; allow-notify { 127.0.0.0/8; }; };
EOF
listen() { # ADDRESS: a TCP listener on ADDRESS:M1_PORT (accepts and closes) until killed
  python3 -c "import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('$1', $M1_PORT)); s.listen(64)
while True: s.accept()[0].close()" &
  LISTENER=$!
}
listen "$OTHER"
PIDS+=($LISTENER)
listen "$M1"
$BIN run --config "$WORK/ours.toml" >"$WORK/ours.log" 2>&1 &
PIDS+=($!)
/usr/sbin/named -g -c "$WORK/named.conf" >"$WORK/named.log" 2>&1 &
PIDS+=($!)
has_m1() { dig +short +time=1 +tries=1 -p "$1" @127.0.0.1 m.bench.test A 2>/dev/null | grep -qx "$M1"; }
wait_until() { # PORT WANT(yes|no): seconds waited at most 10
  for _ in $(seq 2000); do
    if has_m1 "$1"; then [[ $2 == yes ]] && return 0; else [[ $2 == no ]] && return 0; fi
    sleep 0.005
  done
  echo "port $1 never answered m1 $2" >&2; for f in "$WORK"/*.log; do tail -n 20 "$f" >&2; done; exit 1
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
wait_until $PRIMARY_PORT yes
wait_until $SECONDARY_PORT yes
echo "trial  primary_ms  secondary_ms   (bound $bound_ms ms)"
: >"$WORK/primary" ; : >"$WORK/secondary"
for trial in $(seq "$TRIALS"); do
  kill "$LISTENER"; wait "$LISTENER" 2>/dev/null || true
  t0=$(now_ms) p="" s=""
  while [[ -z $p || -z $s ]]; do
    [[ -z $p ]] && ! has_m1 $PRIMARY_PORT && p=$(( $(now_ms) - t0 ))
    [[ -z $s ]] && ! has_m1 $SECONDARY_PORT && s=$(( $(now_ms) - t0 ))
    (( $(now_ms) - t0 > 10000 )) && { echo "trial $trial: no change within 10 s" >&2; exit 1; }
  done
  printf '%5d  %10d  %12d\n' "$trial" "$p" "$s"
  echo "$p" >>"$WORK/primary"; echo "$s" >>"$WORK/secondary"
  listen "$M1"
  wait_until $SECONDARY_PORT yes
done
pct() { sort -n "$1" | awk -v q="$2" '{ v[NR] = $1 } END { i = int(NR * q + 0.999); if (i < 1) i = 1; print v[i] }'; }
echo "primary:   p50 $(pct "$WORK/primary" 0.5) ms, p99 $(pct "$WORK/primary" 0.99) ms"
echo "secondary: p50 $(pct "$WORK/secondary" 0.5) ms, p99 $(pct "$WORK/secondary" 0.99) ms (bound $bound_ms ms)"
