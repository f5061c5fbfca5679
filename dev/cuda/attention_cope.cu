/*
CoPE's attention kernels (llmc/attention_cope.cuh), forward and backward, checked against
CoPE's definition in double (llmc/attention_check.cuh: cope_case_check, each position and
each gate's gradient summed out in full) and timed with cudaEvents. CoPE is no bias of the
attention_bias kernels, so it has this file of its own.

  make -C dev/cuda attention_cope        (attention_cope_fp32: the fp32 build)
  ./dev/cuda/attention_cope VERSION [T B NH HS]     (default 1024 2 12 64)
  ./dev/cuda/attention_cope check                    (every shape below, no timing)
  ./dev/cuda/attention_cope time [T B NH HS]         (the trainer's kernels timed, with its dz
                                                      scratch and no CPU reference)
  ./dev/cuda/attention_cope launches                 (bf16: the kernels' launch sizes, for
                                                      dev/cuda/resources.py)

version 1  the trainer's kernels, the backward's dz scratch holding every row (one launch)
version 2  the same with a dz scratch of one block of rows (the backward in one launch per
           block: the grouping the trainer falls back to when T x P rows exceed 64 MiB)

`check` runs both versions on lengths that are no multiple of the tiles (T = 200, two heads,
two rows of the batch; T = 77 and 100 at head sizes 32 and 128; version 2 at T = 300); P =
T / 4 + 1, so the far keys' positions clamp. Tolerances (relative L2 against the reference):
fp32 1e-4 for out, lse, dq, dk, dv; bf16 1e-2 (the inputs are exact in bf16, the kernels
compute in fp32, the outputs are rounded to bf16); dE, fp32 in both builds, 1e-3.
*/
#define TESTING
#include "../../train_gpt2.cu"
#include "../../llmc/attention_check.cuh"

// the dz scratch of a version: every row of the shape (1), or one block (2)
static int version_dz_rows(int version, AttnShape s) {
    return version == 1 ? s.B * s.NH * CEIL_DIV(s.T, COPE_BQ) * COPE_BQ : COPE_BQ;
}

#if !defined(ENABLE_FP32)
// `launches`: threads per block and dynamic shared memory of the bf16 build's CoPE kernels as
// their launchers ask for them, for dev/cuda/resources.py (the backward's at T = 1024), and
// DAPE's
template<int HS>
static void print_cope_launches() {
    printf("cope_attention_forward_kernel %d %d 0\n", HS, ATT_BQ * HS / ATT_DPT);
    printf("cope_attention_backward_kernel %d %d %zu\n", HS, COPE_BQ * HS / ATT_DPT, cope_smem_layout(NULL, NULL, HS, 1024) * sizeof(float));
}
#endif

// `time`: the kernels' milliseconds at one shape on random inputs, with the trainer's dz
// scratch (cope_dz_rows) and no reference
static void time_case(AttnShape s) {
    int P = s.T / 4 + 1, C = s.NH * s.hs, dz_rows = cope_dz_rows(s.B, s.T, s.NH, P);
    size_t N = (size_t)s.B * s.T;
    printf("CoPE attention kernels (%s), timed only: B=%d T=%d NH=%d hs=%d P=%d, dz scratch of %d rows\n", PRECISION_NAME, s.B, s.T, s.NH, s.hs, P, dz_rows);
    cuda_context_init();
    uint64_t rng = random_seed(7);
    floatX* qkv = (floatX*)cuda_malloc(N * 3 * C * sizeof(floatX), "qkv");
    floatX* dout = (floatX*)cuda_malloc(N * C * sizeof(floatX), "dout");
    floatX* E = (floatX*)cuda_malloc((size_t)P * s.hs * sizeof(floatX), "E");
    floatX* out = (floatX*)cuda_malloc(N * C * sizeof(floatX), "out");
    floatX* dqkv = (floatX*)cuda_malloc(N * 3 * C * sizeof(floatX), "dqkv");
    float* lse = (float*)cuda_malloc(N * s.NH * sizeof(float), "lse");
    float* dE = (float*)cuda_malloc((size_t)P * s.hs * sizeof(float), "dE");
    float* dkv = (float*)cuda_malloc(N * 2 * C * sizeof(float), "dkv");
    float* dz = (float*)cuda_malloc((size_t)dz_rows * P * sizeof(float), "dz");
    free(upload_random(qkv, N * 3 * C, 1.0f, &rng));
    free(upload_random(dout, N * C, 1.0f, &rng));
    free(upload_random(E, (size_t)P * s.hs, 0.5f, &rng));
    cudaCheck(cudaMemset(dE, 0, (size_t)P * s.hs * sizeof(float)));
    CopeLayer cl = {E, dE, dkv, dz, P, dz_rows};
    float ms_f = time_ms([&]() { cope_attention_forward(out, lse, qkv, cl, s.B, s.T, s.NH, s.hs, ctx.stream); });
    float ms_b = time_ms([&]() {
        cope_attention_backward(dqkv, dout, qkv, out, lse, cl, s.B, s.T, s.NH, s.hs, ctx.prop.sharedMemPerBlockOptin, ctx.stream);
    });
    printf("  forward  %8.3f ms\n  backward %8.3f ms\n", ms_f, ms_b);
    cuda_free(&qkv); cuda_free(&dout); cuda_free(&E); cuda_free(&out); cuda_free(&dqkv);
    cuda_free(&lse); cuda_free(&dE); cuda_free(&dkv); cuda_free(&dz);
}

int main(int argc, char** argv) {
#if !defined(ENABLE_FP32)
    if (argc > 1 && strcmp(argv[1], "launches") == 0) {
        print_cope_launches<32>();
        print_cope_launches<64>();
        print_cope_launches<128>();
        print_dape_launches();
        return 0;
    }
#endif
    if (cuda_device_count() == 0) {
        printf("attention_cope: no CUDA device, skipped\n");
        return 0;
    }
    int fails = 0;
    if (argc > 1 && strcmp(argv[1], "check") == 0) {
        const AttnShape shapes[] = {{2, 200, 2, 64}, {1, 77, 2, 32}, {1, 100, 1, 128}};
        for (const AttnShape& s : shapes) { fails += cope_case_check(s, 7, version_dz_rows(1, s), TOL_OUT, TOL_PE, 0); }
        AttnShape s = {1, 300, 1, 64};
        fails += cope_case_check(s, 8, version_dz_rows(2, s), TOL_OUT, TOL_PE, 0);
    } else {
        int time_only = argc > 1 && strcmp(argv[1], "time") == 0;
        int version = time_only ? 1 : argc > 1 ? atoi(argv[1]) : 1;
        if (version != 1 && version != 2) { fatal("unknown version %d (1: one backward launch, 2: one launch per block)", version); }
        AttnShape s = {2, 1024, 12, 64};
        if (argc > 2) { s.T = atoi(argv[2]); }
        if (argc > 3) { s.B = atoi(argv[3]); }
        if (argc > 4) { s.NH = atoi(argv[4]); }
        if (argc > 5) { s.hs = atoi(argv[5]); }
        if (s.T < 4 || s.B < 1 || s.NH < 1 || !attention_head_size_supported(s.hs)) {
            fatal("bad shape T=%d B=%d NH=%d hs=%d (T >= 4; head sizes 32, 64, 128)", s.T, s.B, s.NH, s.hs);
        }
        if (time_only) {
            time_case(s);
            printf("timed only, not checked\n");
            return 0;
        }
#if defined(CUDA_EMULATION)
        int timed = 0; // the emulation has no clock
#else
        int timed = 1;
#endif
        fails = cope_case_check(s, 7, version_dz_rows(version, s), TOL_OUT, TOL_PE, timed);
    }
    printf("%s\n", fails == 0 ? "ok" : "FAILED");
    return fails == 0 ? 0 : 1;
}
