#!/usr/bin/env bash
# "Will my Cloudflare / Google Cloud DNS / Azure DNS / external-dns provider's zone with 500 tenants keep up when 10% of
# the gateways fail at once?" A rehearsal (loadtest --config) against the provider's API test
# server on loopback (ho-cloud-fake: the servers the integration tests use, written from each
# provider's API reference), with the provider's published request limit enforced by the
# server (Cloudflare: 1,200 requests per 5 minutes; Azure Resource Manager: writes in a
# bucket of 200 refilled at 10/s; Google publishes per-project quotas on the console, not a
# number, so its server does not throttle; an external-dns webhook provider stands for a DNS
# API of 5 requests a second with a burst of 10, IONOS's and Hetzner's order) and the sink on its defaults: 500 tenants of 10
# gateways (5,000 endpoints at 1 s) and the fail-10pct scenario (for Azure, the fault comes
# at 150 s, once the first publication is written). Prints the loadtest table and
# the provider API requests of the run (start-up, the burst, its recovery, the reconciles).
#
#   bench/rehearsal/cloud-500-tenants.sh cloudflare|google|azure|external_dns [OUT_PREFIX]
#     BIN_DIR=target/release to run another build's binaries
#     (after cargo build --profile dist -p health-orchestrator -p ho-loadtest -p ho-testkit
#      --features ho-testkit/cloud-api: the load test runs the orchestrator binary)
set -euo pipefail
ulimit -n "$(ulimit -Hn)"   # one descriptor per gateway when the limit allows
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PROVIDER=${1:?usage: cloud-500-tenants.sh cloudflare|google|azure|external_dns [OUT_PREFIX]}
OUT=${2:-/tmp/rehearsal-$PROVIDER}
PORT=5056
WORK=$(mktemp -d)
SCENARIO=loadtest/scenarios/fail-10pct.toml
DURATION=60s
case $PROVIDER in
  cloudflare) LIMIT=(--limit 4:1200) ;;
  azure)
    LIMIT=(--limit 10:200)
    # Azure DNS has no batch: the first publication of 500 tenants (a mark and an A set
    # each) is 1,000 writes, two minutes at the default pace. The fault waits for it.
    SCENARIO=$WORK/late-fault.toml
    sed 's/^at = "5s"/at = "150s"/' loadtest/scenarios/fail-10pct.toml >"$SCENARIO"
    DURATION=240s ;;
  google) LIMIT=() ;;
  external_dns) LIMIT=(--limit 5:10) ;;
  *) echo "unknown provider $PROVIDER" >&2; exit 2 ;;
esac
BIN_DIR=${BIN_DIR:-target/dist}
"$BIN_DIR"/ho-cloud-fake --provider "$PROVIDER" --listen 127.0.0.1:$PORT --zone rehearsal.test \
  --stats "$WORK/stats.json" --key-dir "$WORK" "${LIMIT[@]}" >"$WORK/fake.log" 2>&1 &
FAKE_PID=$!
trap 'kill $FAKE_PID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do grep -q "test server on" "$WORK/fake.log" 2>/dev/null && break; sleep 0.1; done
printf 'cf-test-token-1' >"$WORK/cf-token"
printf 's3cr3t~with/odd+chars=' >"$WORK/az-secret"

python3 - "$PROVIDER" "$PORT" "$WORK" >"$WORK/prod.toml" <<'PY'
import sys
provider, port, work = sys.argv[1], sys.argv[2], sys.argv[3]
url = f"http://127.0.0.1:{port}"
sink = {
    "cloudflare": f'''kind = "cloudflare"
zone_id = "0123456789abcdef0123456789abcdef"
zone = "rehearsal.test"
api_token_file = "{work}/cf-token"
url = "{url}/client/v4"''',
    "google": f'''kind = "google_cloud_dns"
project = "ho-test-project"
managed_zone = "tenant-a-io"
zone = "rehearsal.test"
credentials_file = "{work}/service-account.json"
url = "{url}/dns/v1"''',
    "azure": f'''kind = "azure_dns"
subscription_id = "00000000-1111-2222-3333-444444444444"
resource_group = "dns-rg"
zone = "rehearsal.test"
tenant_id = "55555555-6666-7777-8888-999999999999"
client_id = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
client_secret_file = "{work}/az-secret"
url = "{url}"
login_url = "{url}"''',
    "external_dns": f'''kind = "external_dns_webhook"
url = "{url}"''',
}[provider]
print(f'''[defaults.check]
kind = "http"
path = "/healthz"
interval = "1s"

[sinks.cloud]
{sink}
''')
for t in range(500):
    for g in range(10):
        # The rehearsal maps these onto the farm; written as a real config would be.
        print(f'[[endpoints]]\nname = "t{t}-gw{g}"\naddress = "127.{200 + t // 250}.{t % 250}.{g + 1}"\nlabels = {{ tenant = "t{t}" }}\n')
    print(f'[[tenants]]\nname = "t{t}"\ndomains = ["t{t}.rehearsal.test"]\nselector = {{ tenant = "t{t}" }}\nsinks = ["cloud"]\nttl = "60s"\n')
PY
"$BIN_DIR"/loadtest --config "$WORK/prod.toml" --scenario "$SCENARIO" \
  --duration "$DURATION" --json "$OUT.json" --svg "$OUT.svg"
echo "$PROVIDER API requests in the run: $(cat "$WORK/stats.json")" | tee "$OUT.requests"
