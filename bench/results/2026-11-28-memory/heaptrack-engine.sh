#!/bin/bash
# `loadtest --engine` wrapper: runs the engine binary named by $HT_REAL under heaptrack's
# preload and keeps the engine's PID (loadtest reads its CPU and RSS through /proc), so the
# run is the load test's own. The profile goes to $HT_OUT.PID.zst (default
# /tmp/heaptrack-engine.PID.zst); `heaptrack_print -f FILE --print-flamegraph OUT
# --flamegraph-cost-type leaked` lists what was live when the run ended, which
# `heap-parts.py BEFORE AFTER` sorts into the parts of bench/README's table.
out=${HT_OUT:-/tmp/heaptrack-engine}.$$.zst
pipe=/tmp/heaptrack-engine-fifo$$
mkfifo "$pipe"
/usr/lib/heaptrack/libexec/heaptrack_interpret < "$pipe" | zstd -c > "$out" &
export LD_PRELOAD=/usr/lib/heaptrack/libheaptrack_preload.so DUMP_HEAPTRACK_OUTPUT=$pipe
exec "$HT_REAL" "$@"
