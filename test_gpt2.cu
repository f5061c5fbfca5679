/*
Tests of the CUDA trainer for the encoding it is built with (make test_gpt2cu PE=<name>;
make test-cuda-run runs every encoding):

  ./test_gpt2cu PREFIX     the GPU path against the CPU reference that
                           `./test_gpt2 debug-state PREFIX` wrote (llmc/debug_state.h):
                           same checkpoint and batch, logits, loss, every parameter
                           gradient tensor by tensor, and the losses of 10 AdamW steps;
                           then the two checks below
  ./test_gpt2cu reference PREFIX   only the comparison with the CPU reference
  ./test_gpt2cu gradients PREFIX   only its logits, loss and gradients (no AdamW steps)
  ./test_gpt2cu pe-tensors PREFIX  the names of the encoding's parameter tensors in that
                           checkpoint (DAPE's too), one a line, "NAME vanishing" for one whose
                           gradient vanishes identically (PE_REF_ROW_CONSTANT, DAPE_ROW_CONSTANT): the tensors whose
                           gradients the emulation's planted sign flips negate
                           (dev/cuda/emulate/trainers.sh)
  ./test_gpt2cu attention  the attention kernels alone at long lengths (T = 4096 and
                           lengths that are no multiple of the tiles, head sizes 32, 64,
                           128) against a CPU reference computed row by row
                           (llmc/attention_check.cuh); `attention K` checks the K-th
                           shape alone (0, 1, 2: the CPU emulation runs one at a time)
  ./test_gpt2cu memory     an evaluation at 16k tokens allocates no T x T tensor
  ./test_gpt2cu device     exits 0 if a CUDA device is present (for make test-cuda-run)

Without a CUDA device (none, or no NVIDIA driver installed) every test prints
"test_gpt2cu: no CUDA device, skipped" and exits 0; any other failure to reach one (a
driver older than the runtime) is an error. Every check prints its measured error next to its tolerance; any failure
makes the exit status nonzero.

Tolerances. fp32 build (PRECISION=FP32, IEEE math): the two paths differ only in the
order of fp32 sums, so logits within 1e-4 (relative L2), loss within 1e-4, every
gradient tensor within 1e-3 (relative L2), step losses within 1e-3. bf16 build: the
activations and the weights the kernels read carry 8 significant bits (relative
rounding 2^-9 = 2e-3 per value, compounded over the layers), so logits within 2e-2,
loss within 2e-2, GPT-2's gradient tensors within 5e-2, the encodings' own small
tensors within 2e-1 (their gradients are sums over every (b, h, i, j) with
cancellations, so relative errors are larger: measured in the CPU emulation of the bf16
build, FIRE's c 0.12 (0.10 with the fp32 attention kernels in bf16), kcable's cable_bb
0.08, cable's 0.07), step losses within 5e-2 (llm.c's bf16 tolerance on losses). The attention check feeds the kernels values that are exact in
floatX, so only the kernels' own roundings to floatX separate them from the reference:
1e-4 for fp32 outputs, 1e-2 for bf16 (the outputs, and in the tensor-core kernels P and
dS before their second product), and 1e-3 for the bias gradients, which stay in fp32 in
both builds. A gradient tensor that vanishes identically (FIRE's
b2: a per-head constant added to a whole row of scores cancels in the softmax) holds
only rounding noise on both paths (rms about 1e-9), so a tensor whose CPU gradient has
an rms below 1e-7 is checked by its largest absolute difference instead: 1e-7 in fp32,
1e-4 in bf16 (there the noise is the rounding of the attention output, which enters
D_i = dout_i . out_i: measured 2e-5 for FIRE's b2 with either attention kernel, about
what the other FIRE tensors differ by).
*/
#define TESTING
#include "train_gpt2.cu"
#include "llmc/debug_state.h"
#include "llmc/attention_check.cuh"

#if defined(ENABLE_FP32)
#define TOL_LOGITS 1e-4
#define TOL_LOSS 1e-4
#define TOL_GRAD 1e-3
#define TOL_GRAD_PE 1e-3
#define TOL_STEPS 1e-3
#define TOL_ATT_OUT 1e-4
#define TOL_ZERO_GRAD 1e-7
#else
#define TOL_LOGITS 2e-2
#define TOL_LOSS 2e-2
#define TOL_GRAD 5e-2
#define TOL_GRAD_PE 2e-1
#define TOL_STEPS 5e-2
#define TOL_ATT_OUT 1e-2
#define TOL_ZERO_GRAD 1e-4
#endif
#define ZERO_GRAD_RMS 1e-7
#define TOL_ATT_PE 1e-3

static int failures = 0;

static void check(int ok, const char* what, double value, double tol) {
    printf("  %-58s %s  (%.3g, tolerance %.3g)\n", what, ok ? "ok  " : "FAIL", value, tol);
    if (!ok) { failures++; }
}

// relative L2 error and largest absolute difference of x against ref
static void errors(const float* x, const float* ref, size_t n, double* rel, double* maxabs) {
    double num = 0, den = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
        if (fabs(d) > m || d != d) { m = fabs(d); }
    }
    *rel = den > 0 ? sqrt(num / den) : sqrt(num);
    *maxabs = m;
}

// ----------------------------------------------------------------------------
// the GPU path against the CPU path's debug state

// the encoding's parameter tensors (and DAPE's): those a model of another encoding lacks (wpe
// is learned's)
static int pe_tensor(const GPT2* model, int k) { return model->param_sizes[k] > 0 && (k == P_WPE || k >= P_PE_BEGIN); }

// steps_too: whether to run the reference's AdamW steps after the gradients
static void test_reference(const char* prefix, int steps_too) {
    printf("GPU vs CPU reference %s (%s, %s)\n", prefix, model_label(PE_ID, DAPE_ID), PRECISION_NAME);
    char path[1024];
    snprintf(path, sizeof(path), "%s_state.bin", prefix);
    FILE* f = fopen_check(path, "rb");
    int header[256];
    fread_check(header, sizeof(int), 256, f, path);
    if (header[0] != DEBUG_STATE_MAGIC || header[1] != 1) { fatal("%s is not a debug state file", path); }
    int B = header[2], T = header[3], steps = header[4];
    uint64_t np;
    memcpy(&np, &header[8], 8);
    if (header[5] != PE_ID) { fatal("%s was written for PE '%s', this test is built for '%s'", path, pe_name(header[5]), pe_name(PE_ID)); }
    GPT2 model;
    snprintf(path, sizeof(path), "%s_model.bin", prefix);
    gpt2_build_from_checkpoint(&model, path);
    PEEval e = {header[6], 0.0, header[7]}; // the evaluation variant the reference ran under
    float factor;
    memcpy(&factor, &header[10], 4);
    e.rope_factor = factor;
    model.pe_eval = e;
    memcpy(&model.rp_key, &header[12], 8); // the draw of randomized positions (the checkpoint has their range)
    memcpy(&model.config.cape, &header[16], sizeof(CapeAugment)); // cape's augmentation (the run's, not the checkpoint's)
    gpt2_config_check(&model.config, path);
    if (np != model.num_parameters) { fatal("the debug state has %llu parameters, the checkpoint %zu", (unsigned long long)np, model.num_parameters); }
    int V = model.config.vocab_size, Vp = model.config.padded_vocab_size;
    size_t BT = (size_t)B * T;
    int* x = (int*)malloc_check(BT * sizeof(int));
    int* y = (int*)malloc_check(BT * sizeof(int));
    float* ref_logits = (float*)malloc_check(BT * Vp * sizeof(float));
    float ref_loss;
    float* ref_grads = (float*)malloc_check(np * sizeof(float));
    float* ref_steps = (float*)malloc_check(steps * sizeof(float));
    snprintf(path, sizeof(path), "%s_state.bin", prefix);
    fread_check(x, sizeof(int), BT, f, path);
    fread_check(y, sizeof(int), BT, f, path);
    fread_check(ref_logits, sizeof(float), BT * Vp, f, path);
    fread_check(&ref_loss, sizeof(float), 1, f, path);
    fread_check(ref_grads, sizeof(float), np, f, path);
    fread_check(ref_steps, sizeof(float), steps, f, path);
    int* given = (int*)malloc_check(BT * sizeof(int)); // the variant "pos": the positions the reference was given
    if (header[15]) { fread_check(given, sizeof(int), BT, f, path); }
    model.pos_in = header[15] ? given : NULL;
    fclose(f);

    // one forward and backward pass
    gpt2_zero_grad(&model);
    gpt2_forward(&model, x, y, B, T, 1.0f);
    gpt2_backward(&model);
    float* row = (float*)malloc_check(Vp * sizeof(float));
    double num = 0, den = 0, maxd = 0;
    for (size_t bt = 0; bt < BT; bt++) {
        gpt2_logits_row(&model, (int)(bt / T), (int)(bt % T), row);
        for (int v = 0; v < V; v++) {
            double d = (double)row[v] - ref_logits[bt * Vp + v];
            num += d * d;
            den += (double)ref_logits[bt * Vp + v] * ref_logits[bt * Vp + v];
            if (fabs(d) > maxd || d != d) { maxd = fabs(d); }
        }
    }
    double rel = sqrt(num / den);
    char what[160];
    snprintf(what, sizeof(what), "logits: relative L2 error (max abs %.2e)", maxd);
    check(rel <= TOL_LOGITS, what, rel, TOL_LOGITS);
    snprintf(what, sizeof(what), "loss %.6f vs CPU %.6f: abs difference", model.mean_loss, ref_loss);
    check(fabs(model.mean_loss - ref_loss) <= TOL_LOSS, what, fabs(model.mean_loss - ref_loss), TOL_LOSS);

    // every parameter gradient, tensor by tensor
    float* padded = download_float(model.grads_memory, model.num_padded);
    float* grads = (float*)malloc_check(np * sizeof(float));
    params_from_padded(&model, grads, padded);
    size_t at = 0;
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) {
        size_t n = model.param_sizes[k];
        if (n == 0) { continue; }
        double r, m, ref_sq = 0;
        errors(grads + at, ref_grads + at, n, &r, &m);
        for (size_t i = 0; i < n; i++) { ref_sq += (double)ref_grads[at + i] * ref_grads[at + i]; }
        double rms = sqrt(ref_sq / n);
        if (rms < ZERO_GRAD_RMS) { // a vanishing gradient: only rounding noise on both paths
            snprintf(what, sizeof(what), "grad %-9s %9zu: vanishes (rms %.1e): max abs difference", PARAM_NAMES[k], n, rms);
            check(m <= TOL_ZERO_GRAD, what, m, TOL_ZERO_GRAD);
        } else {
            double tol = k >= P_PE_BEGIN ? TOL_GRAD_PE : TOL_GRAD;
            snprintf(what, sizeof(what), "grad %-9s %9zu: relative L2 error (max abs %.2e)", PARAM_NAMES[k], n, m);
            check(r <= tol, what, r, tol);
        }
        at += n;
    }
    // an encoding that takes positions, given 0..T-1 in every row (a second instance of the
    // bias kernels), computes what it computes at the indices, bit for bit (but wte's gradient,
    // which encoder_backward sums with atomics in no fixed order: to 1e-6)
    if (rp_supported(PE_ID) && model.pos_in == NULL && model.config.rp_len == 0) {
        float* logits0 = (float*)malloc_check(BT * Vp * sizeof(float));
        for (size_t bt = 0; bt < BT; bt++) { gpt2_logits_row(&model, (int)(bt / T), (int)(bt % T), logits0 + bt * Vp); }
        float loss0 = model.mean_loss;
        for (size_t bt = 0; bt < BT; bt++) { given[bt] = (int)(bt % T); }
        model.pos_in = given;
        gpt2_zero_grad(&model);
        gpt2_forward(&model, x, y, B, T, 1.0f);
        gpt2_backward(&model);
        model.pos_in = NULL;
        float* again = download_float(model.grads_memory, model.num_padded);
        size_t wte_at = model.param_offsets[P_WTE], wte_n = model.param_sizes[P_WTE];
        int same = model.mean_loss == loss0 && memcmp(again, padded, wte_at * sizeof(float)) == 0
                   && memcmp(again + wte_at + wte_n, padded + wte_at + wte_n, (model.num_padded - wte_at - wte_n) * sizeof(float)) == 0;
        for (size_t bt = 0; bt < BT && same; bt++) {
            gpt2_logits_row(&model, (int)(bt / T), (int)(bt % T), row);
            same = memcmp(row, logits0 + bt * Vp, Vp * sizeof(float)) == 0;
        }
        check(same, "given positions 0..T-1: the logits, loss and gradients at the indices, bit for bit", !same, 0);
        double r, m;
        errors(again + wte_at, padded + wte_at, wte_n, &r, &m);
        check(r <= 1e-6, "given positions 0..T-1: wte's gradient (atomics), relative L2", r, 1e-6);
        free(logits0); free(again);
    }

    // the AdamW steps of the CPU writer: same settings, clipping at global norm 1
    for (int step = 0; step < steps && steps_too; step++) {
        gpt2_zero_grad(&model);
        gpt2_forward(&model, x, y, B, T, 1.0f);
        gpt2_backward(&model);
        float loss = model.mean_loss;
        double norm = sqrt(gpt2_grad_norm_squared(&model));
        gpt2_update(&model, DEBUG_LR, DEBUG_BETA1, DEBUG_BETA2, DEBUG_EPS, DEBUG_WD, norm > 1 ? (float)(1 / norm) : 1.0f, step + 1);
        snprintf(what, sizeof(what), "step %2d loss %.6f vs CPU %.6f: abs difference", step + 1, loss, ref_steps[step]);
        check(fabs(loss - ref_steps[step]) <= TOL_STEPS, what, fabs(loss - ref_steps[step]), TOL_STEPS);
    }
    free(x); free(y); free(ref_logits); free(ref_grads); free(ref_steps); free(row); free(padded); free(grads); free(given);
    gpt2_free(&model);
}

// ----------------------------------------------------------------------------
// the attention kernels alone

// the attention check's shapes: each encoding kind's list below has this many
#define ATTN_TEST_SHAPES 3
// only: the index of the one shape to check (0 .. ATTN_TEST_SHAPES - 1), or -1 for every shape
static void test_attention(int only) {
#if PE_IS(COPE) // CoPE's own kernels (llmc/attention_cope.cuh), P = T / 4 + 1
    const AttnShape cope_shapes[ATTN_TEST_SHAPES] = {{1, 1024, 1, 64}, {2, 1000, 2, 32}, {1, 777, 2, 128}};
    for (int k = 0; k < ATTN_TEST_SHAPES; k++) {
        if (only >= 0 && k != only) { continue; }
        AttnShape s = cope_shapes[k];
        failures += cope_case_check(s, 1000 + k, cope_dz_rows(s.B, s.T, s.NH, s.T / 4 + 1), TOL_ATT_OUT, TOL_ATT_PE, 0);
    }
    return;
#endif
#if PE_IS(COMPLEX_ORDER) // complex_order's own kernels (llmc/attention_complex.cuh), two streams
    const AttnShape complex_shapes[ATTN_TEST_SHAPES] = {{1, 4096, 1, 64, 0}, {2, 1000, 2, 32, 0}, {1, 777, 2, 128, 0}};
    for (int k = 0; k < ATTN_TEST_SHAPES; k++) {
        if (only >= 0 && k != only) { continue; }
        failures += complex_case_check(complex_shapes[k], 1000 + k, TOL_ATT_OUT, 0);
    }
    return;
#endif
    const AttnShape shapes[ATTN_TEST_SHAPES] = {
        {1, 4096, 1, 64, 0},    // long: every tiling boundary, T = 4096, one head
        {2, 1000, 2, 32, 0},    // T not a multiple of any tile, two rows of the batch, two heads
        {1, 777, 2, 128, 3000}, // the widest head, at randomized positions (the encodings that have them)
    };
    for (int k = 0; k < ATTN_TEST_SHAPES; k++) {
        if (only >= 0 && k != only) { continue; }
        AttnShape s = shapes[k];
        printf("attention kernels alone (%s, %s): B=%d T=%d NH=%d hs=%d\n", pe_name(PE_ID), PRECISION_NAME, s.B, s.T, s.NH, s.hs);
        AttnCase c;
        attn_case_setup(&c, s, 1000 + k);
        attn_case_run_layer(&c);
        failures += attn_case_compare(&c, TOL_ATT_OUT, TOL_ATT_PE);
        attn_case_free(&c);
    }
}

// ----------------------------------------------------------------------------
// evaluation memory at 16k tokens: linear in T, no B x NH x T x T tensor

static void test_memory(void) {
    int T = 16384;
    GPT2Config cfg = {};
    cfg.num_layers = 2; cfg.num_heads = 4; cfg.channels = 256;
    cfg.vocab_size = GPT2_VOCAB; cfg.padded_vocab_size = GPT2_PADDED_VOCAB; cfg.max_seq_len = T; cfg.pe = PE_ID;
    gpt2_config_set_build(&cfg);
    printf("evaluation memory at T=%d (%s, %s, L=2 NH=4 C=256)\n", T, model_label(PE_ID, DAPE_ID), PRECISION_NAME);
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 7);
#if PE_IS(FLOATER) // its positions' ODE leaves their range before 16k at the initialization: without its output
    // layer (P = P0 at every position), which keeps every position's solution and so the memory
    cudaCheck(cudaMemset(model.params.floater_w2, 0, model.param_sizes[P_FLOATER_W2] * sizeof(floatX)));
#endif
    cudaCheck(cudaDeviceSynchronize());
    size_t free0, free1, total;
    cudaCheck(cudaMemGetInfo(&free0, &total));
    size_t base = cuda_bytes_now;
    cuda_bytes_peak = cuda_bytes_now;
    int* x = (int*)malloc_check(T * sizeof(int));
    int* y = (int*)malloc_check(T * sizeof(int));
    uint64_t rng = random_seed(5);
    for (int t = 0; t < T; t++) { x[t] = (int)(random_u32(&rng) % GPT2_VOCAB); y[t] = (int)(random_u32(&rng) % GPT2_VOCAB); }
    gpt2_forward(&model, x, y, 1, T, 0);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemGetInfo(&free1, &total));
    double grown = (cuda_bytes_peak - base) / 1048576.0;
    double device_grown = ((double)free0 - (double)free1) / 1048576.0;
    double txt = (double)cfg.num_heads * T * T * sizeof(floatX) / 1048576.0; // one B x NH x T x T tensor
    char what[160];
    snprintf(what, sizeof(what), "evaluation buffers, MiB (one B*NH*T*T tensor: %.0f MiB)", txt);
    check(grown < txt / 2, what, grown, txt / 2);
    snprintf(what, sizeof(what), "device memory taken by the evaluation, MiB (cudaMemGetInfo)");
    check(device_grown < txt / 2, what, device_grown, txt / 2);
    check(isfinite(model.mean_loss) && model.mean_loss > 0, "loss at 16k tokens is finite", model.mean_loss, 0);
    free(x);
    free(y);
    gpt2_free(&model);
}

int main(int argc, char** argv) {
    if (cuda_device_count() == 0) {
        if (argc > 1 && strcmp(argv[1], "device") == 0) { return 1; }
        printf("test_gpt2cu: no CUDA device, skipped\n");
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "device") == 0) { return 0; }
    int with_prefix = argc > 1 && (strcmp(argv[1], "reference") == 0 || strcmp(argv[1], "gradients") == 0 || strcmp(argv[1], "pe-tensors") == 0);
    if (argc < 2 || (with_prefix && argc < 3)) {
        fprintf(stderr, "usage: %s PREFIX | reference PREFIX | gradients PREFIX | pe-tensors PREFIX | attention [0|1|2] | memory | device\n", argv[0]);
        return 1;
    }
    if (strcmp(argv[1], "pe-tensors") == 0) {
        char path[1024];
        snprintf(path, sizeof(path), "%s_model.bin", argv[2]);
        GPT2 model;
        gpt2_build_from_checkpoint(&model, path);
        for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) { // a gradient that vanishes identically is marked so
            if (pe_tensor(&model, k)) { printf("%s%s\n", PARAM_NAMES[k], (DAPE_ID == 0 ? PE_REF_ROW_CONSTANT(k) : DAPE_ROW_CONSTANT(k)) ? " vanishing" : ""); }
        }
        gpt2_free(&model);
        return 0;
    }
    if (strcmp(argv[1], "reference") == 0 || strcmp(argv[1], "gradients") == 0) {
        test_reference(argv[2], strcmp(argv[1], "reference") == 0);
    } else if (strcmp(argv[1], "attention") == 0) {
        int only = -1;
        if (argc > 2) {
            char* end;
            long k = strtol(argv[2], &end, 10);
            if (end == argv[2] || *end != '\0' || k < 0 || k >= ATTN_TEST_SHAPES) {
                fprintf(stderr, "test_gpt2cu: attention takes a shape's index from 0 to %d, not '%s'\n", ATTN_TEST_SHAPES - 1, argv[2]);
                return 1;
            }
            only = (int)k;
        }
        test_attention(only);
    } else if (strcmp(argv[1], "memory") == 0) {
        test_memory();
    } else {
        test_reference(argv[1], 1);
        test_attention(-1);
        test_memory();
    }
    if (failures == 0) { printf("all GPU tests passed (%s, %s)\n", model_label(PE_ID, DAPE_ID), PRECISION_NAME); }
    else { printf("%d FAILURES (%s, %s)\n", failures, model_label(PE_ID, DAPE_ID), PRECISION_NAME); }
    return failures == 0 ? 0 : 1;
}
