"""Copies the CUDA path's sources (the top-level .cu files, dev/cuda/*.cu, llmc/, the encodings' pe/) and the
emulation's headers (dev/cuda/emulate/*.h, compiled with -I OUT/dev/cuda/emulate) to OUT for
the CPU emulation (cuda_runtime.h here), rewriting two constructs of CUDA C++:

  name<<<grid, block, smem, stream>>>(a, b);   a kernel launch, with its arguments evaluated
      at the launch, as CUDA does:
      emu_launch("name", (const void*)&name, dim3(grid), dim3(block), (size_t)(smem), stream,
                 [emu_a0 = (a), emu_a1 = (b)]() EMU_NOCHECK { name(emu_a0, emu_a1); });
  __shared__ [__align__(n)] T name[dims];        a static shared-memory variable of the block:
      static char emu_site_name; auto& name = *emu_shared<T[dims]>(&emu_site_name, n);

and planting in the CUDA trainer's backward pass the sign flip that the tests switch on with
EMU_FLIP_GRAD (emu_flip_gradient in cuda_runtime.h; dev/cuda/emulate/trainers.sh).

usage: prepare.py REPO_ROOT OUT"""
import glob, os, re, shutil, sys

launch = re.compile(r'([A-Za-z_][\w:]*(?:<[^;<>()]*>)?)\s*<<<(.+?)>>>\s*\((.*?)\);', re.S)
shared = re.compile(r'^(\s*)__shared__\s+(?:__align__\((\d+)\)\s+)?([^;=]+?)\s+(\w+)\s*((?:\[[^\]]*\])*)\s*;', re.M)

def split_top(s):  # split at commas outside parentheses, brackets and braces
    parts, depth, cur = [], 0, ''
    for ch in s:
        depth += ch in '([{'
        depth -= ch in ')]}'
        if ch == ',' and depth == 0:
            parts.append(cur.strip())
            cur = ''
        else:
            cur += ch
    return parts + [cur.strip()]

def rewrite(text):
    def rep_launch(m):
        name, cfg, args = m.group(1), split_top(m.group(2)), [a for a in split_top(m.group(3)) if a]
        smem = cfg[2] if len(cfg) > 2 else '0'
        stream = cfg[3] if len(cfg) > 3 else '0'
        captures = ', '.join('emu_a%d = (%s)' % (i, a) for i, a in enumerate(args))
        names = ', '.join('emu_a%d' % i for i in range(len(args)))
        return ('emu_launch("%s", (const void*)&%s, dim3(%s), dim3(%s), (size_t)(%s), (cudaStream_t)(%s), [%s]() EMU_NOCHECK { %s(%s); });'
                % (name, name, cfg[0], cfg[1], smem, stream, captures, name, names))

    def rep_shared(m):
        indent, align, typ, name, dims = m.group(1), m.group(2) or '0', m.group(3), m.group(4), m.group(5)
        return ('%sstatic char emu_site_%s; auto& %s = *emu_shared<%s%s>(&emu_site_%s, %s);'
                % (indent, name, name, typ, dims, name, align))
    return shared.sub(rep_shared, launch.sub(rep_launch, text))

# the end of the CUDA trainer's backward pass, where every parameter gradient is complete
BACKWARD_END = '    encoder_backward(g.wte, d.dres, a.inputs, B * T, C);\n}\n'
FLIP = ('    emu_flip_gradient(model->grads_memory, model->param_offsets, model->param_sizes, PARAM_NAMES, '
        'NUM_PARAMETER_TENSORS);\n')

def plant_flip(text):
    if text.count(BACKWARD_END) != 1:
        sys.exit('prepare.py: the end of gpt2_backward is not found once in train_gpt2.cu (BACKWARD_END)')
    return text.replace(BACKWARD_END, BACKWARD_END[:-2] + FLIP + '}\n')

if __name__ == '__main__':
    root, out = sys.argv[1], sys.argv[2]
    for d in ('llmc', 'dev/cuda/emulate'):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    for f in glob.glob(os.path.join(root, 'llmc', '*.h')):
        shutil.copy(f, os.path.join(out, 'llmc'))
    for f in glob.glob(os.path.join(root, 'dev', 'cuda', 'emulate', '*.h')):
        shutil.copy(f, os.path.join(out, 'dev', 'cuda', 'emulate'))
    for rel in (glob.glob(os.path.join(root, 'llmc', '*.cuh')) + glob.glob(os.path.join(root, 'pe', '*.h')) + glob.glob(os.path.join(root, '*.cu'))
                + glob.glob(os.path.join(root, 'dev', 'cuda', '*.cu')) + glob.glob(os.path.join(root, 'dev', 'cuda', 'emulate', '*.cu'))):
        with open(rel) as f:
            text = rewrite(f.read())
        if os.path.basename(rel) == 'train_gpt2.cu':
            text = plant_flip(text)
        dst = os.path.join(out, os.path.relpath(rel, root))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, 'w') as f:
            f.write(text)
