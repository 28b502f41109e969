#!/bin/bash
# medians.sh: each build's replica figures (CPU ms per 1k probes, RSS peak MiB) over its runs
# in this folder, and their medians.
for b in base new; do
  cpu=$(awk '/^r[0-9] /{print $4}' ring100k-$b-*.txt | sort -n | paste -sd' ')
  rss=$(awk '/^r[0-9] /{print $5}' ring100k-$b-*.txt | sort -n | paste -sd' ')
  med() { echo "$1" | tr ' ' '\n' | awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
  echo "$b cpu_ms/1k: $cpu | median $(med "$cpu")"
  echo "$b rss_peak_mib: $rss | median $(med "$rss")"
done
