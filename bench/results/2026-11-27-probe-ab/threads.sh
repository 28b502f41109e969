#!/usr/bin/env bash
# Per-thread CPU of one binary probing N farm targets for 20 s (after 5 s warm-up).
BIN=$1 N=$2 OUT=$3
PB=/work/shared/peerbench
D=$(mktemp -d /tmp/thr.XXXX)
OURS_DIR=$D bash -c "exec $PB/ours_cmd.sh $BIN /tmp/peerbench/targets-$N.txt 1000" > $D/log 2>&1 &
sleep 6
PID=$(pgrep -f "$D/cfg.toml" | head -1)
snap() { for t in /proc/$PID/task/*; do n=$(cat $t/comm); s=($(sed 's/.*) //' $t/stat)); echo "$n ${s[11]} ${s[12]}"; done | awk '{a[$1]+=$2+$3} END {for (k in a) print k, a[k]}' | sort; }
snap > $D/a; sleep 20; snap > $D/b
kill $PID; wait 2>/dev/null
join -a1 -a2 -e0 -o 0,1.2,2.2 $D/a $D/b | awk '{printf "%s %d\n", $1, $3-$2}' | sort -k2 -nr > $OUT
rm -rf $D
