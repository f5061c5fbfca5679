"""Plants one bug (a mutant) in a prepared copy of the sources (prepare.py), to show that the
emulated tests catch it: make test-cuda-emulate builds each mutant and expects its test to
fail, with the given text (an extended regular expression) in its output (a missing barrier, __syncwarp() or cp.async wait: the
emulation's report; a wrong index or layout: a failed comparison).
   usage: mutate.py PREPARED_DIR NAME     (mutate.py --list: the names, tests, encodings, texts)

Each mutant names a text that marks exactly one place in the prepared sources (one line, or
several lines with \\n between them), the text to change there and what it becomes."""
import glob, os, sys

# name: (marker, old, new, test, encoding, expected); test `check` is attention_bias's check
# built for the encoding, `mma` mma_check
MUTANTS = {
    # a wrong fragment index: A register 1 of P (rows g + 8) takes row g's keys 8..15
    'fragment-index': ('a[k][1] = pack_bf16x2(acc[2 * k][2], acc[2 * k][3]);',
                       'acc[2 * k][2], acc[2 * k][3]', 'acc[2 * k + 1][0], acc[2 * k + 1][1]', 'check', 'kerple', 'FAIL'),
    # a wrong row address for ldmatrix.trans (B fragments of O = P V, dQ = dS K, dV, dK)
    'ldmatrix-address': ('ldmatrix_x4<true>(b, tile + smem_index<HS>(k0 + (lane % 8)',
                         '8 * ((lane / 8) % 2)', '8 * (lane / 16)', 'check', 'kerple', 'FAIL'),
    # barriers and cp.async waits left out, in each kernel
    'forward-no-barrier': ('tile jt visible to every warp', '__syncthreads();', '', 'check', 'kerple', 'emu: shared-memory'),
    'forward-no-wait': ('tile jt (and Q) have landed', 'cp_async_wait<1>();', '', 'check', 'kerple', 'still in flight'),
    'forward-no-end-barrier': ('done with stage jt % 2', '__syncthreads();', '', 'check', 'kerple', 'emu: shared-memory'),
    'dq-no-barrier': ('key tile jt (and Q, dO, D) visible', '__syncthreads();', '', 'check', 'kerple', 'emu: shared-memory'),
    'dq-no-wait': ('key tile jt (and Q, dO) have landed', 'cp_async_wait<1>();', '', 'check', 'kerple', 'still in flight'),
    'dq-no-end-barrier': ('done with key stage jt % 2', '__syncthreads();', '', 'check', 'kerple', 'emu: shared-memory'),
    'kv-no-barrier': ('query tile it (and K, V, the rows', '__syncthreads();', '', 'check', 'kerple', 'emu: shared-memory'),
    'kv-no-wait': ('query tile it (and K, V) have landed', 'cp_async_wait<1>();', '', 'check', 'kerple', 'still in flight'),
    'kv-no-end-barrier': ('done with query stage it % 2', '__syncthreads();', '', 'check', 'kerple', 'emu: shared-memory'),
    # the __syncwarp() that ends a warp's staging of its pairs' bias gradients (t5, fire: the
    # next pair's lanes overwrite the stage another lane still reads)
    't5-no-end-syncwarp': ('g->bucket += sum;\n    __syncwarp();', '__syncwarp();', '', 'check', 't5', 'shared-memory race between lanes'),
    'fire-no-end-syncwarp': ('g->dl += w2 * w1 * sl;\n    __syncwarp();', '__syncwarp();', '', 'check', 'fire', 'shared-memory race between lanes'),
    # a parameter gradient's sign flipped where a block's partial is written (kerple's second
    # parameter, r2; t5's whole table): the check compares each tensor on its own
    'param-partial-sign': ('if (threadIdx.x == 0) { partials[(size_t)slot * N + k] = s; }', '= s;', '= k == 1 ? -s : s;',
                           'check', 'kerple', 'd kerple_r2 .*FAIL'),
    'lane-partial-sign': ('if (threadIdx.x == 0) { partials[(size_t)slot * n + q] = s; }', '= s;', '= -s;', 'check', 't5', 'd t5_table .*FAIL'),
    # the emulated mma itself with B's registers in the wrong order: mma_check must see it
    'emulated-mma-layout': ('uint32_t reg = lanes[n * 4 + (k % 8) / 2]->u[4 + k / 8];',
                            'u[4 + k / 8]', 'u[5 - k / 8]', 'mma', 'kerple', 'FAIL'),
}

if __name__ == '__main__':
    if sys.argv[1] == '--list':
        for name, m in MUTANTS.items():
            print(name, m[3], m[4], m[5])
        sys.exit(0)
    root, name = sys.argv[1], sys.argv[2]
    marker, old, new = MUTANTS[name][:3]
    sources = [f for pattern in ('*.cu', 'llmc/*', 'pe/*', 'dev/cuda/*.cu', 'dev/cuda/emulate/*')
               for f in glob.glob(os.path.join(root, pattern)) if os.path.isfile(f)]
    hits = [(f, text) for f in sources for text in [open(f).read()] if marker in text]
    count = sum(text.count(marker) for _, text in hits)
    if count != 1:
        sys.exit('mutate.py: %s: the marker is found %d times in %s (once is needed)' % (name, count, root))
    path, text = hits[0]
    at = text.index(marker)
    start, end = text.rfind('\n', 0, at) + 1, text.find('\n', at + len(marker))
    end = len(text) if end < 0 else end
    if old not in text[start:end]:
        sys.exit('mutate.py: %s: no %r on the lines of the marker in %s' % (name, old, path))
    with open(path, 'w') as f:
        f.write(text[:start] + text[start:end].replace(old, new, 1) + text[end:])
