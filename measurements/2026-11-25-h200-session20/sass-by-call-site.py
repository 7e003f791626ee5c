# Session 20, run locally (no GPU): attribute the SASS of one kernel (nvdisasm -gi of a -lineinfo
# build, cut to one function) to the source functions of its inline chains, and to the call sites in
# decode_step_stream. A record of how the counts in README.md were made, not a maintained tool.
"""Attribute SASS instructions of one kernel to source functions (inline chains)."""
import re, sys, collections
src = {}
def funcs_of(path):
    lines = open(path).read().split('\n')
    owner = [None]*(len(lines)+2)
    cur = None
    pat = re.compile(r'^(?:template.*\n)?\s*(?:static\s+)?(?:__device__|__global__|inline|__forceinline__|__noinline__).*?(\w+)\s*\(')
    for i, l in enumerate(lines, 1):
        m = re.match(r'^(?:__device__|__global__|static|inline|__forceinline__|__noinline__|template|MK_)[^;]*?\b(\w+)\s*\(', l)
        if m and not l.strip().endswith(';') and m.group(1) not in ('__launch_bounds__','if','for','while'):
            cur = m.group(1)
        owner[i] = cur
    return owner
text = open(sys.argv[1]).read().split('\n')
chain = []
pending = []
fn_self = collections.Counter(); fn_incl = collections.Counter(); top = collections.Counter()
loc = re.compile(r'//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?')
ins = re.compile(r'^\s+/\*[0-9a-f]{4,}\*/\s+\S')
block = []
for l in text:
    m = loc.match(l.strip())
    if m:
        if not block or block[-1] == 'INS': block = []
        block.append((m.group(1), int(m.group(2))))
        continue
    if ins.match(l):
        if block and block[-1] != 'INS':
            chain = [b for b in block]  # innermost first
            block.append('INS')
        names = []
        for f, ln in chain:
            if f not in src: src[f] = funcs_of(f)
            names.append((src[f][ln] if ln < len(src[f]) else None) or "?")
        if names:
            fn_self[names[0]] += 1
            for n in set(names): fn_incl[n] += 1
            # chain below the kernel: the outermost two names
            top[' > '.join(reversed(names[-4:-1]))] += 1
print('self'); [print(f'{c:6d} {n}') for n, c in fn_self.most_common(40)]
print('inclusive'); [print(f'{c:6d} {n}') for n, c in fn_incl.most_common(50)]
# direct callees of the kernel body with call line
calls = collections.Counter()
chain = []; block = []
for l in text:
    m = loc.match(l.strip())
    if m:
        if not block or block[-1] == 'INS': block = []
        block.append((m.group(1), int(m.group(2)), m.group(3), m.group(4)))
        continue
    if ins.match(l):
        if block and block[-1] != 'INS':
            chain = list(block); block.append('INS')
        # find entry whose inlined-at is in decode_step_stream
        key = 'self'
        for f, ln, af, al in chain:
            if af and src[af][int(al)] == 'decode_step_stream':
                key = f'{src[f][ln]} @{al}'; break
        calls[key] += 1
print('by call site in decode_step_stream')
for k, c in sorted(calls.items(), key=lambda kv: int(kv[0].split('@')[1]) if '@' in kv[0] else 0): print(f'{c:6d} {k}')
