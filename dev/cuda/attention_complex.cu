/*
complex_order's attention kernels (llmc/attention_complex.cuh), forward and backward, checked
against its attention written out again in double (llmc/attention_check.cuh:
complex_case_check: both streams' outputs, lse, and both streams' dq, dk, dv) and timed with
cudaEvents. Its attention is no bias of the attention_bias kernels (two residual streams'
q, k, v, one softmax of |q_i k_j|), so it has this file of its own.

  make -C dev/cuda attention_complex        (attention_complex_fp32: the fp32 build)
  ./dev/cuda/attention_complex VERSION [T B NH HS]   (default 1024 2 12 64): check and time;
                                               every VERSION (1, 2, 3) runs the one set of
                                               kernels, as txl's in attention_bias
  ./dev/cuda/attention_complex check           (every shape below, no timing)
  ./dev/cuda/attention_complex launches        (bf16: the kernels' launch sizes, and DAPE's,
                                                for dev/cuda/resources.py)

`check` runs the kernels on lengths that are no multiple of the tiles (T = 200, two heads, two
rows of the batch; T = 77 and 100 at head sizes 32 and 128). Tolerances (relative L2 against
the reference): fp32 1e-4; bf16 1e-2 (the inputs are exact in bf16, the kernels compute in
fp32, the outputs are rounded to bf16).
*/
#define TESTING
#include "../../train_gpt2.cu"
#include "../../llmc/attention_check.cuh"

#if !defined(ENABLE_FP32)
// `launches`: threads per block and dynamic shared memory of the kernels as their launchers
// ask for them, one line per kernel and head size
template<int HS>
static void print_complex_launches() {
    printf("complex_attention_forward_kernel %d %d %zu\n", HS, ATT_BQ * HS / ATT_DPT, complex_forward_smem<HS>());
    printf("complex_attention_backward_q_kernel %d %d %zu\n", HS, ATT_BQ * HS / ATT_DPT, complex_forward_smem<HS>());
    printf("complex_attention_backward_kv_kernel %d %d %zu\n", HS, ATT_KV_BK * HS / ATT_DPT, complex_backward_kv_smem<HS>());
}
#endif

int main(int argc, char** argv) {
#if !defined(ENABLE_FP32)
    if (argc > 1 && strcmp(argv[1], "launches") == 0) {
        print_complex_launches<32>();
        print_complex_launches<64>();
        print_complex_launches<128>();
        print_dape_launches();
        return 0;
    }
#endif
    if (cuda_device_count() == 0) {
        printf("attention_complex: no CUDA device, skipped\n");
        return 0;
    }
    int fails = 0;
    if (argc > 1 && strcmp(argv[1], "check") == 0) {
        const AttnShape shapes[] = {{2, 200, 2, 64, 0}, {1, 77, 2, 32, 0}, {1, 100, 1, 128, 0}};
        for (const AttnShape& s : shapes) { fails += complex_case_check(s, 7, TOL_OUT, 0); }
    } else {
        int version = argc > 1 ? atoi(argv[1]) : 1;
        if (version < 1 || version > 3) { fatal("unknown version %d (1, 2, 3: the kernels of llmc/attention_complex.cuh)", version); }
        AttnShape s = {2, 1024, 12, 64, 0};
        if (argc > 2) { s.T = atoi(argv[2]); }
        if (argc > 3) { s.B = atoi(argv[3]); }
        if (argc > 4) { s.NH = atoi(argv[4]); }
        if (argc > 5) { s.hs = atoi(argv[5]); }
        if (s.T < 1 || s.B < 1 || s.NH < 1 || !attention_head_size_supported(s.hs)) {
            fatal("bad shape T=%d B=%d NH=%d hs=%d (head sizes 32, 64, 128)", s.T, s.B, s.NH, s.hs);
        }
#if defined(CUDA_EMULATION)
        int timed = 0; // the emulation has no clock
#else
        int timed = 1;
#endif
        fails = complex_case_check(s, 7, TOL_OUT, timed);
    }
    printf("%s\n", fails == 0 ? "ok" : "FAILED");
    return fails == 0 ? 0 : 1;
}
