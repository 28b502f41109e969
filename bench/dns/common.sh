# What the DNS benches share, sourced by dnsperf.sh and xdp.sh: every server holds
# api.bench.test and www.bench.test with the same three A records, and every run asks the
# same mix (80 % A of those names, 10 % AAAA (NODATA), 10 % a missing name (NXDOMAIN)).

# The orchestrator's config: a `dns_server` sink answering on LISTEN (ADDR:PORT), its API on
# API (ADDR:PORT), and three endpoints on loopback addresses nothing listens on, so it
# publishes all three (fail-open) and its probes stay on loopback.
ours_config() { # LISTEN API
  cat <<EOC
[api]
listen = "$2"
[defaults.check]
kind = "tcp"
port = 9
interval = "5s"
[[endpoints]]
name = "a"
address = "127.0.0.21"
[[endpoints]]
name = "b"
address = "127.0.0.22"
[[endpoints]]
name = "c"
address = "127.0.0.23"
[[tenants]]
name = "bench"
domains = ["api.bench.test", "www.bench.test"]
sinks = ["dns"]
ttl = "30s"
[sinks.dns]
kind = "dns_server"
listen = ["$1"]
zones = ["bench.test"]
EOC
}

# The same names as a zone file, for Knot DNS.
bench_zone() {
  printf '$ORIGIN bench.test.\n$TTL 30\n@ SOA ns1 hostmaster 1 3600 600 604800 5\n@ NS ns1\n'
  for name in api www; do
    for ip in 127.0.0.21 127.0.0.22 127.0.0.23; do printf '%s A %s\n' "$name" "$ip"; done
  done
}

# The query mix, as dnsperf reads it.
query_mix() {
  for _ in $(seq 4); do echo "api.bench.test A"; echo "www.bench.test A"; done
  echo "api.bench.test AAAA"
  echo "missing.bench.test A"
}
