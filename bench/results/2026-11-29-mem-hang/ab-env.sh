#!/bin/bash
# ab-env.sh PREFIX ROUNDS ARGS...: the load test against the same engine binary with each
# arena setting in $VARIANTS (default "- 1 2": glibc's default, MALLOC_ARENA_MAX=1, =2),
# interleaved: the order rotates each round. Binaries in $BINS (default /work/t-hang/bins).
prefix=$1; rounds=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
read -r -a variants <<< "${VARIANTS:-- 1 2}"
n=${#variants[@]}
for r in $(seq 1 "$rounds"); do
  for i in $(seq 0 $((n - 1))); do
    a=${variants[$(((i + r - 1) % n))]}
    "$here/run.sh" "$prefix-a${a/-/d}-$r" "${BINS:-/work/t-hang/bins}/ho-base" "$a" "$@"
  done
done
