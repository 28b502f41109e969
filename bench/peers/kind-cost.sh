#!/usr/bin/env bash
# What each check kind costs, in one run: the orchestrator probing N endpoints every
# INTERVAL_MS with one kind at a time (the order rotates per round), each measured over the
# same window: CPU per 1,000 probes (utime+stime of the process, all threads), RSS peak, the
# share of the schedule probed, and how late probes started (p99 of
# probe_start_delay_seconds between two scrapes). No peer takes part: HAProxy has no gRPC or
# DNS health check, and the blackbox exporter probes when scraped rather than on a schedule;
# probe-cost.sh compares HTTP and HTTPS with HAProxy.
#
#   bench/peers/kind-cost.sh [--rounds R] [--window S] [--interval-ms I] [--out DIR] [N] [VARIANT...]
#
# VARIANTs (default all): http, http-keep (reuse_connection), tcp, grpc, grpc-keep
# (reuse_connection: one HTTP/2 connection per target), dns (UDP). Targets: the nginx farm of
# lib.sh (HTTP on 18080, gRPC health over h2c on 18082) and dnsmasq answering
# health.bench.test on 18053, every address of 127.3.0.0/16 (it listens on the loopback
# interface only and answers from the address asked). Probes are counted by the
# orchestrator's probes_total (only its own results are measured here).
#
# Prints one table and writes DIR/kind-cost.jsonl. Needs what probe-cost.sh needs, and
# dnsmasq (Debian: dnsmasq-base).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds=3 window=20 interval=1000 out="$repo/bench/results/$(date +%F)-kinds" sizes=() variants=()
while (( $# )); do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --interval-ms) interval="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    [0-9]*) sizes+=("$1"); shift ;;
    http|http-keep|tcp|grpc|grpc-keep|dns) variants+=("$1"); shift ;;
    *) echo "usage: $0 [--rounds R] [--window S] [--interval-ms I] [--out DIR] [N] [VARIANT...]" >&2; exit 2 ;;
  esac
done
(( ${#sizes[@]} )) || sizes=(10000)
(( ${#sizes[@]} == 1 )) || { echo "one N per run" >&2; exit 2; }
(( ${#variants[@]} )) || variants=(http http-keep tcp grpc grpc-keep dns)
n=${sizes[0]}
command -v dnsmasq >/dev/null || { echo "dnsmasq is missing (Debian: dnsmasq-base)" >&2; exit 1; }
source "$repo/bench/peers/lib.sh"
mkdir -p "$out"
results="$out/kind-cost.jsonl"
dns_port=18053 api="http://127.0.0.1:18090"

dns_up() {
  dnsmasq --keep-in-foreground --no-resolv --no-hosts --no-negcache --port "$dns_port" \
    --interface lo --pid-file="$state/dnsmasq.pid" --address=/health.bench.test/192.0.2.1 \
    --dns-forward-max=10000 --cache-size=0 --log-facility="$state/dnsmasq.log" &
  pids+=("$!")
  for _ in $(seq 50); do
    dig +short +time=1 +tries=1 -p "$dns_port" @127.3.0.1 health.bench.test 2>/dev/null | grep -q 192.0.2.1 && return
    sleep 0.1
  done
  echo "dnsmasq did not answer: $(cat "$state/dnsmasq.log" 2>/dev/null)" >&2; exit 1
}

# The check table of VARIANT.
check_of() {
  case "$1" in
    http) printf 'kind = "http"\nport = %s\npath = "/healthz"\n' "$farm_port" ;;
    http-keep) printf 'kind = "http"\nport = %s\npath = "/healthz"\nreuse_connection = true\n' "$farm_port" ;;
    tcp) printf 'kind = "tcp"\nport = %s\n' "$farm_port" ;;
    grpc) printf 'kind = "grpc"\nport = %s\n' "$grpc_port" ;;
    grpc-keep) printf 'kind = "grpc"\nport = %s\nreuse_connection = true\n' "$grpc_port" ;;
    dns) printf 'kind = "dns"\nport = %s\nquery_name = "health.bench.test"\nanswer_contains = "192.0.2.1"\n' "$dns_port" ;;
  esac
}

start_variant() { # VARIANT
  {
    printf '[api]\nlisten = "127.0.0.1:18090"\n\n[defaults.check]\n'
    check_of "$1"
    printf 'interval = "%sms"\ntimeout = "%sms"\n' "$interval" $(( interval / 2 < 1000 ? interval / 2 : 1000 ))
    printf 'fast_interval = "%sms"\nrise = 1\nfall = 2\n\n' $(( interval / 10 > 50 ? interval / 10 : 50 ))
    ips "$n" | awk '{ printf "[[endpoints]]\nname = \"e%d\"\naddress = \"%s\"\n\n", NR, $1 }'
    printf '[[tenants]]\nname = "bench"\ndomains = ["api.bench.test"]\nsinks = ["local"]\n\n'
    printf '[sinks.local]\nkind = "hosts_file"\ndir = "%s"\n' "$state"
  } >"$state/ours.toml"
  "$bin" run --config "$state/ours.toml" >"$state/ours.log" 2>&1 &
  peer=$!
}

scrape() { curl -fsS --max-time 5 "$api/metrics"; }
# Probes counted so far (0 while the API is not up yet).
probes_now() { { scrape 2>/dev/null || true; } | awk '/^health_orchestrator_probes_total/ { s += $2 } END { print s + 0 }'; }

# Steady: the engine's own count reaches 95 % of the schedule over one second (at most
# 60 s), then 5 s more before the window opens.
wait_steady() {
  local want=$(( n * 1000 / interval * 95 / 100 )) a b
  for _ in $(seq 60); do
    a=$(probes_now); sleep 1; b=$(probes_now)
    (( b - a >= want )) && { sleep 5; return; }
    kill -0 "$peer" 2>/dev/null || { echo "the engine exited: $(tail -5 "$state/ours.log")" >&2; exit 1; }
  done
  echo "$variant: below 95 % of schedule after 60 s; measuring anyway" >&2
}

measure() { # VARIANT ROUND
  variant=$1
  start_variant "$1"
  pids+=("$peer")
  wait_steady
  local c0 c1 hz rss
  hz=$(getconf CLK_TCK)
  scrape >"$state/before.txt"; c0=$(cpu_ticks "$peer")
  sleep "$window"
  scrape >"$state/after.txt"; c1=$(cpu_ticks "$peer")
  rss=$(awk '/^VmHWM/ { print $2 }' "/proc/$peer/status")
  stop "$peer"
  python3 - "$1" "$n" "$2" "$interval" "$window" $(( c1 - c0 )) "$hz" "$rss" "$state/before.txt" "$state/after.txt" <<'PY' >>"$results"
import json, re, sys
variant, n, rnd, interval, window, ticks, hz, rss, before, after = sys.argv[1:]
n, interval, window = int(n), int(interval), int(window)

def read(path):
    probes, results, buckets = 0.0, {}, []
    for line in open(path):
        m = re.match(r'health_orchestrator_probes_total\{result="([^"]+)"\} (\S+)', line)
        if m:
            results[m[1]] = float(m[2]); probes += float(m[2])
        m = re.match(r'health_orchestrator_probe_start_delay_seconds_bucket\{le="([^"]+)"\} (\S+)', line)
        if m:
            buckets.append((float(m[1]), float(m[2])))
    return probes, results, buckets

p0, r0, b0 = read(before)
p1, r1, b1 = read(after)
probes = p1 - p0
failed = {k: v - r0.get(k, 0) for k, v in r1.items() if k != "ok" and v - r0.get(k, 0) > 0}
delta = [(le, c - dict(b0).get(le, 0)) for le, c in b1]
total = delta[-1][1] if delta else 0
late = None
if total > 0:
    rank, lower, below = 0.99 * total, 0.0, 0.0
    for le, c in delta:
        if c >= rank:
            late = lower if le == float("inf") else lower + (le - lower) * ((rank - below) / max(c - below, 1e-9))
            break
        lower, below = le, c
cpu_s = int(ticks) / int(hz)
print(json.dumps({
    "variant": variant, "n": n, "round": int(rnd), "interval_ms": interval, "window_s": window,
    "probes": int(probes), "of_schedule": round(probes / (n * window * 1000 / interval), 4),
    "failed": failed, "cpu_s": cpu_s, "cpu_ms_per_1k_probes": round(cpu_s * 1e6 / max(probes, 1), 2),
    "late_p99_ms": None if late is None else round(late * 1000, 3),
    "rss_mb_peak": round(int(rss) / 1024, 1)}))
PY
  tail -1 "$results" >&2
  sleep 3
}

farm_up
dns_up
for round in $(seq "$rounds"); do
  # Rotate the order so no variant always runs first (or after the same one).
  k=$(( (round - 1) % ${#variants[@]} ))
  for variant in "${variants[@]:k}" "${variants[@]:0:k}"; do measure "$variant" "$round"; done
done
python3 - "$results" "$n" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["n"] == int(sys.argv[2])]
http = {r["round"]: r["cpu_ms_per_1k_probes"] for r in rows if r["variant"] == "http"}
keep = {r["round"]: r["cpu_ms_per_1k_probes"] for r in rows if r["variant"] == "http-keep"}
print(f"\n{int(sys.argv[2]):,} endpoints @ {rows[0]['interval_ms']} ms")
print(f"  {'variant':10} {'CPU ms / 1k probes':28} {'median':>7} {'/http':>6} {'/http-keep':>10} {'late p99 ms':>12} {'RSS MB':>7} {'of schedule':>12}")
for v in dict.fromkeys(r["variant"] for r in rows):
    at = sorted((r for r in rows if r["variant"] == v), key=lambda r: r["round"])
    cpu = [r["cpu_ms_per_1k_probes"] for r in at]
    ratio = lambda base: statistics.median(r["cpu_ms_per_1k_probes"] / base[r["round"]] for r in at if r["round"] in base) if any(r["round"] in base for r in at) else float("nan")
    late = statistics.median(r["late_p99_ms"] for r in at if r["late_p99_ms"] is not None)
    print(f"  {v:10} {', '.join(f'{c:g}' for c in cpu):28} {statistics.median(cpu):7.1f} {ratio(http):6.2f} {ratio(keep):10.2f} "
          f"{late:12.2f} {statistics.median(r['rss_mb_peak'] for r in at):7.1f} {min(r['of_schedule'] for r in at):12.3f}")
    failed = [r["failed"] for r in at if r["failed"]]
    if failed:
        print(f"    failed probes: {failed}")
PY
echo "raw: $results"
