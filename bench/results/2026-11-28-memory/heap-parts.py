# Sorts heaptrack collapsed stacks (live heap when the run ended) into the parts of
# bench/README "Memory per target": heap-parts.py BEFORE.txt AFTER.txt [PART]
import sys, collections
rules=[
 ("prober task and its future", ["new_task<>"]),
 ("probe in flight", ["attempt (mod.rs)","{async_fn#0}<> (request.rs)","poll_evented","registration.rs"]),
 ("prober handles (abort, result channel)", ["start_prober (probers.rs)","start (probers.rs)"]),
 ("probe settings (prepared check, request head)", ["prepare (settings.rs)","new (request.rs)","(registry.rs)","check_kinds.rs"]),
 ("ledger", ["(book.rs)","endpoint_of","tenants_of","(ledger","(slo.rs)","(tally.rs)","(store.rs)","(voted.rs)"]),
 ("metrics labels (node_status, per endpoint)", ["family.rs"]),
 ("tracker: per-target verdict state", ["adopt (verdicts.rs)"]),
 ("tracker: ids and index", ["(index.rs)"]),
 ("tracker: endpoint metadata", ["{closure#0} (reload.rs)","(reload.rs)"]),
 ("tracker: publisher (changes carried, published sets)", ["(publisher.rs)","published_addresses","decide (health.rs)","start_deciders","publish (core.rs)"]),
 ("config and plan", ["(endpoints.rs)","(plan.rs)","(tenants.rs)","(config_files.rs)","(load.rs)","(checks.rs)"]),
 ("API answers, metrics text (transient)", ["to_classic","encode","serialize","(events.rs)","read_only","(ser.rs)"]),
 ("HTTP connections (sink webhook, API)", ["client.rs","http1.rs","dispatch.rs","conn.rs","(io.rs)","exec.rs"]),
]
def load(p):
    tot=collections.Counter(); ex=collections.defaultdict(collections.Counter)
    for line in open(p):
        line=line.rstrip('\n'); i=line.rfind(' ')
        cost=int(line[i+1:]); frames=line[:i].split(';')
        st=';'.join(frames)
        cat="other"
        for c,pats in rules:
            if any(x in st for x in pats): cat=c; break
        tot[cat]+=cost
        ex[cat][' < '.join(reversed([x for x in frames if not x.startswith('_R') and 'alloc' not in x and 'boxed.rs' not in x][-5:]))]+=cost
    return tot,ex
n=100000
a,ea=load(sys.argv[1]); b,eb=load(sys.argv[2])
print(f"| {'part':55s} | before MiB | B/target | after MiB | B/target |")
for c,_ in [(r[0],0) for r in rules]+[("other",0)]:
    print(f"| {c:55s} | {a[c]/2**20:10.1f} | {a[c]/n:8.0f} | {b[c]/2**20:9.1f} | {b[c]/n:8.0f} |")
ta,tb=sum(a.values()),sum(b.values())
print(f"| {'total':55s} | {ta/2**20:10.1f} | {ta/n:8.0f} | {tb/2**20:9.1f} | {tb/n:8.0f} |")
if len(sys.argv)>3:
    for which,e in (("before",ea),("after",eb)):
        print(which)
        for k,v in e[sys.argv[3]].most_common(8): print(f"  {v/2**20:7.2f} {k[:200]}")
