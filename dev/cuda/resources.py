#!/usr/bin/env python3
"""The attention kernels' resources as ptxas reports them (nvcc --resource-usage, written by
cuda.mk beside every trainer as build/train_gpt2cu_<stem>.ptxas), held to a budget and
tabled for docs/cuda.md. One parse serves both.

  resources.py check LAUNCHES PTXAS...      make test-cuda-resources: fails (one line per
                                            kernel over budget) unless every attention
                                            kernel of the bf16 tensor-core path (forward,
                                            dq, dk/dv at head sizes 32 and 64; DAPE's three
                                            kernels; txl's own four; shaw's own three; CoPE's
                                            forward and backward; complex_order's three) uses no local memory (stack frame and
                                            spill bytes 0), and registers x threads per block
                                            stay within the 65,536 registers of an SM (every
                                            head size)
  resources.py table LAUNCHES PTXAS...      the markdown table (stdout): every attention
                                            kernel, encoding, head size and architecture

PTXAS: reports named train_gpt2cu_<stem>.ptxas, of one architecture each. LAUNCHES: files of
lines `<kernel> <head size or -> <threads per block> <dynamic shared memory bytes>`, as
dev/cuda/attention_bias.cu's `launches` mode prints them from the launchers' own sizes,
named launches_<stem>.txt (they do not depend on the architecture).
"""
import os
import re
import sys

REG_FILE = 65536  # 32-bit registers of an SM (sm_80, sm_90), and the most one block may use
BUDGET_HS = (32, 64)  # head sizes held to no local memory; 128 is tabled only

# per SM: registers, threads, blocks, shared memory (bytes), the most one block may ask for,
# and what the runtime reserves per block (CUDA occupancy calculator's numbers)
SM_LIMITS = {
    "sm_90": dict(gpu="H100", threads=2048, blocks=32, smem=228 * 1024, smem_block=227 * 1024, reserved=1024),
    "sm_80": dict(gpu="A100", threads=2048, blocks=32, smem=164 * 1024, smem_block=163 * 1024, reserved=1024),
}

ATTENTION = ("attention_forward_mma_kernel", "attention_backward_q_mma_kernel", "attention_backward_kv_mma_kernel",
             "dape_attention_forward_kernel", "dape_attention_backward_q_kernel", "dape_attention_backward_kv_kernel",
             "txl_forward_kernel", "txl_backward_q_kernel", "txl_backward_kv_kernel", "txl_backward_p_kernel",
             "shaw_forward_kernel", "shaw_backward_q_kernel", "shaw_backward_kv_kernel",
             "cope_attention_forward_kernel", "cope_attention_backward_kernel",
             "complex_attention_forward_kernel", "complex_attention_backward_q_kernel", "complex_attention_backward_kv_kernel")
FAMILIES = ("attention", "dape", "txl", "shaw", "cope", "complex")  # the table's order: the tensor-core kernels, DAPE's, txl's, shaw's, CoPE's, complex_order's


def kernel_of(mangled):
    """(kernel name, head size or None, whether it is the instance at randomized positions) of
    an Itanium-mangled entry, e.g. _Z28attention_forward_mma_kernelILi64E6PEBiasEv... ->
    (attention_forward_mma_kernel, 64, False); ...ILi64E11PEPositionsI6PEBiasEEv... -> (..., True)"""
    m = re.match(r"_Z(\d+)", mangled)
    if not m:
        return mangled, None, False
    n = int(m.group(1))
    start = m.end()
    name = mangled[start:start + n]
    hs = re.match(r"ILi(\d+)E", mangled[start + n:])
    return name, int(hs.group(1)) if hs else None, "PEPositions" in mangled


def parse_ptxas(path):
    """the architecture and every entry function of one ptxas report: (arch, {(kernel, hs, pos):
    dict(regs, stack, spill_st, spill_ld, smem)})"""
    kernels = {}
    current = None
    props_for = None
    arch = None
    with open(path) as f:
        for line in f:
            m = re.search(r"Compiling entry function '([^']+)' for '(sm_\d+)'", line)
            if m:
                if arch not in (None, m.group(2)):
                    sys.exit(f"resources.py: {path}: more than one architecture ({arch}, {m.group(2)})")
                arch = m.group(2)
                current = kernel_of(m.group(1))
                if current in kernels:
                    sys.exit(f"resources.py: {path}: two entries read as {current}")
                kernels[current] = dict(regs=0, stack=0, spill_st=0, spill_ld=0, smem=0)
                continue
            m = re.search(r"Function properties for (\S+)", line)
            if m:
                props_for = kernel_of(m.group(1))
                continue
            m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m and props_for in kernels:
                k = kernels[props_for]
                k["stack"], k["spill_st"], k["spill_ld"] = (int(x) for x in m.groups())
                continue
            m = re.search(r"Used (\d+) registers", line)
            if m and current is not None:
                k = kernels[current]
                k["regs"] = int(m.group(1))
                s = re.search(r"(\d+) bytes smem", line)
                k["smem"] = int(s.group(1)) if s else 0
    if arch not in SM_LIMITS:
        sys.exit(f"resources.py: {path}: no kernel compiled for {' or '.join(SM_LIMITS)}")
    return arch, kernels


def stem_of(path):
    """<stem> of build/.../train_gpt2cu_<stem>.ptxas"""
    m = re.fullmatch(r"train_gpt2cu_(\w+)\.ptxas", os.path.basename(path))
    if not m:
        sys.exit(f"resources.py: {path}: not a train_gpt2cu_<stem>.ptxas report")
    return m.group(1)


def parse_launches(paths):
    """{stem: {(kernel, hs): (threads, dynamic smem)}}"""
    launches = {}
    for path in paths:
        m = re.fullmatch(r"launches_(\w+)\.txt", os.path.basename(path))
        if not m:
            sys.exit(f"resources.py: {path}: not a launches_<stem>.txt file")
        table = {}
        with open(path) as f:
            for line in f:
                w = line.split()
                if len(w) != 4:
                    sys.exit(f"resources.py: {path}: bad line '{line.strip()}'")
                table[(w[0], None if w[1] == "-" else int(w[1]))] = (int(w[2]), int(w[3]))
        launches[m.group(1)] = table
    return launches


def blocks_per_sm(arch, regs, threads, smem):
    """resident blocks per SM: registers (allocated per warp in units of 256), threads,
    blocks, shared memory (static + dynamic + the runtime's reserve, in units of 128 bytes)"""
    lim = SM_LIMITS[arch]
    warps = -(-threads // 32)
    regs_warp = -(-regs * 32 // 256) * 256
    by_regs = REG_FILE // (regs_warp * warps) if regs_warp else lim["blocks"]
    by_threads = lim["threads"] // (warps * 32)
    need = -(-(smem + lim["reserved"]) // 128) * 128
    by_smem = lim["smem"] // need if smem <= lim["smem_block"] else 0
    return min(by_regs, by_threads, lim["blocks"], by_smem)


def rows(launch_paths, ptxas_paths):
    """one row per attention kernel of every report: stem, arch, kernel, hs, pos (the instance
    at randomized positions: the launch sizes of the plain one), resources, threads, dynamic
    smem and blocks per SM"""
    launches = parse_launches(launch_paths)
    out = []
    for path in ptxas_paths:
        stem = stem_of(path)
        arch, kernels = parse_ptxas(path)
        for (kernel, hs, pos), r in sorted(kernels.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0, kv[0][2])):
            if kernel not in ATTENTION:
                continue
            if stem not in launches or (kernel, hs) not in launches[stem]:
                sys.exit(f"resources.py: no launch size of {kernel} (head size {hs}) for {stem}: run attention_bias launches")
            threads, dyn = launches[stem][(kernel, hs)]
            out.append(dict(stem=stem, arch=arch, kernel=kernel, hs=hs, pos=pos, threads=threads, dyn=dyn,
                            blocks=blocks_per_sm(arch, r["regs"], threads, r["smem"] + dyn), **r))
    return out


def check(launch_paths, ptxas_paths):
    bad = 0
    n = 0
    for r in rows(launch_paths, ptxas_paths):
        n += 1
        name = (f"{r['stem']}: {r['kernel']}" + (f"<{r['hs']}>" if r["hs"] else "") + (" at randomized positions" if r["pos"] else "")
                + f" ({r['arch']})")
        local = r["stack"] + r["spill_st"] + r["spill_ld"]
        if local > 0 and (r["hs"] is None or r["hs"] in BUDGET_HS):
            print(f"{name}: local memory: {r['stack']} bytes stack frame, {r['spill_st']} bytes spill stores, "
                  f"{r['spill_ld']} bytes spill loads", file=sys.stderr)
            bad += 1
        if r["regs"] * r["threads"] > REG_FILE:
            print(f"{name}: {r['regs']} registers x {r['threads']} threads = {r['regs'] * r['threads']} > {REG_FILE}",
                  file=sys.stderr)
            bad += 1
    if n == 0:
        sys.exit("resources.py: no attention kernel in the reports")
    print(f"resources: {n} attention kernels in {len(ptxas_paths)} builds, {bad} over budget")
    return 1 if bad else 0


def table(launch_paths, ptxas_paths):
    rs = rows(launch_paths, ptxas_paths)
    archs = [a for a in SM_LIMITS if any(r["arch"] == a for r in rs)]
    by = {(r["stem"], r["kernel"], r["hs"], r["pos"], r["arch"]): r for r in rs}
    stems = sorted({r["stem"] for r in rs}, key=lambda s: [r["stem"] for r in rs].index(s))
    head = "| encoding | kernel | HS | threads | dyn. smem |"
    rule = "|---|---|---|---|---|"
    for a in archs:
        head += f" {a}: regs | spill st/ld | stack | static smem | blocks/SM ({SM_LIMITS[a]['gpu']}) |"
        rule += "---|---|---|---|---|"
    lines = [head, rule]
    short = {"attention_forward_mma_kernel": "forward", "attention_backward_q_mma_kernel": "dq",
             "attention_backward_kv_mma_kernel": "dk/dv", "dape_attention_forward_kernel": "DAPE forward",
             "dape_attention_backward_q_kernel": "DAPE dq", "dape_attention_backward_kv_kernel": "DAPE dk/dv",
             "txl_forward_kernel": "txl forward", "txl_backward_q_kernel": "txl dq", "txl_backward_kv_kernel": "txl dk/dv",
             "txl_backward_p_kernel": "txl dP", "shaw_forward_kernel": "shaw forward", "shaw_backward_q_kernel": "shaw dq",
             "shaw_backward_kv_kernel": "shaw dk/dv", "cope_attention_forward_kernel": "CoPE forward",
             "cope_attention_backward_kernel": "CoPE backward", "complex_attention_forward_kernel": "complex forward",
             "complex_attention_backward_q_kernel": "complex dq", "complex_attention_backward_kv_kernel": "complex dk/dv"}
    for stem in stems:
        keys = sorted({(r["kernel"], r["hs"], r["pos"]) for r in rs if r["stem"] == stem},
                      key=lambda k: (FAMILIES.index(k[0].split("_")[0]), k[2], k[1] or 0, ATTENTION.index(k[0])))
        for kernel, hs, pos in keys:
            first = next(by[(stem, kernel, hs, pos, a)] for a in archs if (stem, kernel, hs, pos, a) in by)
            name = short[kernel] + (" (rp)" if pos else "")
            line = f"| {stem} | {name} | {hs or '-'} | {first['threads']} | {first['dyn']} |"
            for a in archs:
                r = by.get((stem, kernel, hs, pos, a))
                if r is None:
                    line += " | | | | |"
                    continue
                mark = lambda v: f"**{v}**" if v else "0"
                line += (f" {r['regs']} | {mark(r['spill_st'])}/{mark(r['spill_ld'])} | {mark(r['stack'])} | {r['smem']} |"
                         f" {r['blocks']} |")
            lines.append(line)
    print("\n".join(lines))
    return 0


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("check", "table"):
        sys.exit("usage: resources.py check|table LAUNCHES... PTXAS...")
    files = sys.argv[2:]
    launch_paths = [f for f in files if f.endswith(".txt")]
    ptxas_paths = [f for f in files if f.endswith(".ptxas")]
    for f in files:
        if not os.path.isfile(f):
            sys.exit(f"resources.py: {f}: no such file")
    if not ptxas_paths:
        sys.exit("resources.py: no .ptxas report given")
    sys.exit(check(launch_paths, ptxas_paths) if sys.argv[1] == "check" else table(launch_paths, ptxas_paths))


if __name__ == "__main__":
    main()
