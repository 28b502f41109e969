# shellcheck shell=bash
# What the peer comparisons share (sourced by probe-cost.sh and detect.sh, after they set
# `repo`, `interval` and `sizes`): the release binary and the tools checked, a state
# directory removed at exit, the open-file limit and listen backlog raised (and the
# backlog restored), the nginx farm with its fail list, and how each peer starts. Every
# address is in 127.3.0.0/16: endpoint i (0-based) is 127.3.(i/250).(i%250+1).
# The farm also answers the gRPC health check in clear-text HTTP/2 on port 18082 (every
# address): a static SERVING answer with its `grpc-status` trailer, as a gRPC server sends it.
# `tls` (off, fresh, resume; default off) serves the farm over TLS (an ECDSA P-256
# certificate made here): `fresh` refuses session resumption at the farm, so every probe of
# either peer is a full handshake; `resume` offers session tickets and a session cache, so
# each peer resumes as well as it can. Both peers check with verification off (HAProxy
# `check-ssl verify none`, ours `insecure = true`): the cost compared is the handshake's.
bin="$repo/target/dist/health-orchestrator"
[[ -x $bin ]] || { echo "build first: cargo build --profile dist" >&2; exit 1; }
tls=${tls:-off}
[[ $tls =~ ^(off|fresh|resume)$ ]] || { echo "tls must be off, fresh or resume" >&2; exit 2; }
for tool in nginx haproxy curl python3 openssl; do
  command -v "$tool" >/dev/null || { echo "$tool is missing (Debian: nginx-light haproxy curl python3)" >&2; exit 1; }
done
for n in "${sizes[@]}"; do
  (( n >= 1 && n <= 62500 )) || { echo "N must be 1..62500" >&2; exit 2; }
done

state="$(mktemp -d /tmp/ho-peers.XXXXXX)"
farm_port=18080 grpc_port=18082 stub="http://127.0.0.1:18081/stub"
pids=()
stop() { local p; for p in "$@"; do kill "$p" 2>/dev/null && { timeout 10 tail --pid="$p" -f /dev/null || kill -9 "$p"; }; done; true; }
saved=("$(cat /proc/sys/net/core/somaxconn)" "$(cat /proc/sys/net/ipv4/tcp_max_syn_backlog)")
cleanup() {
  stop "${pids[@]}"
  [[ -f $state/nginx.pid ]] && kill -QUIT "$(cat "$state/nginx.pid")"
  echo "${saved[0]}" >/proc/sys/net/core/somaxconn
  echo "${saved[1]}" >/proc/sys/net/ipv4/tcp_max_syn_backlog
  rm -rf "$state"
}
trap cleanup EXIT
ulimit -Hn 1048576 2>/dev/null || true
ulimit -Sn "$(ulimit -Hn)"
# Bursts of thousands of connects at start: a listen backlog that takes them.
echo 65535 >/proc/sys/net/core/somaxconn
echo 65535 >/proc/sys/net/ipv4/tcp_max_syn_backlog
ips() { awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) printf "127.3.%d.%d\n", int(i / 250), i % 250 + 1 }'; }
requests() { curl -fsS --max-time 2 "$stub" | awk 'NR == 3 { print $3 }'; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# The farm's listen directive and its TLS settings for the `tls` mode.
farm_tls() {
  if [[ $tls == off ]]; then echo "listen $farm_port backlog=65535;"; return; fi
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=farm.test -keyout "$state/farm.key" -out "$state/farm.pem" 2>/dev/null
  echo "listen $farm_port ssl backlog=65535;"
  echo "ssl_certificate $state/farm.pem; ssl_certificate_key $state/farm.key;"
  if [[ $tls == fresh ]]; then
    echo "ssl_session_cache off; ssl_session_tickets off;"
  else
    echo "ssl_session_cache shared:farm:64m; ssl_session_tickets on; ssl_session_timeout 1h;"
  fi
}

farm_up() {
  : >"$state/fail.map"
  # A gRPC message: no compression, length 2, HealthCheckResponse { status: SERVING }.
  # nginx's workers read it as www-data: the state directory lets them through, no more.
  chmod 711 "$state" && mkdir -m 755 "$state/www"
  printf '\x00\x00\x00\x00\x02\x08\x01' >"$state/www/serving.bin"
  cat >"$state/nginx.conf" <<EOF
worker_processes ${farm_workers:-1};
worker_rlimit_nofile 1048576;
pid $state/nginx.pid;
error_log $state/nginx-error.log error;
events { worker_connections 200000; multi_accept on; }
http {
  access_log off;
  keepalive_timeout 65s;
  map \$server_addr \$failing { default 0; include $state/fail.map; }
  server {
    $(farm_tls)
    allow 127.0.0.0/8;
    deny all;
    # fail.map lists the addresses that answer 503 (detect.sh), by the address dialled.
    location = /healthz {
      default_type text/plain;
      if (\$failing) { return 503 "fail\n"; }
      return 200 "ok\n";
    }
  }
  server {
    listen $grpc_port http2 backlog=65535;
    allow 127.0.0.0/8;
    deny all;
    root $state/www;
    location = /grpc.health.v1.Health/Check { rewrite ^ /serving.bin last; }
    # A POST to a static file is a 405: served as 200 through an internal GET.
    location = /serving.bin {
      types { } default_type application/grpc;
      add_trailer grpc-status 0;
      error_page 405 =200 \$uri;
    }
  }
  server { listen 127.0.0.1:18081; location = /stub { stub_status; } }
}
EOF
  nginx -c "$state/nginx.conf" -e "$state/nginx-error.log"
  for _ in $(seq 50); do requests >/dev/null 2>&1 && return; sleep 0.1; done
  echo "nginx did not start: $(cat "$state/nginx-error.log")" >&2; exit 1
}

start_haproxy() { # N
  {
    # The stats socket is HAProxy's one listener here (it refuses to start with none).
    printf 'global\n  maxconn 2000\n  stats socket %s/haproxy.sock\n' "$state"
    printf 'defaults\n  mode http\n  timeout connect 1s\n  timeout client 10s\n'
    printf '  timeout server 10s\n  timeout check 1s\nbackend farm\n  option httpchk GET /healthz\n'
    local ssl=""; [[ $tls != off ]] && ssl=" check-ssl verify none"
    printf '  default-server check%s inter %s rise 1 fall 2\n' "$ssl" "$interval"
    ips "$1" | awk -v p="$farm_port" '{ printf "  server e%d %s:%s id %d\n", NR, $1, p, NR }'
  } >"$state/haproxy.cfg"
  haproxy -db -f "$state/haproxy.cfg" >"$state/haproxy.log" 2>&1 &
  peer=$! version="HAProxy $(haproxy -v | awk 'NR == 1 { print $3 }')"
}

start_ours() { # N
  {
    local kind=http; [[ $tls != off ]] && kind=https
    printf '[api]\nlisten = "127.0.0.1:18090"\n\n[defaults.check]\nkind = "%s"\nport = %s\n' "$kind" "$farm_port"
    [[ $tls != off ]] && printf 'insecure = true\n'
    printf 'path = "/healthz"\ninterval = "%sms"\ntimeout = "%sms"\n' "$interval" $(( interval / 2 < 1000 ? interval / 2 : 1000 ))
    printf 'fast_interval = "%sms"\nrise = 1\nfall = 2\n\n' $(( interval / 10 > 50 ? interval / 10 : 50 ))
    ips "$1" | awk '{ printf "[[endpoints]]\nname = \"e%d\"\naddress = \"%s\"\n\n", NR, $1 }'
    printf '[[tenants]]\nname = "bench"\ndomains = ["api.bench.test"]\nsinks = ["local"]\n\n'
    printf '[sinks.local]\nkind = "hosts_file"\ndir = "%s"\n' "$state"
  } >"$state/ours.toml"
  "$bin" run --config "$state/ours.toml" >"$state/ours.log" 2>&1 &
  peer=$! version="health-orchestrator built $(date -r "$bin" +%FT%T)"
}

