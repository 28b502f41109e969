#!/usr/bin/env python3
"""Heap over time from heaptrack_print -M output: max per bucket of S seconds."""
import sys, re
path, step = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
pts = []
t = None
for line in open(path):
    if line.startswith("time="): t = float(line[5:])
    elif line.startswith("mem_heap_B="): pts.append((t, int(line[11:])))
buckets = {}
for t, m in pts:
    b = int(t // step)
    buckets[b] = max(buckets.get(b, 0), m)
peak = max(pts, key=lambda p: p[1])
print(f"peak {peak[1]/2**20:.1f} MiB at {peak[0]:.1f} s; last {pts[-1][1]/2**20:.1f} MiB at {pts[-1][0]:.1f} s")
for b in sorted(buckets):
    print(f"{b*step:6.1f} s {buckets[b]/2**20:7.1f} MiB")
