#!/usr/bin/env bash
# Interleaved A/B of the probe engine: peerbench CPU per 1k probes at 1,000 and 10,000
# endpoints (3 rounds, order alternating), then detection at 10,000 (5 trials each). The
# 10,000 figures in bench/README add rounds 4-6 at 10,000 only (SIZES="10000" ROUNDS="4 5 6"
# DETECT=0) and one HAProxy run (PEERS=haproxy through run_all.sh).
set -u
A=/tmp/headA-target/release/health-orchestrator
B=/tmp/base-target/release/health-orchestrator
PB=/work/shared/peerbench
OUT=/tmp/ab/results; mkdir -p $OUT
cd $PB
for N in ${SIZES:-1000 10000}; do
  ./farm.sh up $N >/dev/null 2>&1
  for round in ${ROUNDS:-1 2 3}; do
    if (( round % 2 )); then order="A B"; else order="B A"; fi
    for build in $order; do
      bin=$A; [ $build = B ] && bin=$B
      PB_RESULTS=$OUT PAUSE_S=5 PEERS="cmd" PEER_NAME=ours-$build \
        PEER_CMD="$PB/ours_cmd.sh $bin {TARGETS} {INTERVAL_MS}" \
        ./run_all.sh $N 1000 30 > $OUT/run-$N-$round-$build.txt 2>&1
      cp "$(ls -t /tmp/peerbench/results/*.jsonl | head -1)" $OUT/peer-$N-$round-$build.jsonl
    done
  done
done
for build in $([ "${DETECT:-1}" = 1 ] && echo A B); do
  bin=$A; [ $build = B ] && bin=$B
  ./detect_ours.sh $bin 10000 1000 5 > $OUT/detect-$build.json 2> $OUT/detect-$build.log
done
./farm.sh down >/dev/null 2>&1
echo finished > $OUT/done
