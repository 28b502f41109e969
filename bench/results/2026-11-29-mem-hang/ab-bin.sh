#!/bin/bash
# ab-bin.sh PREFIX ROUNDS ARGS...: the load test against the engine built before (ho-base) and
# with the arena cap (ho-cap), glibc's environment untouched, interleaved (order alternates).
# Binaries in $BINS (default /work/t-hang/bins): ho-base, ho-cap, loadtest.
prefix=$1; rounds=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="base cap"; else order="cap base"; fi
  for b in $order; do
    "$here/run.sh" "$prefix-$b-$r" "${BINS:-/work/t-hang/bins}/ho-$b" - "$@"
  done
done
