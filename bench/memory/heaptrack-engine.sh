#!/bin/bash
# `loadtest --engine` wrapper: runs the engine binary named by $HT_REAL under heaptrack's
# preload and keeps the engine's PID (loadtest reads its CPU and RSS through /proc), so the
# run is the load test's own. The profile goes to $HT_OUT.PID.zst (default
# /tmp/heaptrack-engine.PID.zst); the writer's PID to that name + `.writer`, so a caller can
# wait for the profile to be complete after the engine is killed.
out=${HT_OUT:-/tmp/heaptrack-engine}.$$.zst
pipe=/tmp/heaptrack-engine-fifo$$
mkfifo "$pipe"
(/usr/lib/heaptrack/libexec/heaptrack_interpret < "$pipe" | zstd -q -c > "$out"; rm -f "$pipe") &
echo $! > "$out.writer"
export LD_PRELOAD=/usr/lib/heaptrack/libheaptrack_preload.so DUMP_HEAPTRACK_OUTPUT=$pipe
exec "$HT_REAL" "$@"
