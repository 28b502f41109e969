#!/usr/bin/env bash
set -u
A=/tmp/headA-target/release/health-orchestrator
B=/tmp/base-target/release/health-orchestrator
PB=/work/shared/peerbench
OUT=/tmp/ab/results; mkdir -p $OUT
cd $PB
N=10000
./farm.sh up $N >/dev/null 2>&1
for round in 4 5 6; do
  if (( round % 2 )); then order="A B"; else order="B A"; fi
  for build in $order; do
    bin=$A; [ $build = B ] && bin=$B
    PAUSE_S=5 PEERS="cmd" PEER_NAME=ours-$build \
      PEER_CMD="$PB/ours_cmd.sh $bin {TARGETS} {INTERVAL_MS}" \
      ./run_all.sh $N 1000 30 > $OUT/run-$N-$round-$build.txt 2>&1
    cp "$(ls -t /tmp/peerbench/results/*.jsonl | head -1)" $OUT/peer-$N-$round-$build.jsonl
  done
done
PAUSE_S=5 PEERS="haproxy" ./run_all.sh $N 1000 30 > $OUT/run-$N-haproxy.txt 2>&1
cp "$(ls -t /tmp/peerbench/results/*.jsonl | head -1)" $OUT/peer-$N-haproxy.jsonl
./farm.sh down >/dev/null 2>&1
echo finished > $OUT/done2
