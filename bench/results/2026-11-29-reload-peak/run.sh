#!/bin/bash
# run.sh BIN LABEL RELOAD(0|1): 100,000 @ 10 s in tenants of 100 on one shared listener, a
# 40 s window; with RELOAD=1 the engine is sent SIGHUP (reload the config) 15 s into the
# window, with one tenant's domain changed in its config so the reload applies a change.
# The runs here, interleaved: none-1, none-2, reload-2, none-3, reload-3 (reload-1 before them).
# Prints the load test's RSS peak and the engine's VmRSS/VmHWM just before and 10 s after.
bin=$1; label=$2; reload=$3
here=$(cd "$(dirname "$0")" && pwd)
keep=$(mktemp -d)
"${LOADTEST:-$(dirname "$bin")/loadtest}" --engine "$bin" --endpoints 100000 --interval 10s \
  --tenant-size 100 --shared-listener --duration 40s --keep "$keep" \
  --json "$here/$label.json" > "$here/$label.txt" 2>&1 &
lt=$!
for _ in $(seq 600); do grep -q "warming up" "$here/$label.txt" 2>/dev/null && break; sleep 1; done
# The warm-up (an interval and a bit) and 15 s of the window.
sleep 29
pid=$(pgrep -f "^$bin run" | head -1)
mem() { awk '/VmRSS|VmHWM/ {printf "%s %d MiB  ", $1, $2/1024}' /proc/$pid/status; }
echo "before: $(mem)" > "$here/$label.mem"
if [ "$reload" = 1 ]; then
  config=$(find "$keep" -name '*.toml' | head -1)
  # Tenant t0's domain changed: a reload that applies a change.
  sed -i 's/"t0\.load\.test"/"t0-renamed.load.test"/' "$config"
  kill -HUP "$pid"
fi
sleep 10
echo "after: $(mem)" >> "$here/$label.mem"
wait $lt
cat "$here/$label.mem"; grep -E "rss_peak|false_trans|empty_ans|cpu_ms" "$here/$label.txt"
rm -rf "$keep"
