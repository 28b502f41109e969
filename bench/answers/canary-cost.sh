#!/usr/bin/env bash
# The answer canary's own cost at 10,000 names: one `run` process with an embedded DNS
# server holding 100 tenants x 100 names (two loopback gateways probed over TCP each
# second), measured with its canary on (every name every 10 s: 1,000 queries a second) and
# off, interleaved, ROUNDS times each; CPU from /proc/PID/stat over WINDOW seconds after a
# warm-up. The difference, over the queries counted in /metrics, is the canary's CPU per
# question, the embedded server's answer to it included.
#
#   bench/answers/canary-cost.sh [ROUNDS=3] [WINDOW=20]
set -euo pipefail
ROUNDS=${1:-3}
WINDOW=${2:-20}
BIN=${BIN:-target/release/health-orchestrator}
[ -x "$BIN" ] || cargo build --release -q
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
# Two gateways: TCP listeners on loopback.
python3 - <<'PY' &
import socket, threading
def serve(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen(512)
    while True:
        c, _ = s.accept(); c.close()
for p in (18401, 18402):
    threading.Thread(target=serve, args=(p,), daemon=True).start()
threading.Event().wait()
PY
config() {
  local canary=$1
  cat <<TOML
[api]
listen = "127.0.0.1:18480"
[defaults.check]
kind = "tcp"
interval = "1s"
timeout = "500ms"
[[endpoints]]
name = "a"
address = "127.0.0.1"
check = { port = 18401 }
[[endpoints]]
name = "b"
address = "127.0.0.2"
check = { port = 18402 }
[sinks.dns]
kind = "dns_server"
listen = ["127.0.0.1:18453"]
zones = ["bench.test"]
canary = { enabled = $canary, every = "10s", max_queries_per_second = 2000 }
TOML
  for t in $(seq 1 100); do
    printf '[[tenants]]\nname = "t%d"\nsinks = ["dns"]\ndomains = [' "$t"
    for n in $(seq 1 100); do printf '"n%d.t%d.bench.test"%s' "$n" "$t" "$([ "$n" = 100 ] || echo ,)"; done
    printf ']\n'
  done
}
config true > "$work/on.toml"
config false > "$work/off.toml"
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
queries() { curl -s "http://127.0.0.1:18480/metrics" | awk '/^health_orchestrator_canary_queries_total/ {s += $2} END {print s + 0}'; }
for round in $(seq 1 "$ROUNDS"); do
  for mode in on off; do
    "$BIN" run --config "$work/$mode.toml" >"$work/$mode.log" 2>&1 &
    pid=$!
    sleep 15
    c0=$(cpu $pid); q0=$(queries)
    sleep "$WINDOW"
    c1=$(cpu $pid); q1=$(queries)
    kill $pid; wait $pid 2>/dev/null || true
    echo "round $round canary $mode: $(awk -v c=$((c1 - c0)) -v t="$ticks" -v w="$WINDOW" 'BEGIN {printf "%.2f", 1000 * c / t / w}') millicores... $(( (q1 - q0) / WINDOW )) queries/s"
  done
done
