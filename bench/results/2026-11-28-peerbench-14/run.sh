#!/usr/bin/env bash
# $BIN: a release build of the commit measured (e31ec1a).
# peerbench: HAProxy and this build, 1,000 and 10,000 endpoints every 1 s, 3 rounds interleaved.
set -u
cd "$(git rev-parse --show-toplevel)"
export PB_STATE=/tmp/peerbench
rm -rf /tmp/peerbench/results
for r in 1 2 3; do
  for n in 1000 10000; do
    PEERS="haproxy cmd" PEER_NAME=ours PEER_CMD="../shared/peerbench/ours_cmd.sh $BIN {TARGETS} {INTERVAL_MS}" timeout 400 bash ../shared/peerbench/run_all.sh $n 1000 20 > /tmp/pb/round-$r-$n.log 2>&1
  done
done
bash ../shared/peerbench/farm.sh down >/dev/null 2>&1
echo done > /tmp/pb/done
