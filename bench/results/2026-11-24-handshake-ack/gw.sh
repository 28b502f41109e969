#!/usr/bin/env bash
# gw.sh haproxy|BIN N: prober CPU, ctx, segments and the farm nginx worker's CPU per probe over 8 s
WHO=$1; N=$2
cd /work/shared/peerbench
source ./common.sh; source ./peers.sh
raise_nofile
if [ "$WHO" = haproxy ]; then
  haproxy_start "$N" 1000 >/dev/null 2>&1; PID=$HAPROXY_PID; sleep 5
else
  python3 -c "
for i in range($N): print(f'http://127.1.{i//250}.{i%250+1}:8080/healthz')" > /tmp/targets_p.txt
  rm -rf /tmp/ours_p; OURS_DIR=/tmp/ours_p timeout 60 ./ours_cmd.sh $WHO /tmp/targets_p.txt 1000 > /tmp/ours_p.log 2>&1 &
  sleep 10; PID=$(pgrep -f 'run --config /tmp/ours_p' | head -1)
fi
NG=$(pgrep -f 'nginx: worker' | head -1)
ngcpu() { awk '{print $14+$15}' /proc/$NG/stat; }
nstat -n >/dev/null
g1=$(ngcpu); c1=$(./farm.sh count)
perf stat -x, -e context-switches,task-clock -p $PID -- sleep 8 2> /tmp/perf_g.txt
c2=$(./farm.sh count); g2=$(ngcpu)
nstat | grep -E "TcpOutSegs|TcpOutRsts" > /tmp/nstat_g.txt
kill $PID; wait 2>/dev/null
python3 - $((c2-c1)) $((g2-g1)) <<'PY'
import sys
p=int(sys.argv[1]); g=int(sys.argv[2]); cs=tc=0
for l in open('/tmp/perf_g.txt'):
    f=l.split(',')
    if 'context-switches' in l: cs=float(f[0])
    if 'task-clock' in l: tc=float(f[0])
ns={}
for l in open('/tmp/nstat_g.txt'):
    f=l.split(); ns[f[0]]=int(f[1])
print(f"probes={p} ctx/probe={cs/p:.2f} cpu_us/probe={tc*1000/p:.1f} nginx_us/probe={g*10000/p:.1f} "+" ".join(f"{k}={v/p:.2f}" for k,v in ns.items()))
PY
