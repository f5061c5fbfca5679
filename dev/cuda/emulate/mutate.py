"""Plants one bug (a mutant) in a prepared copy of the sources (prepare.py), to show that the
emulated tests catch it: make test-cuda-emulate builds each mutant and expects its test to
fail, with the given text in its output (a missing barrier or cp.async wait: the emulation's
report; a wrong index or layout: a failed comparison).
   usage: mutate.py PREPARED_DIR NAME     (mutate.py --list: the names, tests and texts)

Each mutant names a file, a text that marks exactly one line, and the change on that line."""
import os, sys

# name: (file, marker, old, new, test, expected); test `check` is attention_bias's check, `mma` mma_check
MUTANTS = {
    # a wrong fragment index: A register 1 of P (rows g + 8) takes row g's keys 8..15
    'fragment-index': ('llmc/attention_mma.cuh', 'a[k][1] = pack_bf16x2(acc[2 * k][2], acc[2 * k][3]);',
                       'acc[2 * k][2], acc[2 * k][3]', 'acc[2 * k + 1][0], acc[2 * k + 1][1]', 'check', 'FAIL'),
    # a wrong row address for ldmatrix.trans (B fragments of O = P V, dQ = dS K, dV, dK)
    'ldmatrix-address': ('llmc/attention_mma.cuh', 'ldmatrix_x4<true>(b, tile + smem_index<HS>(k0 + (lane % 8)',
                         '8 * ((lane / 8) % 2)', '8 * (lane / 16)', 'check', 'FAIL'),
    # barriers and cp.async waits left out, in each kernel
    'forward-no-barrier': ('llmc/attention_mma.cuh', 'tile jt visible to every warp', '__syncthreads();', '', 'check', 'emu: shared-memory'),
    'forward-no-wait': ('llmc/attention_mma.cuh', 'tile jt (and Q) have landed', 'cp_async_wait<1>();', '', 'check', 'still in flight'),
    'forward-no-end-barrier': ('llmc/attention_mma.cuh', 'done with stage jt % 2', '__syncthreads();', '', 'check', 'emu: shared-memory'),
    'dq-no-barrier': ('llmc/attention_mma.cuh', 'key tile jt (and Q, dO, D) visible', '__syncthreads();', '', 'check', 'emu: shared-memory'),
    'dq-no-wait': ('llmc/attention_mma.cuh', 'key tile jt (and Q, dO) have landed', 'cp_async_wait<1>();', '', 'check', 'still in flight'),
    'dq-no-end-barrier': ('llmc/attention_mma.cuh', 'done with key stage jt % 2', '__syncthreads();', '', 'check', 'emu: shared-memory'),
    'kv-no-barrier': ('llmc/attention_mma.cuh', 'query tile it (and K, V, the rows', '__syncthreads();', '', 'check', 'emu: shared-memory'),
    'kv-no-wait': ('llmc/attention_mma.cuh', 'query tile it (and K, V) have landed', 'cp_async_wait<1>();', '', 'check', 'still in flight'),
    'kv-no-end-barrier': ('llmc/attention_mma.cuh', 'done with query stage it % 2', '__syncthreads();', '', 'check', 'emu: shared-memory'),
    # the emulated mma itself with B's registers in the wrong order: mma_check must see it
    'emulated-mma-layout': ('dev/cuda/emulate/mma.h', 'uint32_t reg = lanes[n * 4 + (k % 8) / 2]->u[4 + k / 8];',
                            'u[4 + k / 8]', 'u[5 - k / 8]', 'mma', 'FAIL'),
}

if __name__ == '__main__':
    if sys.argv[1] == '--list':
        for name, m in MUTANTS.items():
            print(name, m[4], m[5])
        sys.exit(0)
    root, name = sys.argv[1], sys.argv[2]
    path, marker, old, new, _, _ = MUTANTS[name]
    path = os.path.join(root, path)
    with open(path) as f:
        lines = f.read().split('\n')
    hits = [k for k, line in enumerate(lines) if marker in line]
    if len(hits) != 1 or old not in lines[hits[0]]:
        sys.exit('mutate.py: %s: the marker matches %d lines of %s (or not the text to change)' % (name, len(hits), path))
    lines[hits[0]] = lines[hits[0]].replace(old, new, 1)
    with open(path, 'w') as f:
        f.write('\n'.join(lines))
