#!/usr/bin/env python3
"""smaps-classes.py PID: the process's resident memory by kind, in KiB, on one line.

binary = file-backed mappings (the executable and libraries); brk = glibc's main arena
([heap]); arenas = glibc's thread arenas (anonymous mappings inside a 64 MiB-aligned heap
reservation, HEAP_MAX_SIZE on 64-bit); stacks = the rest of the anonymous mappings below
8 MiB + guard (thread stacks) ; other_anon = every other anonymous mapping (large blocks
malloc mmaps on its own, the tokio/actix allocations over the mmap threshold)."""
import re, sys

HEAP_MAX = 64 << 20
pid = sys.argv[1]
maps = []
cur = None
with open(f"/proc/{pid}/smaps") as f:
    for line in f:
        m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \d+\s*(.*)$", line)
        if m:
            cur = dict(lo=int(m[1], 16), hi=int(m[2], 16), perms=m[3], path=m[4].strip(), rss=0)
            maps.append(cur)
        elif line.startswith("Rss:") and cur is not None:
            cur["rss"] = int(line.split()[1])
kinds = dict(binary=0, brk=0, arenas=0, stacks=0, other_anon=0)
arena_heaps = set()
# A thread arena's heap: its start is 64 MiB-aligned, and its reservation (rw part + ---p
# rest) spans exactly 64 MiB.
for i, m in enumerate(maps):
    if m["path"] or m["lo"] % HEAP_MAX:
        continue
    end = m["hi"]
    j = i + 1
    while j < len(maps) and maps[j]["lo"] == end and not maps[j]["path"] and end - m["lo"] < HEAP_MAX:
        end = maps[j]["hi"]
        j += 1
    if end - m["lo"] == HEAP_MAX:
        for k in range(i, j):
            arena_heaps.add(k)
for i, m in enumerate(maps):
    if m["path"] == "[heap]":
        kinds["brk"] += m["rss"]
    elif m["path"].startswith("/"):
        kinds["binary"] += m["rss"]
    elif m["path"]:
        kinds["other_anon"] += m["rss"]  # [stack], [vvar], [vdso]
    elif i in arena_heaps:
        kinds["arenas"] += m["rss"]
    elif i > 0 and maps[i - 1]["perms"].startswith("---") and maps[i - 1]["hi"] == m["lo"] \
            and (m["hi"] - m["lo"]) in (8 << 20, 2 << 20) and maps[i - 1]["hi"] - maps[i - 1]["lo"] == 4096:
        kinds["stacks"] += m["rss"]
    else:
        kinds["other_anon"] += m["rss"]
total = sum(kinds.values())
print(" ".join(f"{k}={v}" for k, v in kinds.items()), f"total={total}", f"arena_heaps={len({maps[k]['lo'] // HEAP_MAX for k in arena_heaps})}")
