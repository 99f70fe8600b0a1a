#!/usr/bin/python3
"""What a client saw during each fault kind of a checked history (issue 16, docs/cluster.md):
requests in flight from a fault's start to 2 s after its end, by status, and their latency.
  scripts/history/fault_windows.py HISTORY.jsonl
"""
import json, sys, statistics, collections
path = sys.argv[1]
hdr = None; ops = []; faults = []
for line in open(path):
    r = json.loads(line)
    t = r.get('type')
    if t == 'header': hdr = r
    elif t == 'op': ops.append(r)
    elif t == 'fault': faults.append(r)
# history times are relative to the recorder's start, about 0.2 s before the header's wall
off = hdr['wall'] - 0.2
def kind(w):
    for k in ('kill -9 master', 'kill -9 instance', 'SIGSTOP', 'partition instance', 'migrate 100'):
        if w.startswith(k): return k
    return None
wins = []
for i, f in enumerate(faults):
    k = kind(f['what'])
    if not k: continue
    end = faults[i + 1]['wall'] if i + 1 < len(faults) else f['wall']
    wins.append((k, f['wall'] - off, end - off + 2))
stat = collections.defaultdict(collections.Counter); lat = collections.defaultdict(list); n = collections.Counter()
for k, a, b in wins: n[k] += 1
for o in ops:
    for k, a, b in wins:
        if o['t0'] <= b and (o.get('t1') or o['t0']) >= a:
            stat[k][str(o['status'])] += 1
            if o.get('t1') is not None: lat[k].append(o['t1'] - o['t0'])
            break
allst = collections.Counter(str(o['status']) for o in ops)
print('fault | injected | requests in flight during the window | 200 / 503 / none | median s | max s')
for k in stat:
    l = sorted(lat[k])
    print(f"{k} | {n[k]} | {sum(stat[k].values())} | {stat[k]['200']} / {stat[k]['503']} / {stat[k]['None']} | {statistics.median(l):.3f} | {max(l):.2f}")
l = sorted(o['t1'] - o['t0'] for o in ops if o.get('t1') is not None)
print(f"all | | {len(ops)} | {allst['200']} / {allst['503']} / {allst['None']} | {statistics.median(l):.3f} | {max(l):.2f}")
