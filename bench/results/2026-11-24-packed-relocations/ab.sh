#!/usr/bin/env bash
# ab.sh BIN N [extra]: CPU µs/probe, vol/invol switches per probe over 15 s, syscalls none
BIN=$1; N=$2; EXTRA=${3:-}
cd /work/shared/peerbench && head -$N /tmp/targets_p.txt > /tmp/targets_ab.txt; rm -rf /tmp/ours_p; OURS_CHECK_EXTRA="$EXTRA" OURS_DIR=/tmp/ours_p timeout 45 ./ours_cmd.sh $BIN /tmp/targets_ab.txt 1000 > /tmp/ours_p.log 2>&1 &
sleep 12; PID=$(pgrep -f 'run --config /tmp/ours_p' | head -1)
snap(){ awk '{print $14+$15}' /proc/$PID/stat; cat /proc/$PID/task/*/status | awk '/^voluntary/{v+=$2} /^nonvol/{n+=$2} END{print v, n}'; }
a=($(snap)); sleep 15; b=($(snap))
lines=$(grep -c . /tmp/ours_p/*.hosts 2>/dev/null | tail -1)
port=$(grep -m1 listen /tmp/ours_p/cfg.toml | sed 's/.*:\([0-9]*\)"/\1/')
echo "$(basename $BIN) N=$N ${EXTRA:+ka} us/probe=$(python3 -c "print(round((${b[0]}-${a[0]})*10000/($N*15),1))") vol=$(python3 -c "print(round((${b[1]}-${a[1]})/($N*15),3))") invol=$(python3 -c "print(round((${b[2]}-${a[2]})/($N*15),3))") hosts=$lines"
kill $PID; wait 2>/dev/null
