#!/usr/bin/env python3
"""Sorts heaptrack's collapsed stacks of the heap live at the end of a run into the parts of
bench/README "Memory", per target.

    parts.py N LABEL=STACKS.txt [LABEL=STACKS.txt ...] [--part PART]

STACKS.txt: `heaptrack_print -f PROFILE --print-flamegraph STACKS.txt
--flamegraph-cost-type leaked` (frames `function (file.rs)`, root first, then the bytes).
A stack goes to the first part one of whose patterns it contains (matched against its
frames as written and as `function (file.rs)`, so a debug build's profile sorts like a
release build's), so the order below matters: `[ring]`'s parts first, the prober's next (a probe's stack passes through the tracker's channel),
config last among the engine's (every part is built from the plan). `--part PART` lists the
largest stacks of that part in each profile, to check a rule or find the next cut.
"""
import collections
import re
import sys

RULES = [
    # `[ring]` first: a gate is made for each prober slot, and the peers' verdicts come
    # through the tracker; but a gate that opens starts a prober (the wheel's record, a
    # probe prepared again): the prober's parts, not the ring's.
    ("ring: gates (ownership)", ["gate (ownership.rs)"]),
    ("ring: key index (tracker)", ["index_keys (index.rs)"]),
    # What a peer's verdict makes the tracker do (a transition, a snapshot) is the
    # tracker's: only the record of the verdicts is the ring's.
    ("ring: peers' verdicts (tracker)", ["set_peer (verdicts.rs)", "index_shared",
                                         "member (verdicts.rs)", "(combine.rs)"]),
    ("ring: verdict stream (batches in flight)", ["ring::run", "ring::stream",
                                                  "(stream.rs)", "share (run.rs)",
                                                  "full_state (run.rs)", "take_one (run.rs)",
                                                  "push_once (run.rs)",
                                                  "own_verdicts (shared.rs)"]),
    ("prober task and its future", ["new_task<>"]),
    ("prober records (the wheel)", ["(wheel.rs)"]),
    ("probe settings (prepared check, request head)", ["prepare (settings.rs)",
                                                       "new (request.rs)"]),
    ("ring: gates (ownership)", ["(ownership.rs)", "(rendezvous.rs)", "(members.rs)"]),
    ("probe in flight", ["attempt (mod.rs)", "{async_fn#0}<> (request.rs)", "poll_evented",
                         "registration.rs"]),
    ("prober handles (abort, result channel)", ["start_prober (probers.rs)",
                                                "start (probers.rs)", "(probers.rs)"]),
    ("probe settings (prepared check, request head)", ["prepare (settings.rs)",
                                                       "new (request.rs)", "(registry.rs)",
                                                       "check_kinds.rs"]),
    ("ledger", ["(book.rs)", "endpoint_of", "tenants_of", "(ledger", "(slo.rs)", "(tally.rs)",
                "(store.rs)", "(voted.rs)", "(degraded.rs)"]),
    ("metrics labels (node_status, per endpoint)", ["family.rs"]),
    # A release build's frame, then a debug build's.
    ("tracker: per-target verdict state", ["adopt (verdicts.rs)", "Verdicts::adopt"]),
    ("tracker: ids and index", ["(index.rs)"]),
    ("tracker: endpoint metadata", ["(reload.rs)"]),
    ("tracker: publisher (changes carried, published sets)", [
        "(publisher.rs)", "published_addresses", "decide (health.rs)", "start_deciders",
        "publish (core.rs)"]),
    ("DNS answer state (zones, records)", ["(zones.rs)", "(records.rs)", "(answer.rs)",
                                           "(packet_cache.rs)", "(recall.rs)"]),
    ("config and plan (figment, validated plan)", [
        "(endpoints.rs)", "(plan.rs)", "(tenants.rs)", "(config_files.rs)", "(load.rs)",
        "(checks.rs)", "figment"]),
    ("API answers, metrics text (transient)", ["to_classic", "encode", "serialize",
                                               "(events.rs)", "read_only", "(ser.rs)"]),
    ("HTTP connections (sink webhook, API)", ["client.rs", "http1.rs", "dispatch.rs",
                                              "conn.rs", "(io.rs)", "exec.rs"]),
]
OTHER = "other"


SYMBOL_HASH = re.compile(r"::h[0-9a-f]{16}")


def plain(frame):
    """A debug build's frame (`crate::module::Type::function::h0123... (file.rs)`) as a
    release build's (`function (file.rs)`), which the rules are written against."""
    frame = SYMBOL_HASH.sub("", frame).replace("$u7b$", "{").replace("$u7d$", "}")
    name, paren, place = frame.partition(" (")
    return name.rsplit("::", 1)[-1] + paren + place


def part_of(stack):
    for part, patterns in RULES:
        if any(p in stack for p in patterns):
            return part
    return OTHER


def short(frames):
    kept = [f for f in frames
            if not f.startswith("_R") and "alloc" not in f and "boxed.rs" not in f]
    return " < ".join(reversed(kept[-6:]))


def load(path):
    totals, stacks = collections.Counter(), collections.defaultdict(collections.Counter)
    for line in open(path, errors="replace"):
        stack, _, cost = line.rstrip("\n").rpartition(" ")
        if not cost.isdigit():
            continue
        frames = stack.split(";")
        part = part_of(stack + ";" + ";".join(plain(f) for f in frames))
        totals[part] += int(cost)
        stacks[part][short([plain(f) for f in frames])] += int(cost)
    return totals, stacks


def main(argv):
    part = None
    if "--part" in argv:
        i = argv.index("--part")
        part = argv[i + 1]
        del argv[i:i + 2]
    n = int(argv[0])
    runs = [(a.split("=", 1)[0], load(a.split("=", 1)[1])) for a in argv[1:]]
    head = "".join(f" {label} MiB | {label} B/target |" for label, _ in runs)
    print(f"| part |{head}")
    print("|---|" + "---|---|" * len(runs))
    for name in list(dict.fromkeys(r[0] for r in RULES)) + [OTHER]:
        cells = "".join(f" {t[name] / 2**20:.1f} | {t[name] / n:.0f} |" for _, (t, _) in runs)
        print(f"| {name} |{cells}")
    cells = "".join(f" {sum(t.values()) / 2**20:.1f} | {sum(t.values()) / n:.0f} |"
                    for _, (t, _) in runs)
    print(f"| total live heap |{cells}")
    if part:
        for label, (_, stacks) in runs:
            print(f"\n{label}: {part}")
            for stack, cost in stacks[part].most_common(10):
                print(f"  {cost / 2**20:8.2f} MiB  {stack[:220]}")


if __name__ == "__main__":
    main(sys.argv[1:])
