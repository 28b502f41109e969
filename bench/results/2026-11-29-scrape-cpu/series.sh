#!/bin/bash
# series.sh: the runs of this folder. $BINS holds ho-base (816483c, the build before the
# streamed /metrics), ho-new (the build with the classic text converted a line at a time)
# and one loadtest (the harness of the earlier A/Bs, for both); ab.sh is
# ../2026-11-29-memory-ab/ab.sh. Run from this folder. The load test scrapes every replica's
# /metrics once a second in a ring: its CPU per probe counts those scrapes.
ab=../2026-11-29-memory-ab/ab.sh
bash $ab ring100k 3 --replicas 4 --endpoints 100000 --interval 80s --tenant-size 100 > ring.log 2>&1
# scrape.out: ../2026-11-29-memory-ab-3/scrape.sh (its header: the config) with 816483c
# (ho-new3), 4486fdc (ho-new4, /metrics streamed) and this build (ho-new5), two rounds.
