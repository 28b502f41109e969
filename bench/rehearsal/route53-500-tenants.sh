#!/usr/bin/env bash
# "Will my Route53 zone with 500 tenants keep up when 10% of the gateways fail at once?"
# A rehearsal (loadtest --config) against moto's Route53 on loopback: 500 tenants of 10
# gateways each (5,000 endpoints at 1 s), one route53 sink limited to AWS's 5 requests/s,
# and the fail-10pct scenario. Prints the loadtest table and the Route53 API requests of the
# run (start-up, the fault burst, its recovery and the reconciles, counted in moto's request
# log); writes JSON and SVG next to $OUT.
#
#   bench/rehearsal/route53-500-tenants.sh [OUT_PREFIX]   (after cargo build --profile dist --workspace)
#   DELIVERY='delivery = { max_writes_per_second = 500, burst = 500 }' bench/rehearsal/...
#     (the r53 sink's delivery settings: the default 10 writes/s is one tenant per write)
#
# moto comes from the test command's virtualenv ($MOTO_SERVER, as bash .ci/test installs it).
set -euo pipefail
ulimit -n "$(ulimit -Hn)"   # one descriptor per gateway when the limit allows
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${1:-/tmp/rehearsal-route53}
MOTO=${MOTO_SERVER:-${XDG_CACHE_HOME:-$HOME/.cache}/health-orchestrator/py-tools-1/bin/moto_server}
PORT=5055
WORK=$(mktemp -d)
"$MOTO" -H 127.0.0.1 -p $PORT >"$WORK/moto.log" 2>&1 &
MOTO_PID=$!
trap 'kill $MOTO_PID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done
ZONE=$(curl -s -X POST "http://127.0.0.1:$PORT/2013-04-01/hostedzone" -H 'Content-Type: application/xml' \
  -H 'Authorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/route53/aws4_request, SignedHeaders=host, Signature=0' \
  --data '<?xml version="1.0" encoding="UTF-8"?><CreateHostedZoneRequest xmlns="https://route53.amazonaws.com/doc/2013-04-01/"><Name>rehearsal.test.</Name><CallerReference>rehearsal</CallerReference></CreateHostedZoneRequest>' \
  | sed -n 's|.*<Id>/hostedzone/\([^<]*\)</Id>.*|\1|p' | head -1)
[[ -n $ZONE ]] || { echo "moto did not create the zone; see $WORK/moto.log" >&2; exit 1; }

python3 - "$ZONE" "$PORT" "${DELIVERY:-}" >"$WORK/prod.toml" <<'PY'
import sys
zone, port, delivery = sys.argv[1], sys.argv[2], sys.argv[3]
print(f'''[defaults.check]
kind = "http"
path = "/healthz"
interval = "1s"

[sinks.r53]
kind = "route53"
hosted_zone_id = "{zone}"
zone = "rehearsal.test"
region = "us-east-1"
endpoint_url = "http://127.0.0.1:{port}"
max_requests_per_second = 5
{delivery}
''')
for t in range(500):
    for g in range(10):
        # The rehearsal maps these onto the farm; written as a real config would be.
        print(f'[[endpoints]]\nname = "t{t}-gw{g}"\naddress = "127.{200 + t // 250}.{t % 250}.{g + 1}"\nlabels = {{ tenant = "t{t}" }}\n')
    print(f'[[tenants]]\nname = "t{t}"\ndomains = ["t{t}.rehearsal.test"]\nselector = {{ tenant = "t{t}" }}\nsinks = ["r53"]\n')
PY
AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1 \
  target/dist/loadtest --config "$WORK/prod.toml" --scenario loadtest/scenarios/fail-10pct.toml \
  --duration 60s --json "$OUT.json" --svg "$OUT.svg"
lists=$(grep -c '"GET /2013-04-01/hostedzone/[^ ]*/rrset' "$WORK/moto.log" || true)
changes=$(grep -c '"POST /2013-04-01/hostedzone/[^ ]*/rrset' "$WORK/moto.log" || true)
echo "route53 requests in the run: $lists list pages, $changes change batches" | tee "$OUT.requests"
