"""Copies the CUDA path's sources (the top-level .cu files, dev/cuda/*.cu, llmc/) and the
emulation's headers (dev/cuda/emulate/*.h, compiled with -I OUT/dev/cuda/emulate) to OUT with
every kernel launch  name<<<grid, block, smem, stream>>>(args);  rewritten into
emu_launch("name", dim3(grid), dim3(block), smem, [&]() { name(args); });  for the CPU
emulation (cuda_runtime.h here).   usage: prepare.py REPO_ROOT OUT"""
import glob, os, re, shutil, sys

root, out = sys.argv[1], sys.argv[2]
launch = re.compile(r'([A-Za-z_][\w:]*(?:<[^;<>()]*>)?)\s*<<<(.+?)>>>\s*\((.*?)\);', re.S)

def split_top(s):  # split at commas outside parentheses
    parts, depth, cur = [], 0, ''
    for ch in s:
        depth += ch in '([{<'
        depth -= ch in ')]}>'
        if ch == ',' and depth == 0:
            parts.append(cur.strip())
            cur = ''
        else:
            cur += ch
    return parts + [cur.strip()]

def rewrite(text):
    def rep(m):
        name, cfg, args = m.group(1), split_top(m.group(2)), m.group(3)
        smem = cfg[2] if len(cfg) > 2 else '0'
        return 'emu_launch("%s", dim3(%s), dim3(%s), (size_t)(%s), [&]() { %s(%s); });' % (name, cfg[0], cfg[1], smem, name, args)
    return launch.sub(rep, text)

for d in ('llmc', 'dev/cuda/emulate'):
    os.makedirs(os.path.join(out, d), exist_ok=True)
for f in glob.glob(os.path.join(root, 'llmc', '*.h')):
    shutil.copy(f, os.path.join(out, 'llmc'))
for f in glob.glob(os.path.join(root, 'dev', 'cuda', 'emulate', '*.h')):
    shutil.copy(f, os.path.join(out, 'dev', 'cuda', 'emulate'))
for rel in (glob.glob(os.path.join(root, 'llmc', '*.cuh')) + glob.glob(os.path.join(root, '*.cu'))
            + glob.glob(os.path.join(root, 'dev', 'cuda', '*.cu'))):
    with open(rel) as f:
        text = rewrite(f.read())
    with open(os.path.join(out, os.path.relpath(rel, root)), 'w') as f:
        f.write(text)
