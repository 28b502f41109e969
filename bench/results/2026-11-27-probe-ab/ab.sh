#!/usr/bin/env bash
# Interleaved A/B of the probe path: 5080ca6 (old) against today's build (new), 5 rounds at 1,000 and 10,000.
set -u
cd /work/main
PB=/work/shared/peerbench
OLD=/work/old5080/target/release/health-orchestrator
NEW=/tmp/ab-new/health-orchestrator
mkdir -p /tmp/ab5
bash $PB/farm.sh up 10000 > /tmp/ab5/farm.log 2>&1
for r in 1 2 3 4 5; do
  if (( r % 2 )); then order="old new"; else order="new old"; fi
  for n in 1000 10000; do
    for w in $order; do
      if [[ $w == old ]]; then BIN=$OLD; else BIN=$NEW; fi
      echo "== round $r n=$n $w $(date +%T)" >> /tmp/ab5/log
      PEER_NAME=$w PEER_CMD="$PB/ours_cmd.sh $BIN {TARGETS} {INTERVAL_MS}" PEERS="cmd" timeout 300 bash $PB/run_all.sh $n 1000 20 > /tmp/ab5/run-$r-$n-$w.log 2>&1
    done
  done
done
bash $PB/farm.sh down >> /tmp/ab5/farm.log 2>&1
echo done >> /tmp/ab5/log
