import gzip, json, sys, re, collections
r = json.load(gzip.open(sys.argv[1]) if sys.argv[1].endswith(".gz") else open(sys.argv[1]))
ms = collections.defaultdict(dict)
gates, figs = [], {}
for t in r['tests']:
    name = t['nodeid'].split('::')[1]
    m = re.match(r'test_ms_per_token\[(.+)-(\d+)\]', name)
    if m:
        ms[m.group(1)][int(m.group(2))] = t['measurements'][0]['measurement']['median_s'] * 1e3
    for c in t['comparisons']:
        if 'speedup' in c and c.get('ci_low') is not None:
            gates.append((name, round(c['speedup'], 4), round(c['ci_low'], 4), c.get('verdict')))
    for f in t['figures']:
        figs[(name, f['key'])] = f['value']
pos = [1, 10, 50, 100, 200, 1000]
for v, d in ms.items():
    print(f"{v:20s}", " / ".join(f"{d.get(p, float('nan')):.3f}" for p in pos))
for g in gates:
    print(*g)
for (n, k), v in figs.items():
    if 'roofline_fraction' in k or 'speedup_vs_hf' in k or ('ms_per_token' in k and 'roofline' in n):
        print(n, k, round(v, 4))
print(r['summary'])
