#!/usr/bin/env python3
"""rss-stats.py FILE.rss...: per trace (trace.sh), the peak VmRSS, the median and peak over
the last 30 s (the measured window's steady state), all in MiB."""
import statistics, sys

for path in sys.argv[1:]:
    rows = [l.split() for l in open(path) if l.strip()]
    t = [float(r[0]) for r in rows]
    rss = [int(r[2]) / 1024 for r in rows]
    last = [r for ti, r in zip(t, rss) if t[-1] - ti <= 30]
    print(f"{path}: peak {max(rss):.1f}, last 30 s median {statistics.median(last):.1f} "
          f"max {max(last):.1f} (trace {t[-1] - t[0]:.0f} s)")
