"""PyTorch's scaled_dot_product_attention, flash backend, causal, bf16, at one shape: milliseconds
and TFLOP/s of the forward and of the backward pass, counted as dev/cuda/attention_bias counts
them (forward 4 x pairs x hs, backward 10 x pairs x hs, pairs = B NH T (T + 1) / 2), so that
dev/gpu_checks.sh can put the two side by side. Prints one line per pass:
    sdpa-flash forward  <ms> ms  <TFLOP/s> TFLOP/s
    sdpa-flash backward <ms> ms  <TFLOP/s> TFLOP/s
or a line saying why it cannot run (no torch, no GPU), and exits 0 then.

    python3 dev/cuda/sdpa_bench.py T B NH HS
"""
import sys

def main():
    T, B, NH, HS = (int(x) for x in sys.argv[1:5])
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print('sdpa-flash: not measured (%s)' % e)
        return
    if not torch.cuda.is_available():
        print('sdpa-flash: not measured (no CUDA device for torch)')
        return
    torch.manual_seed(0)
    shape = (B, NH, T, HS)
    q, k, v = (torch.randn(shape, device='cuda', dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(shape, device='cuda', dtype=torch.bfloat16)
    pairs = B * NH * T * (T + 1) / 2.0

    def timed(fn, reps=10):
        fn()  # warm-up
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop) / reps

    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        with torch.no_grad():
            ms_f = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        ms_b = timed(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
    print('sdpa-flash forward  %8.3f ms  %6.2f TFLOP/s' % (ms_f, 4.0 * pairs * HS / (ms_f * 1e-3) / 1e12))
    print('sdpa-flash backward %8.3f ms  %6.2f TFLOP/s' % (ms_b, 10.0 * pairs * HS / (ms_b * 1e-3) / 1e12))

if __name__ == '__main__':
    if len(sys.argv) != 5:
        sys.exit('usage: sdpa_bench.py T B NH HS')
    main()
