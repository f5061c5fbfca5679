"""PyTorch's attention at one shape, causal, bf16: the milliseconds and TFLOP/s of the forward
and of the backward pass, counted as dev/cuda/attention_bias counts them (forward 4 x pairs x
hs, backward 10 x pairs x hs, pairs = B NH T (T + 1) / 2), so that dev/gpu_checks.sh can put
them beside the project's kernels:

    python3 dev/cuda/sdpa_bench.py [--compile-only] T B NH HS [CASE...]

CASE (default: all, in this order): flash (scaled_dot_product_attention's flash backend, no
bias), or FlexAttention (torch.compile'd, a causal block mask) with an encoding's bias as its
score_mod: nobias (the baseline, compiled first), alibi (the slopes of Press et al. for a power
of two), kerple (-r1 log(1 + r2 (i - j))), t5 (32 causal buckets, 16 exact, up to 128: a table
per head), cable (w_i (S_i - S_j), S a per-token cumulative sum). This list is deliberately
the biases a score_mod can express at no cost of their own; the project's kernels of every
encoding are timed beside it.

Each pass is timed by triton.testing.do_bench as dev/cuda/attention_bias times the project's
kernels: at least 50 ms of warm-up, then the median of at least 100 ms of calls, each on a
cold L2. Prints one line per case and pass,
    <case> forward  <ms> ms  <TFLOP/s> TFLOP/s  first call <s> s
    <case> backward <ms> ms  <TFLOP/s> TFLOP/s
as each case ends, '<case> FAILED: <why>' for a case that does not run (the exit status is 1
then, after the other cases), or one line 'sdpa_bench: skipped (<why>)' without torch or a CUDA
device (exit 0 then).

The backward is timed with the forward's graph kept (retain_graph), which compiled
FlexAttention refuses while it donates its saved buffers to the backward (PyTorch 2.11, seen
on an H100): donated buffers are switched off, which changes what memory the backward may
reuse, not its kernels. A case whose compiled kernels need more shared memory than the GPU has
(t5's forward on an H100: 240 KiB of 227) runs again with smaller tiles, named so:
'<case>-bm64' (kernel_options BLOCK_M = BLOCK_N = 64). --compile-only:
each FlexAttention case's first call alone (forward and backward), which fills the compile
cache (TORCHINDUCTOR_CACHE_DIR) for a later run at the same shape: 'compiled <case> in <s> s'.
"""
import math
import sys
import time

CASES = ["flash", "nobias", "alibi", "kerple", "t5", "cable"]


def main(args):
    compile_only = args[:1] == ["--compile-only"]
    args = args[1:] if compile_only else args
    if len(args) < 4:
        sys.exit("usage: sdpa_bench.py [--compile-only] T B NH HS [CASE...]")
    T, B, NH, HS = (int(x) for x in args[:4])
    names = args[4:] or CASES
    unknown = [n for n in names if n not in CASES]
    if unknown:
        sys.exit("sdpa_bench.py: unknown case %s (cases: %s)" % (", ".join(unknown), " ".join(CASES)))
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print("sdpa_bench: skipped (%s)" % e)
        return
    if not torch.cuda.is_available():
        print("sdpa_bench: skipped (no CUDA device for torch)")
        return
    try:
        from triton.testing import do_bench
    except ImportError as e:
        print("sdpa_bench: skipped (%s)" % e)
        return
    try:  # the backward is timed with retain_graph: no donated buffers (above)
        import torch._functorch.config as functorch_config
        functorch_config.donated_buffer = False
    except (ImportError, AttributeError):
        pass
    torch.manual_seed(0)
    dev, dt = "cuda", torch.bfloat16
    shape = (B, NH, T, HS)
    q, k, v = (torch.randn(shape, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
    dout = torch.randn(shape, device=dev, dtype=dt)
    pairs = B * NH * T * (T + 1) / 2.0

    def timed(fn):  # the median milliseconds: >= 50 ms of warm-up, >= 100 ms of calls
        return do_bench(fn, warmup=50, rep=100, return_mode="median")

    def report(name, fwd):
        t0 = time.time()
        out = fwd()  # the first call compiles FlexAttention's kernels
        torch.autograd.grad(out, (q, k, v), dout)
        torch.cuda.synchronize()
        first = time.time() - t0
        if compile_only:
            print("compiled %-12s in %.1f s" % (name, first))
            sys.stdout.flush()
            return
        with torch.no_grad():
            ms_f = timed(fwd)
        out = fwd()
        ms_b = timed(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
        print("%-12s forward  %8.3f ms  %6.2f TFLOP/s  first call %.1f s" % (name, ms_f, 4.0 * pairs * HS / (ms_f * 1e-3) / 1e12, first))
        print("%-12s backward %8.3f ms  %6.2f TFLOP/s" % (name, ms_b, 10.0 * pairs * HS / (ms_b * 1e-3) / 1e12))
        sys.stdout.flush()

    # the biases' parameters: unit-scale values as a trained model has them
    h = torch.arange(NH, device=dev, dtype=torch.float32)
    slopes = 2.0 ** (-8.0 * (h + 1) / NH)
    r1, r2 = 0.05 + 0.5 * torch.rand(NH, device=dev), 0.05 + 0.5 * torch.rand(NH, device=dev)
    table = torch.randn(NH, 32, device=dev)
    S = -F.softplus(torch.randn(B, NH, T, device=dev)).cumsum(-1)
    w = 0.5 + torch.rand(B, NH, T, device=dev)

    def t5_bucket(n):  # n = i - j >= 0: 16 exact buckets, then logarithmic up to 128
        large = 16 + (torch.log(n.float().clamp(min=1) / 16) / math.log(128 / 16) * 16).to(torch.int64)
        return torch.where(n < 16, n, large.clamp(max=31))

    mods = {
        "nobias": lambda s, b, hh, i, j: s,
        "alibi": lambda s, b, hh, i, j: s - slopes[hh] * (i - j),
        "kerple": lambda s, b, hh, i, j: s - r1[hh] * torch.log1p(r2[hh] * (i - j)),
        "t5": lambda s, b, hh, i, j: s + table[hh, t5_bucket(i - j)],
        "cable": lambda s, b, hh, i, j: s + w[b, hh, i] * (S[b, hh, i] - S[b, hh, j]),
    }
    flex = block_mask = None
    failed = 0
    for name in names:
        try:
            if name == "flash":
                if compile_only:
                    continue

                def fwd():
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
                report("sdpa-flash", fwd)
                continue
            if flex is None:
                from torch.nn.attention.flex_attention import flex_attention, create_block_mask
                block_mask = create_block_mask(lambda b, hh, i, j: i >= j, None, None, T, T, device=dev)
                flex = torch.compile(flex_attention, dynamic=False)
            mod = mods[name]
            try:
                report("flex-" + name, lambda: flex(q, k, v, score_mod=mod, block_mask=block_mask))
            except Exception as e:  # the GPU's shared memory: once more with smaller tiles
                if "out of resource" not in str(e):
                    raise
                small = {"BLOCK_M": 64, "BLOCK_N": 64}
                report("flex-" + name + "-bm64", lambda: flex(q, k, v, score_mod=mod, block_mask=block_mask, kernel_options=small))
        except Exception as e:  # one line, then the next case
            failed += 1
            print("%-12s FAILED: %s" % (name, str(e).splitlines()[0] if str(e) else type(e).__name__))
            sys.stdout.flush()
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
