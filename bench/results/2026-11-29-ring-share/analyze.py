import collections
# Group samples into runs (a gap of >8 s with no engine process, or a change of binary, ends a run);
# per pid the last sample (the end of the window, before shutdown) and its peak.
rows = [l.split() for l in open('samples.log') if len(l.split()) == 5]
runs = []; cur = None; last_t = None
for t, pid, comm, hwm, rss in rows:
    t = int(t)
    if cur is None or comm != cur['comm'] or t - last_t > 8:
        cur = {'comm': comm, 'start': t, 'pids': collections.OrderedDict()}; runs.append(cur)
    cur['pids'][pid] = (int(rss) / 1024, int(hwm) / 1024)
    last_t = t
for r in runs:
    n = len(r['pids'])
    print(f"{r['comm']:9} start {r['start']} procs {n}: " + ', '.join(f"rss {rss:.1f} (hwm {hwm:.1f})" for rss, hwm in r['pids'].values()))
