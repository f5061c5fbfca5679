/*
Tests of the CPU trainer for the encoding it is built with (make test builds and runs
it for every encoding, in fp32, and again in fp64 for the gradient checks):

  ./test_gpt2            fp32 tests: the forward pass against an independent naive
                         implementation of the encoding's definition (explicit bias
                         matrices), identities between encodings, NoPE's permutation
                         invariance, BLAS vs plain-loop matmuls, learned's maxT limit,
                         checkpoint round trip and bad files, crash-safe writes,
                         overfitting one batch, memory at long sequence lengths
  ./gradcheck gradcheck [masked]
                         fp64: every parameter tensor's analytic gradient against
                         central finite differences (also under each of the encoding's
                         test variants, PE_TEST_VARIANTS); masked: of the loss on a third of
                         the targets only (answer-only data), whose value is checked too
  ./test_gpt2 compare A.bin B.bin TOL
                         compares two checkpoints tensor by tensor (exit 1 if any
                         element differs by more than TOL; 0 asks for bit equality)
  ./test_gpt2 debug-state PREFIX [VARIANT]
                         writes the reference that test_gpt2cu compares the CUDA
                         path against (llmc/debug_state.h), optionally under a
                         variant: words joined by '+', an evaluation variant (rope: pi,
                         ntk, yarn, dynamic-pi, dynamic-ntk, dynamic-yarn; xpos: bca),
                         randomized positions (rp), two thirds of the targets unscored
                         (mask), the encoding's own options (rope: rb, rt, rr; see
                         pe_test_option), e.g. rb+rt+rr+yarn
  ./test_gpt2 variants   prints the encoding's own test variants (PE_TEST_VARIANTS), which
                         the emulated CUDA path is compared under too
  ./test_gpt2 debug-state-tiny PREFIX [VARIANT]
                         the same for a tiny model, small enough for the CUDA path's
                         CPU emulation (dev/cuda/Makefile) to run in seconds
  ./gradcheck torch-reference PREFIX [MODEL.bin|-] [VARIANT]
                         writes the reference that python/test_model.py compares the
                         PyTorch model against, in fp64, optionally under an evaluation
                         variant as debug-state (see write_torch_reference)

Every check prints its measured error next to its tolerance and fails the run if it
is exceeded.
*/
#define TESTING
#include "train_gpt2.c"
#include <sys/wait.h>
#include "llmc/debug_state.h"

static int failures = 0;
static char tmpdir[256]; // the tests' files (main)

static void check(int ok, const char* what, double value, double tol) {
    printf("  %-58s %s  (%.3g, tolerance %.3g)\n", what, ok ? "ok  " : "FAIL", value, tol);
    if (!ok) { failures++; }
}

// a tiny model: 2 layers, 3 heads (a non-power-of-two count for ALiBi's slopes),
// head size 4, a vocabulary of 250 padded to 256
static GPT2Config tiny_config(int maxT) {
    GPT2Config c = {0};
    c.num_layers = 2; c.num_heads = 3; c.channels = 12;
    c.vocab_size = 250; c.padded_vocab_size = 256; c.max_seq_len = maxT; c.pe = PE_ID;
    gpt2_config_set_build(&c);
    return c;
}

// the tests' tokens: uniform over the vocabulary, then as the encoding's tests need them
// (pe_test_tokens, below: BiPE's separators)
static void pe_test_tokens(int* x, int n, uint64_t* rng);
static void random_tokens(int* x, int n, int V, uint64_t* rng) {
    for (int i = 0; i < n; i++) { x[i] = (int)(random_u32(rng) % V); }
    pe_test_tokens(x, n, rng);
}

// moves every parameter away from its initial value so that no gradient is
// trivially zero (layernorm weights are all 1 and biases 0 after init)
static void perturb_parameters(GPT2* model, real amount, uint64_t* rng) {
    for (size_t i = 0; i < model->num_parameters; i++) { model->params_memory[i] += amount * random_normal(rng); }
    pe_project(model);
}

// for the pe/ files' tests: a tiny model built from `seed`, its parameters perturbed by 0.1,
// and B x T random inputs x and targets y drawn after them from random_seed(draw), whose
// state it returns for what the test draws next
static uint64_t tiny_model_batch(GPT2* model, int maxT, int seed, int draw, int* x, int* y, int B, int T) {
    GPT2Config cfg = tiny_config(maxT);
    gpt2_build_from_config(model, &cfg, seed);
    uint64_t rng = random_seed(draw);
    perturb_parameters(model, 0.1f, &rng);
    random_tokens(x, B * T, cfg.vocab_size, &rng);
    random_tokens(y, B * T, cfg.vocab_size, &rng);
    return rng;
}

// ----------------------------------------------------------------------------
// the encoding's own tests and its definition written out again, independently of its
// hooks, in double (its file's PE_PART_TEST, pe/<file>.h), with the defaults of what it
// leaves out: pe_ref_bias (b(i, j); 0), pe_ref_attention (an attention that is no softmax of
// biased scores over the values, shaw's: the layer's output on explicit T x T matrices against
// the model's; none: attention_vs_reference with pe_ref_bias), pe_ref_embed (the position
// embedding added to a token's value; none), pe_ref_rotate (q, k, v of layer l as the
// encoding changes them; none), pe_test_config and pe_test_params (the tests' model: what its
// regimes need), pe_test_tokens (the tests' tokens: as drawn), pe_loss_piece (the piece of a
// piecewise-smooth loss; 0), pe_tests (its identities), pe_test_gradients (fp64 checks of its
// own)

typedef double (*BiasFn)(GPT2* model, int l, int b, int h, int i, int j, int T);
static double attention_vs_reference(GPT2* model, int l, BiasFn bias, int B, int T);
// the bias of plain causal attention (nope's), for identities
static double no_bias(GPT2* model, int l, int b, int h, int i, int j, int T) { return 0; }
static double qkv_vs_reference(GPT2* model, int l, int B, int T);
typedef void (*FailFn)(const void*);
static void expect_failure(const char* what, FailFn fn, const void* arg, const char* expect);
static void fail_forward_beyond_maxT(const void* arg);

#define PE_PART PE_PART_REF
#include "llmc/pe_part.h"
#undef PE_PART
#define PE_PART PE_PART_TEST
#include "llmc/pe_part.h"
#undef PE_PART

// the model's tensors in checkpoint order, as an array
static void tensor_pointers(real** t, real* memory, const size_t* sizes) {
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) { t[k] = memory; memory += sizes[k]; }
}

#ifdef PE_REF_POS_BIAS
// a bias of positions (the file's PE_PART_REF) at the model's layer l
#define PE_REF_BIAS
static double pe_ref_bias(GPT2* model, int l, int b, int h, int i, int j, int T) {
    real* t[NUM_PARAMETER_TENSORS];
    tensor_pointers(t, model->params_memory, model->param_sizes);
    PERef r;
    pe_ref_init(&r, &model->config, model->param_sizes, (const real* const*)t, l);
    double v = pe_ref_pos_bias(&r, h, i, j);
    pe_ref_free(&r);
    return v;
}
#endif
// a bias with parameter gradients has its reference gradient (PE_PART_REF), which the CUDA
// attention check compares the kernels' with, and which test_ref_bias_gradient checks here
#if PE_BH_GRADS > 0 && !defined(PE_REF_POS_BIAS_GRAD)
#error "an encoding with bias parameter gradients (PE_BH_GRADS) defines pe_ref_pos_bias_grad in its PE_PART_REF (docs/adding-an-encoding.md)"
#endif
#ifndef PE_REF_BIAS
static double pe_ref_bias(GPT2* model, int l, int b, int h, int i, int j, int T) { return 0; }
#endif
#ifndef PE_REF_EMBED
static double pe_ref_embed(GPT2* model, double token, size_t bt, int c) { return token; }
#endif
#ifndef PE_TEST_TOKENS
static void pe_test_tokens(int* x, int n, uint64_t* rng) {}
#endif
#ifndef PE_REF_ROTATE
static void pe_ref_rotate(GPT2* model, int l, double* qkv, int pos, int T) {}
#endif
#ifndef PE_TEST_CONFIG
static void pe_test_config(GPT2Config* cfg) {}
#endif
#ifndef PE_TEST_PARAMS
static void pe_test_params(GPT2* model, uint64_t* rng) {}
#endif
#ifndef PE_LOSS_PIECE
static uint64_t pe_loss_piece(GPT2* model, int B, int T) { return 0; }
#endif
#ifndef PE_TESTS
static void pe_tests(void) {}
#endif
#ifndef PE_TEST_VARIANTS // the encoding's own options as test variants: none
#define PE_TEST_VARIANTS ""
static int pe_test_option(GPT2Config* cfg, const char* word) { return 0; }
#endif

// A test variant (NULL: plain): words joined by '+', each an evaluation variant of the encoding
// (into e), rp (randomized positions), pos (given positions: debug_positions), mask
// (answer-only targets) or one of the encoding's own options (pe_test_option, set in cfg; NULL:
// none taken, the checkpoint holds them); `who` names the caller in the error that a word no
// variant of the encoding's is
static void parse_test_variant(const char* who, const char* variant, GPT2Config* cfg, PEEval* e, int* rp, int* masked, int* given) {
    *rp = *masked = *given = 0;
    if (variant == NULL) { return; }
    char buf[256];
    if (strlen(variant) >= sizeof(buf)) { fatal("%s: variant '%s' too long", who, variant); }
    strcpy(buf, variant);
    char* rest = NULL;
    for (char* word = strtok_r(buf, "+", &rest); word != NULL; word = strtok_r(NULL, "+", &rest)) {
        int v = 0;
        while (v < PE_EVAL_NUM && strcmp(word, PE_EVAL_NAMES[v]) != 0) { v++; }
        if (strcmp(word, "rp") == 0 && rp_supported(PE_ID)) { *rp = 1; }
        else if (strcmp(word, "pos") == 0 && rp_supported(PE_ID)) { *given = 1; }
        else if (strcmp(word, "mask") == 0) { *masked = 1; }
        else if (v < PE_EVAL_NUM && pe_has_eval_variant(v)) { e->variant = v; }
        else if (cfg == NULL || !pe_test_option(cfg, word)) {
            fatal("%s: no variant '%s' for PE '%s'", who, word, model_label(PE_ID, DAPE_ID));
        }
    }
}
#ifndef PE_TEST_GRADIENTS
static void pe_test_gradients(GPT2* model, int B, int T) {}
#endif

// naive attention with an explicit bias matrix from `bias` on the model's stored q, k, v
// of layer l, at the tokens' positions (given or drawn: the layer's, row by row); returns
// the largest difference to the model's stored attention output
static double attention_vs_reference(GPT2* model, int l, BiasFn bias, int B, int T) {
    int C = model->config.channels, NH = model->config.num_heads, hs = C / NH;
    const int* positions = pe_positions(model, l);
    const real* qkv = model->acts.t.qkv + (size_t)l * model->acts_N * 3 * C;
    const real* out = model->acts.t.atty + (size_t)l * model->acts_N * C;
    double* scores = (double*)malloc_check((size_t)T * T * sizeof(double));
    double maxdiff = 0;
    for (int b = 0; b < B; b++) {
        const int* pos = positions + (size_t)b * T;
        for (int h = 0; h < NH; h++) {
            for (int i = 0; i < T; i++) {
                for (int j = 0; j < T; j++) {
                    if (j > i) { scores[i * T + j] = -INFINITY; continue; }
                    double dot = 0;
                    for (int c = 0; c < hs; c++) {
                        dot += qkv[((size_t)b * T + i) * 3 * C + h * hs + c] * qkv[((size_t)b * T + j) * 3 * C + C + h * hs + c];
                    }
                    scores[i * T + j] = dot / sqrt((double)hs) + bias(model, l, b, h, pos[i], pos[j], T);
                }
            }
            for (int i = 0; i < T; i++) {
                double m = -INFINITY, sum = 0;
                for (int j = 0; j < T; j++) { m = fmax(m, scores[i * T + j]); }
                for (int j = 0; j < T; j++) { sum += exp(scores[i * T + j] - m); }
                for (int c = 0; c < hs; c++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++) { o += exp(scores[i * T + j] - m) / sum * qkv[((size_t)b * T + j) * 3 * C + 2 * C + h * hs + c]; }
                    maxdiff = fmax(maxdiff, fabs(o - out[((size_t)b * T + i) * C + h * hs + c]));
                }
            }
        }
    }
    free(scores);
    return maxdiff;
}

// ----------------------------------------------------------------------------
// DAPE's definition, written out again: the official code's computation on full T x T
// matrices, and the spec's row reference (next-encodings.md 2.7) transcribed

// S[h][i][j] = q_i.k_j / sqrt(hs) for every (i, j), above the diagonal too (the official
// code runs DAPE on the unmasked scores), and the base's bias (0 above the diagonal, as
// the code's tril(i - j)), of batch row b in layer l
static void ref_scores_and_bias(double* S, double* Bt, GPT2* model, int l, int b, int T) {
    int C = model->config.channels, NH = model->config.num_heads, hs = C / NH;
    const real* qkv = model->acts.t.qkv + (size_t)l * model->acts_N * 3 * C;
    const int* pos = pe_positions(model, l) + (size_t)b * T; // the bias at the tokens' positions
    for (int h = 0; h < NH; h++) {
        for (int i = 0; i < T; i++) {
            for (int j = 0; j < T; j++) {
                double dot = 0;
                for (int c = 0; c < hs; c++) {
                    dot += qkv[((size_t)b * T + i) * 3 * C + h * hs + c] * qkv[((size_t)b * T + j) * 3 * C + C + h * hs + c];
                }
                S[((size_t)h * T + i) * T + j] = dot / sqrt((double)hs);
                Bt[((size_t)h * T + i) * T + j] = j <= i ? pe_ref_bias(model, l, b, h, pos[i], pos[j], T) : 0;
            }
        }
    }
}

static double ref_lrelu(double v) { return v > 0 ? v : 0.01 * v; }

// the official code: X = tril(cat(S, Beta)) (channels: the H scores, then the H biases;
// no bias channels for nope and rope), Conv2d(Cin -> D, kernel (1, k), padding (0, k/2))
// along the keys, LeakyReLU, Conv2d(D -> H, same), A = S + Beta + Y. The hidden layer
// spans T + extend columns (extend = k/2: the T -> infinity edge rule). A is written for
// j <= i; (S, Beta) above the diagonal must not matter.
static void ref_dape_logits(double* A, const double* S, const double* Bt, GPT2* model, int l, int T, int extend) {
    GPT2Config* cfg = &model->config;
    int NH = cfg->num_heads, K = cfg->dape, p = K / 2, D = cfg->dape_width, Cin = dape_in_channels(cfg->pe, NH);
    const real* W1 = model->params.dape_w1 + (size_t)l * D * Cin * K;
    const real* b1 = model->params.dape_b1 + (size_t)l * D;
    const real* W2 = model->params.dape_w2 + (size_t)l * NH * D * K;
    const real* b2 = model->params.dape_b2 + (size_t)l * NH;
    int Tx = T + extend;
    double* X = (double*)calloc_check((size_t)Cin * T * Tx, sizeof(double));
    double* Hd = (double*)calloc_check((size_t)D * T * Tx, sizeof(double));
    for (int ch = 0; ch < Cin; ch++) {
        const double* src = ch < NH ? S + (size_t)ch * T * T : Bt + (size_t)(ch - NH) * T * T;
        for (int i = 0; i < T; i++) {
            for (int j = 0; j <= i; j++) { X[((size_t)ch * T + i) * Tx + j] = src[(size_t)i * T + j]; }
        }
    }
    for (int d = 0; d < D; d++) {
        for (int i = 0; i < T; i++) {
            for (int j = 0; j < Tx; j++) {
                double z = b1[d];
                for (int ch = 0; ch < Cin; ch++) {
                    for (int t = 0; t < K; t++) {
                        int jj = j + t - p;
                        if (jj >= 0 && jj < Tx) { z += W1[((size_t)d * Cin + ch) * K + t] * X[((size_t)ch * T + i) * Tx + jj]; }
                    }
                }
                Hd[((size_t)d * T + i) * Tx + j] = ref_lrelu(z);
            }
        }
    }
    for (int h = 0; h < NH; h++) {
        for (int i = 0; i < T; i++) {
            for (int j = 0; j <= i; j++) {
                double y = b2[h];
                for (int d = 0; d < D; d++) {
                    for (int t = 0; t < K; t++) {
                        int jj = j + t - p;
                        if (jj >= 0 && jj < Tx) { y += W2[((size_t)h * D + d) * K + t] * Hd[((size_t)d * T + i) * Tx + jj]; }
                    }
                }
                size_t at = ((size_t)h * T + i) * T + j;
                A[at] = S[at] + (Cin == 2 * NH ? Bt[at] : 0) + y;
            }
        }
    }
    free(X);
    free(Hd);
}

// the spec's pure-Python row reference (next-encodings.md 2.7), line by line:
// o[c][h] for c = 0..i of row i (without the residual s + b)
static void spec_dape_row(double* o, int i, int T, const double* S, const double* Bt, GPT2* model, int l, int edge_exact) {
    GPT2Config* cfg = &model->config;
    int H = cfg->num_heads, k = cfg->dape, p = k / 2, D = cfg->dape_width, Cin = dape_in_channels(cfg->pe, H);
    const real* W1 = model->params.dape_w1 + (size_t)l * D * Cin * k;
    const real* b1 = model->params.dape_b1 + (size_t)l * D;
    const real* W2 = model->params.dape_w2 + (size_t)l * H * D * k;
    const real* b2 = model->params.dape_b2 + (size_t)l * H;
    double xs[DAPE_MAX_KERNEL][64], hs_[DAPE_MAX_KERNEL][DAPE_MAX_WIDTH], hid[DAPE_MAX_WIDTH];
    for (int c = 0; c <= i; c++) {
        for (int t = 0; t < k; t++) { // hs_ = [hid(c + t - p) for t in range(k)]
            int ch_c = c + t - p;
            if (ch_c < 0 || (edge_exact && ch_c >= T)) { for (int o2 = 0; o2 < D; o2++) { hs_[t][o2] = 0; } continue; }
            for (int t2 = 0; t2 < k; t2++) { // xs = [X(ch_c + t2 - p) for t2 in range(k)]
                int xc = ch_c + t2 - p;
                for (int ch = 0; ch < Cin; ch++) {
                    xs[t2][ch] = 0 <= xc && xc <= i ? (ch < H ? S[((size_t)ch * T + i) * T + xc] : Bt[((size_t)(ch - H) * T + i) * T + xc]) : 0;
                }
            }
            for (int o2 = 0; o2 < D; o2++) {
                double z = b1[o2];
                for (int ch = 0; ch < Cin; ch++) {
                    for (int t2 = 0; t2 < k; t2++) { z += W1[((size_t)o2 * Cin + ch) * k + t2] * xs[t2][ch]; }
                }
                hid[o2] = ref_lrelu(z);
            }
            for (int o2 = 0; o2 < D; o2++) { hs_[t][o2] = hid[o2]; }
        }
        for (int h = 0; h < H; h++) {
            double y = b2[h];
            for (int ch = 0; ch < D; ch++) {
                for (int t = 0; t < k; t++) { y += W2[((size_t)h * D + ch) * k + t] * hs_[t][ch]; }
            }
            o[(size_t)c * H + h] = y;
        }
    }
}

// naive attention with DAPE's logits from ref_dape_logits on the model's stored q, k, v of
// layer l; returns the largest difference to the model's stored attention output
static double dape_attention_vs_reference(GPT2* model, int l, int B, int T, int extend) {
    int C = model->config.channels, NH = model->config.num_heads, hs = C / NH;
    const real* qkv = model->acts.t.qkv + (size_t)l * model->acts_N * 3 * C;
    const real* out = model->acts.t.atty + (size_t)l * model->acts_N * C;
    size_t n = (size_t)NH * T * T;
    double* S = (double*)malloc_check(n * sizeof(double));
    double* Bt = (double*)malloc_check(n * sizeof(double));
    double* A = (double*)malloc_check(n * sizeof(double));
    double maxdiff = 0;
    for (int b = 0; b < B; b++) {
        ref_scores_and_bias(S, Bt, model, l, b, T);
        ref_dape_logits(A, S, Bt, model, l, T, extend);
        for (int h = 0; h < NH; h++) {
            for (int i = 0; i < T; i++) {
                const double* a = A + ((size_t)h * T + i) * T;
                double m = -INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) { m = fmax(m, a[j]); }
                for (int j = 0; j <= i; j++) { sum += exp(a[j] - m); }
                for (int c = 0; c < hs; c++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++) { o += exp(a[j] - m) / sum * qkv[((size_t)b * T + j) * 3 * C + 2 * C + h * hs + c]; }
                    maxdiff = fmax(maxdiff, fabs(o - out[((size_t)b * T + i) * C + h * hs + c]));
                }
            }
        }
    }
    free(S); free(Bt); free(A);
    return maxdiff;
}

// q, k, v as the definition makes them: ln1 @ qkvw^T + qkvb, then the encoding's change (rope's
// rotation, floater's position vectors)
static double qkv_vs_reference(GPT2* model, int l, int B, int T) {
    int C = model->config.channels;
    double maxdiff = 0;
    for (int bt = 0; bt < B * T; bt++) {
        const real* x = model->acts.t.ln1 + ((size_t)l * model->acts_N + bt) * C;
        const real* stored = model->acts.t.qkv + ((size_t)l * model->acts_N + bt) * 3 * C;
        double ref[3 * 4096];
        for (int o = 0; o < 3 * C; o++) {
            double acc = model->params.qkvb[(size_t)l * 3 * C + o];
            for (int c = 0; c < C; c++) { acc += x[c] * model->params.qkvw[((size_t)l * 3 * C + o) * C + c]; }
            ref[o] = acc;
        }
        pe_ref_rotate(model, l, ref, pe_positions(model, l)[bt], T);
        for (int o = 0; o < 3 * C; o++) { maxdiff = fmax(maxdiff, fabs(ref[o] - stored[o])); }
    }
    return maxdiff;
}

// the embeddings as the definition makes them: wte[token] and the position embedding
static double embedding_vs_reference(GPT2* model, const int* x, int B, int T) {
    int C = model->config.channels;
    double maxdiff = 0;
    for (int bt = 0; bt < B * T; bt++) {
        for (int c = 0; c < C; c++) {
            double ref = pe_ref_embed(model, model->params.wte[(size_t)x[bt] * C + c], (size_t)bt, c);
            maxdiff = fmax(maxdiff, fabs(ref - model->acts.t.encoded[(size_t)bt * C + c]));
        }
    }
    return maxdiff;
}

// the positions a test's model runs at: the indices, a draw of randomized positions from
// [0, 3T), or given ones (debug_positions: shifted, in chunks, gapped; below 2T + B)
enum { AT_INDICES, AT_DRAWN, AT_GIVEN };
static const char* const AT_NAMES[] = {"", ", randomized positions", ", given positions"};

// the tiny model of up to T tokens in the regimes the encoding's tests ask for (pe_test_config,
// pe_test_params), built from `seed`, at positions `at` (AT_DRAWN: of seed rp_seed under the
// draw key (RP_STREAM_TEST, key); AT_GIVEN: room for them, which the caller gives, pos_in), its
// parameters perturbed from random_seed(draw), whose state it returns for what the test draws next
static uint64_t regime_model(GPT2* model, int T, int at, int rp_seed, int seed, int key, int draw) {
    GPT2Config cfg = tiny_config(T);
    if (at == AT_DRAWN) { cfg.rp_len = 3 * T; cfg.rp_seed = rp_seed; }
    if (at == AT_GIVEN) { pe_config_positions(&cfg, 3 * T); }
    pe_test_config(&cfg);
    gpt2_build_from_config(model, &cfg, seed);
    model->rp_key = rp_key(RP_STREAM_TEST, (uint64_t)key, 0);
    uint64_t rng = random_seed(draw);
    perturb_parameters(model, 0.1f, &rng);
    pe_test_params(model, &rng);
    return rng;
}

// at: the positions (the encodings that take them: randomized, or given per row)
static void test_reference_forward(int at) {
    printf("forward pass against the definition (%s%s)\n", pe_name(PE_ID), AT_NAMES[at]);
    int B = 2, T = 40; // T > 16 exercises T5's logarithmic buckets
    GPT2 model;
    uint64_t rng = regime_model(&model, T, at, 5, 7, 1, 11);
    GPT2Config cfg = model.config;
    int x[80], y[80], given[80];
    debug_positions(given, B, T);
    model.pos_in = at == AT_GIVEN ? given : NULL;
    random_tokens(x, B * T, cfg.vocab_size, &rng);
    random_tokens(y, B * T, cfg.vocab_size, &rng);
    gpt2_forward(&model, x, y, B, T, 1); // a training forward keeps every layer's activations
    check(embedding_vs_reference(&model, x, B, T) < 1e-5, "embeddings = wte[token] (x sqrt(C)) + position embedding", embedding_vs_reference(&model, x, B, T), 1e-5);
    for (int l = 0; l < cfg.num_layers; l++) {
        char what[128];
        double dq = qkv_vs_reference(&model, l, B, T);
        snprintf(what, sizeof(what), "layer %d: q, k, v (as the PE changes them)", l);
        check(dq < 1e-4, what, dq, 1e-4);
#if DAPE_ID
        double da = dape_attention_vs_reference(&model, l, B, T, 0);
        snprintf(what, sizeof(what), "layer %d: DAPE attention on explicit T x T matrices", l);
#elif defined(PE_REF_ATTENTION)
        double da = pe_ref_attention(&model, l, B, T);
        snprintf(what, sizeof(what), "layer %d: the encoding's attention on explicit T x T matrices", l);
#else
        double da = attention_vs_reference(&model, l, pe_ref_bias, B, T);
        snprintf(what, sizeof(what), "layer %d: attention with the explicit bias matrix", l);
#endif
        check(da < 1e-5, what, da, 1e-5);
    }
    gpt2_free(&model);
}

// ---- positions as data (llmc/model.h pe_positions_make) ----

// the logits, the loss and every gradient of one training pass over x, y (B x T) at the
// positions given (NULL: none) into logits (B T Vp) and grads (the parameters'); returns the loss
static double pass_at(GPT2* model, const int* x, const int* y, int B, int T, const int* given, float* logits, real* grads) {
    model->pos_in = given;
    gpt2_zero_grad(model);
    gpt2_forward(model, x, y, B, T, 1);
    gpt2_backward(model);
    for (int bt = 0; bt < B * T; bt++) { gpt2_logits_row(model, bt / T, bt % T, logits + (size_t)bt * model->config.padded_vocab_size); }
    memcpy(grads, model->grads_memory, model->num_parameters * sizeof(real));
    model->pos_in = NULL;
    return model->mean_loss;
}

static void fail_given_positions(const void* arg) {
    GPT2Config cfg = tiny_config(8);
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 1);
    int x[8] = {0}, pos[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    model.pos_in = pos;
    gpt2_forward(&model, x, NULL, 1, 8, 0);
}

// An encoding that takes positions, given 0..T-1 in every row, computes what it computes
// without them, bit for bit (logits, loss, every gradient), and other positions change its
// logits; one that takes none refuses them in one line.
static void test_given_positions(void) {
    printf("given positions (%s)\n", model_label(PE_ID, DAPE_ID));
    if (!rp_supported(PE_ID)) {
        expect_failure("positions given to an encoding that takes none", fail_given_positions, NULL, "which takes none");
        return;
    }
    enum { B = 3, T = 30 };
    GPT2 model;
    uint64_t rng = regime_model(&model, T, AT_GIVEN, 0, 23, 7, 29);
    int x[B * T], y[B * T], indices[B * T], given[B * T];
    random_tokens(x, B * T, model.config.vocab_size, &rng);
    random_tokens(y, B * T, model.config.vocab_size, &rng);
    for (int bt = 0; bt < B * T; bt++) { indices[bt] = bt % T; }
    debug_positions(given, B, T);
    size_t nl = (size_t)B * T * model.config.padded_vocab_size, np = model.num_parameters;
    float* la = (float*)malloc_check(nl * sizeof(float));
    float* lb = (float*)malloc_check(nl * sizeof(float));
    real* ga = (real*)malloc_check(np * sizeof(real));
    real* gb = (real*)malloc_check(np * sizeof(real));
    double loss_a = pass_at(&model, x, y, B, T, NULL, la, ga);
    double loss_b = pass_at(&model, x, y, B, T, indices, lb, gb);
    double gdiff = 0, gmax = 0;
    for (size_t k = 0; k < np; k++) { gdiff = fmax(gdiff, fabs(ga[k] - gb[k])); gmax = fmax(gmax, fabs(ga[k])); }
    // DAPE's CPU backward adds its threads' rows in the order the threads took them: its
    // gradients equal within rounding (1e-6 of the largest), every other build's bit for bit
    int same = loss_a == loss_b && memcmp(la, lb, nl * sizeof(float)) == 0 && (DAPE_ID ? gdiff <= 1e-6 * gmax : gdiff == 0);
    check(same, DAPE_ID ? "0..T-1 given in every row: the logits and loss without them bit for bit, the gradients within 1e-6"
                        : "0..T-1 given in every row: the logits, loss and gradients without them, bit for bit", gdiff / gmax,
          DAPE_ID ? 1e-6 : 0);
    pass_at(&model, x, y, B, T, given, lb, gb);
    double change = 0;
    for (size_t k = 0; k < nl; k++) { change = fmax(change, fabs(la[k] - lb[k])); }
    check(change > 1e-3, "shifted, chunked and gapped positions change the logits", change, 1e-3);
    free(la); free(lb); free(ga); free(gb);
    gpt2_free(&model);
}

// ----------------------------------------------------------------------------
// identities that pin the math

// ---- randomized positions (llmc/pe.h, -rp L) ----

// the logits of every position of one forward pass over x (B x T), into out (B T Vp)
static void all_logits(GPT2* model, const int* x, int B, int T, float* out) {
    gpt2_forward(model, x, NULL, B, T, 0);
    for (int bt = 0; bt < B * T; bt++) { gpt2_logits_row(model, bt / T, bt % T, out + (size_t)bt * model->config.padded_vocab_size); }
}

static void fail_rp_too_long(const void* arg) {
    (void)arg;
    GPT2Config cfg = tiny_config(20);
    cfg.rp_len = 20; cfg.rp_seed = 1;
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 1);
    int x[24] = {0};
    gpt2_forward(&model, x, NULL, 1, 24, 0); // 24 positions cannot be drawn from [0, 20)
}

// The draw (rp_draw): sorted, distinct, within [0, L), L = T is 0..T-1, every position
// equally likely, a function of (seed, key, layer) alone; in a model: L = T and the
// plainpos variant give the plain model's logits bit for bit, a learned model equals a
// plain one whose wpe rows are the drawn ones, the draw changes the logits, the layers
// draw apart (except the embeddings), and more tokens than L are refused.
static void test_random_positions(void) {
    printf("randomized positions (%s)\n", pe_name(PE_ID));
    int bad = 0, T = 8, L = 32, N = 4000;
    int pos[64], again[64], count[32] = {0};
    for (int n = 0; n < N; n++) {
        rp_draw(pos, T, T, L, 3, rp_key(RP_STREAM_TEST, (uint64_t)n, 0), n % 4);
        for (int t = 0; t < T; t++) {
            bad += pos[t] < 0 || pos[t] >= L || (t > 0 && pos[t] <= pos[t - 1]);
            if (pos[t] >= 0 && pos[t] < L) { count[pos[t]]++; }
        }
    }
    check(bad == 0, "4000 draws of 8 from [0, 32): sorted, distinct, in range", bad, 0);
    double worst = 0; // each position is drawn with probability T/L: N T/L = 1000 times, sd 27
    for (int p = 0; p < L; p++) { worst = fmax(worst, fabs(count[p] - (double)N * T / L) / ((double)N * T / L)); }
    check(worst < 0.12, "every position drawn 1000 +- 12% times (4.5 sd)", worst, 0.12);
    rp_draw(pos, 40, 40, 40, 3, 9, 0);
    bad = 0;
    for (int t = 0; t < 40; t++) { bad += pos[t] != t; }
    check(bad == 0, "L = T draws 0..T-1", bad, 0);
    rp_draw(pos, 40, 40, 100, 3, 9, 1);
    rp_draw(again, 40, 40, 100, 3, 9, 1);
    check(memcmp(pos, again, sizeof(int) * 40) == 0, "the same seed, key and layer draw the same", 0, 0);
    rp_draw(again, 13, 40, 100, 3, 9, 1);
    check(memcmp(pos, again, sizeof(int) * 13) == 0, "the first 13 of a draw of 40 are the draw's first 13 (length buckets)", 0, 0);
    int differ[3] = {0, 0, 0};
    const uint64_t seeds[3] = {4, 3, 3}, keys[3] = {9, 10, 9};
    const int layers[3] = {1, 1, 2};
    for (int v = 0; v < 3; v++) {
        rp_draw(again, 40, 40, 100, seeds[v], keys[v], layers[v]);
        differ[v] = memcmp(pos, again, sizeof(int) * 40) != 0;
    }
    check(differ[0] && differ[1] && differ[2], "another seed, key or layer draws another", differ[0] + differ[1] + differ[2], 3);

    if (!rp_supported(PE_ID)) { return; }
    int B = 2;
    T = 24;
    GPT2Config cfg = tiny_config(T);
    cfg.rp_len = 3 * T; // what the draws below need of the model (learned: rows of wpe)
    pe_test_config(&cfg);
    cfg.rp_len = 0;
    GPT2 plain, model;
    gpt2_build_from_config(&plain, &cfg, 5);
    uint64_t rng = random_seed(21);
    perturb_parameters(&plain, 0.1f, &rng);
    int Vp = cfg.padded_vocab_size, x[48];
    random_tokens(x, B * T, cfg.vocab_size, &rng);
    float* a = (float*)malloc_check((size_t)B * T * Vp * sizeof(float));
    float* b = (float*)malloc_check((size_t)B * T * Vp * sizeof(float));
    all_logits(&plain, x, B, T, a);
    char path[300];
    snprintf(path, sizeof(path), "%s/rp.bin", tmpdir);
    gpt2_save_checkpoint(&plain, path);
    gpt2_build_from_checkpoint(&model, path); // the same weights, then -rp T
    model.config.rp_len = T; model.config.rp_seed = 3;
    model.rp_key = rp_key(RP_STREAM_TEST, 2, 0);
    all_logits(&model, x, B, T, b);
    check(memcmp(a, b, (size_t)B * T * Vp * sizeof(float)) == 0, "L = T: the plain model's logits, bit for bit", 0, 0);
    model.config.rp_len = 3 * T;
    model.pe_eval.variant = PE_EVAL_PLAINPOS;
    all_logits(&model, x, B, T, b);
    check(memcmp(a, b, (size_t)B * T * Vp * sizeof(float)) == 0, "L = 3T under plainpos: the plain model's logits", 0, 0);
    model.pe_eval.variant = PE_EVAL_PLAIN;
    all_logits(&model, x, B, T, b);
    double change = 0;
    for (size_t k = 0; k < (size_t)B * T * Vp; k++) { change = fmax(change, fabs(a[k] - b[k])); }
    check(change > 1e-3, "L = 3T: a draw changes the logits", change, 1e-3);
    int draws = rp_draws(PE_ID, cfg.num_layers);
    int layers_differ = memcmp(pe_positions(&model, 0), pe_positions(&model, 1), sizeof(int) * T) != 0;
    check(layers_differ == (draws > 1), draws > 1 ? "each layer draws its own positions" : "one draw serves every layer (the embedding)",
          layers_differ, draws > 1);
    expect_failure("T beyond the range of randomized positions", fail_rp_too_long, NULL, "cannot be drawn from the range [0, 20)");
    free(a); free(b);
    gpt2_free(&plain);
    gpt2_free(&model);
}
// ---- end of randomized positions ----

// NoPE: with one layer, the last position's output depends on the set of earlier
// tokens, not their order (with DAPE too, whose MLP sees one key at a time); every other
// encoding must see the permutation, DAPE_1xk on NoPE as well (its convolution along the
// keys sees their order)
static void test_permutation(void) {
    printf("permuting the prefix of a one-layer model\n");
    int T = 12;
    GPT2Config cfg = tiny_config(T);
    cfg.num_layers = 1;
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 9);
    uint64_t rng = random_seed(4);
    perturb_parameters(&model, 0.3f, &rng);
    int x[12], xp[12];
    random_tokens(x, T, cfg.vocab_size, &rng);
    for (int t = 0; t < T; t++) { xp[t] = x[t]; }
    for (int t = 0; t < T - 1; t++) { xp[t] = x[T - 2 - t]; } // reverse all but the last token
    float* a = (float*)malloc_check(cfg.padded_vocab_size * sizeof(float));
    float* b = (float*)malloc_check(cfg.padded_vocab_size * sizeof(float));
    gpt2_forward(&model, x, NULL, 1, T, 0);
    gpt2_logits_row(&model, 0, T - 1, a);
    gpt2_forward(&model, xp, NULL, 1, T, 0);
    gpt2_logits_row(&model, 0, T - 1, b);
    double d = 0;
    for (int v = 0; v < cfg.vocab_size; v++) { d = fmax(d, fabs(a[v] - b[v])); }
#if PE_KIND == PE_KIND_NONE && DAPE_ID <= 1
    check(d < 1e-5, "nope: last logits unchanged", d, 1e-5);
#else
    check(d > 1e-4, "position-aware: last logits change", d, 1e-4);
#endif
    free(a);
    free(b);
    gpt2_free(&model);
}

// ----------------------------------------------------------------------------
// BLAS against the plain loops

static void test_matmul(void) {
#ifdef USE_BLAS
    printf("BLAS matmuls against the plain loops\n");
    int N = 37, C = 29, OC = 53;
    uint64_t rng = random_seed(1);
    real* inp = (real*)malloc_check((size_t)N * C * sizeof(real));
    real* w = (real*)malloc_check((size_t)OC * C * sizeof(real));
    real* bias = (real*)malloc_check(OC * sizeof(real));
    real* dout = (real*)malloc_check((size_t)N * OC * sizeof(real));
    real* out[2]; real* dinp[2]; real* dw[2]; real* db[2];
    for (int k = 0; k < 2; k++) {
        out[k] = (real*)calloc_check((size_t)N * OC, sizeof(real));
        dinp[k] = (real*)calloc_check((size_t)N * C, sizeof(real));
        dw[k] = (real*)calloc_check((size_t)OC * C, sizeof(real));
        db[k] = (real*)calloc_check(OC, sizeof(real));
    }
    for (int i = 0; i < N * C; i++) { inp[i] = random_normal(&rng); }
    for (int i = 0; i < OC * C; i++) { w[i] = random_normal(&rng); }
    for (int i = 0; i < OC; i++) { bias[i] = random_normal(&rng); }
    for (int i = 0; i < N * OC; i++) { dout[i] = random_normal(&rng); }
    matmul_forward(out[0], inp, w, bias, N, C, OC);
    matmul_forward_naive(out[1], inp, w, bias, N, C, OC);
    matmul_backward(dinp[0], dw[0], db[0], dout, inp, w, N, C, OC);
    matmul_backward_naive(dinp[1], dw[1], db[1], dout, inp, w, N, C, OC);
    double e[4] = {0, 0, 0, 0};
    for (int i = 0; i < N * OC; i++) { e[0] = fmax(e[0], fabs(out[0][i] - out[1][i])); }
    for (int i = 0; i < N * C; i++) { e[1] = fmax(e[1], fabs(dinp[0][i] - dinp[1][i])); }
    for (int i = 0; i < OC * C; i++) { e[2] = fmax(e[2], fabs(dw[0][i] - dw[1][i])); }
    for (int i = 0; i < OC; i++) { e[3] = fmax(e[3], fabs(db[0][i] - db[1][i])); }
    check(e[0] < 1e-4, "forward", e[0], 1e-4);
    check(e[1] < 1e-4, "backward: input", e[1], 1e-4);
    check(e[2] < 1e-4, "backward: weight", e[2], 1e-4);
    check(e[3] < 1e-4, "backward: bias", e[3], 1e-4);
    for (int k = 0; k < 2; k++) { free(out[k]); free(dinp[k]); free(dw[k]); free(db[k]); }
    free(inp); free(w); free(bias); free(dout);
#endif
}

// ----------------------------------------------------------------------------
// errors: a call that must fail runs in a child process; the test checks its exit
// status and that its one line on stderr says what is wrong

static void expect_failure(const char* what, FailFn fn, const void* arg, const char* expect) {
    int pipefd[2];
    if (pipe(pipefd) != 0) { fatal("pipe failed"); }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        dup2(pipefd[1], 2);
        fn(arg);
        _exit(0); // reaching here means it did not fail
    }
    close(pipefd[1]);
    char buf[4096];
    ssize_t n = 0, r;
    while ((r = read(pipefd[0], buf + n, sizeof(buf) - 1 - n)) > 0) { n += r; }
    buf[n > 0 ? n : 0] = '\0';
    close(pipefd[0]);
    int status;
    waitpid(pid, &status, 0);
    int exited_with_error = WIFEXITED(status) && WEXITSTATUS(status) != 0;
    int said = strstr(buf, expect) != NULL;
    int one_line = n > 0 && strchr(buf, '\n') == buf + n - 1;
    char line[160];
    snprintf(line, sizeof(line), "%s", what);
    check(exited_with_error && said && one_line, line, exited_with_error + said + one_line, 3);
    if (!(exited_with_error && said && one_line)) { printf("    stderr was: %s", buf); }
}


static void write_shard(const char* path, int magic, int version, int ntok_header, const uint16_t* toks, int ntok) {
    FILE* f = fopen_check(path, "wb");
    int header[256] = {0};
    header[0] = magic; header[1] = version; header[2] = ntok_header;
    fwrite(header, sizeof(int), 256, f);
    fwrite(toks, sizeof(uint16_t), ntok, f);
    fclose(f);
}

// a forward pass one token beyond the encoding's limit (learned: maxT; xpos: its range of fp32)
static void fail_forward_beyond_maxT(const void* arg) {
    GPT2Config cfg = tiny_config(16);
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 1);
    int T = gpt2_max_length(&model) + 1;
    int* x = (int*)calloc_check(T, sizeof(int));
    gpt2_forward(&model, x, NULL, 1, T, 0);
}
static void fail_load(const void* path) {
    GPT2 model;
    gpt2_build_from_checkpoint(&model, (const char*)path);
}
static void fail_dataloader(const void* pattern) {
    DataLoader dl;
    dataloader_init(&dl, (const char*)pattern, 2, 8, 0, 1, 250);
    dataloader_next_batch(&dl);
}
static void fail_token_out_of_range(const void* arg) {
    (void)arg;
    GPT2Config cfg = tiny_config(16);
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 1);
    int x[4] = {0, 1, 250, 3};
    gpt2_forward(&model, x, NULL, 1, 4, 0);
}

// exp_vec (train_gpt2.c) against exp in double: every 127th float whose e^x is a normal
// float within 1.5 ulp (1.01 measured over all of them), and the edges as expf has them
static void test_exp_vec(void) {
#ifndef REAL_DOUBLE
    printf("exp_vec against exp in double\n");
    double worst = 0;
    int32_t lo, hi; // the bit patterns of 87.33 and 88.72: k runs over -87.33 .. 0 .. 88.72 by sign and magnitude
    float flo = 87.33f, fhi = 88.72f;
    memcpy(&lo, &flo, sizeof(float));
    memcpy(&hi, &fhi, sizeof(float));
    for (int64_t k = -(int64_t)lo; k <= hi; k += 127) {
        int32_t bits = k < 0 ? (int32_t)(-k) : (int32_t)k;
        float x;
        memcpy(&x, &bits, sizeof(float));
        if (k < 0) { x = -x; }
        double exact = exp((double)x);
        float ef = (float)exact;
        worst = fmax(worst, fabs(exp_vec(x) - exact) / (nextafterf(ef, INFINITY) - ef));
    }
    check(worst <= 1.5, "exp_vec within 1.5 ulp of e^x on [-87.33, 88.72]", worst, 1.5);
    float edges[] = {-INFINITY, -200.0f, -104.0f, 88.73f, 100.0f, INFINITY, 0.0f};
    double bad = 0;
    for (int i = 0; i < (int)(sizeof(edges) / sizeof(edges[0])); i++) { bad += exp_vec(edges[i]) != expf(edges[i]); }
    bad += !isnan(exp_vec(NAN));
    check(bad == 0, "exp_vec at -inf, -200, -104, 88.73, 100, inf, 0 as expf, NaN for NaN", bad, 0);
#endif
}

// The classifier against log-softmax in double, on GPT-2's vocabulary with one large logit
// first and 50k small ones after it: each small term of the softmax's sum is below half an
// ulp of the running sum, so a float sum, one term at a time, drops them all (2e-3 of the
// loss here); the double sum keeps them. Logits of one channel (lnf = 1) are exact in float.
static void test_classifier(void) {
    printf("classifier: losses and gradients against log-softmax in double\n");
    int V = GPT2_VOCAB, Vp = GPT2_PADDED_VOCAB, C = 1, N = 3;
    int targets[3] = {0, 1, 777};
    real* wte = (real*)calloc_check(Vp, sizeof(real));
    real* dwte = (real*)calloc_check(Vp, sizeof(real));
    real* logits = (real*)calloc_check((size_t)N * Vp, sizeof(real));
    real lnf[3] = {1, 1, 1}, dlnf[3] = {0, 0, 0}, losses[3];
    uint64_t rng = random_seed(3);
    wte[0] = 17;
    for (int v = 1; v < V; v++) { wte[v] = 0.5f * (2 * random_f32(&rng) - 1); }
    fused_classifier(losses, dlnf, dwte, logits, lnf, wte, targets, 1, N, N, V, C);
    double sum = 0, expected_dlnf = 0; // the same for every row: lnf and the logits are
    for (int v = 0; v < V; v++) { sum += exp((double)wte[v] - wte[0]); }
    for (int v = 0; v < V; v++) { expected_dlnf += exp((double)wte[v] - wte[0]) / sum * wte[v]; }
    double e_loss = 0, e_dlnf = 0, e_dwte = 0;
    for (int r = 0; r < N; r++) {
        e_loss = fmax(e_loss, fabs(losses[r] - (wte[0] + log(sum) - wte[targets[r]])));
        e_dlnf = fmax(e_dlnf, fabs(dlnf[r] - (expected_dlnf - wte[targets[r]]) / N));
    }
    for (int v = 0; v < V; v++) {
        double hits = (v == targets[0]) + (v == targets[1]) + (v == targets[2]);
        e_dwte = fmax(e_dwte, fabs(dwte[v] - (N * exp((double)wte[v] - wte[0]) / sum - hits) / N));
    }
    check(e_loss < 1e-5, "losses (about 17)", e_loss, 1e-5);
    check(e_dlnf < 5e-4, "gradient of lnf (a float matmul over the vocabulary)", e_dlnf, 5e-4);
    check(e_dwte < 1e-6, "gradient of wte", e_dwte, 1e-6);
    double pad = 0;
    for (int v = V; v < Vp; v++) { pad = fmax(pad, fabs(dwte[v])); }
    check(pad == 0, "no gradient into wte's padding rows", pad, 0);
    free(wte); free(dwte); free(logits);
}

static void test_files_and_errors(void) {
    printf("checkpoints, shards and bad input\n");
    GPT2Config cfg = tiny_config(16);
    GPT2 model, loaded;
    gpt2_build_from_config(&model, &cfg, 21);
    uint64_t rng = random_seed(2);
    perturb_parameters(&model, 0.05f, &rng);
    char ckpt[512], ckpt2[512], bad[512];
    snprintf(ckpt, sizeof(ckpt), "%s/model.bin", tmpdir);
    snprintf(ckpt2, sizeof(ckpt2), "%s/model2.bin", tmpdir);
    gpt2_save_checkpoint(&model, ckpt);
    gpt2_build_from_checkpoint(&loaded, ckpt);
    int same = loaded.num_parameters == model.num_parameters
            && memcmp(loaded.params_memory, model.params_memory, model.num_parameters * sizeof(real)) == 0
            && memcmp(&loaded.config, &model.config, sizeof(GPT2Config)) == 0;
    check(same, "save/load round trip is bit-exact", !same, 0);
    gpt2_save_checkpoint(&loaded, ckpt2);
    FILE* f1 = fopen_check(ckpt, "rb");
    FILE* f2 = fopen_check(ckpt2, "rb");
    int64_t size = file_size_check(f1, ckpt);
    unsigned char* b1 = (unsigned char*)malloc_check(size);
    unsigned char* b2 = (unsigned char*)malloc_check(size);
    fread_check(b1, 1, size, f1, ckpt);
    size_t n2 = fread(b2, 1, size + 1, f2);
    fclose(f1); fclose(f2);
    check(n2 == (size_t)size && memcmp(b1, b2, size) == 0, "save(load(file)) is the same file", n2 != (size_t)size, 0);
    int* h = (int*)b1;
    check(h[0] == 20240326 && h[1] == 3 && h[8] == PE_ID && h[11] == pe_revision(PE_ID),
          "header: magic, version 3, PE id in word 8, its revision in word 11", h[8], PE_ID);
    // a bf16 checkpoint (version 5, as llm.c's CUDA trainer writes): each value loads as
    // its bf16 rounding (round to nearest even), exactly
    snprintf(bad, sizeof(bad), "%s/bf16.bin", tmpdir);
    int h5[256];
    checkpoint_header_fill(h5, &model.config, CHECKPOINT_BF16);
    uint16_t* half = (uint16_t*)malloc_check(model.num_parameters * sizeof(uint16_t));
    for (size_t i = 0; i < model.num_parameters; i++) {
        float v = (float)model.params_memory[i];
        uint32_t u;
        memcpy(&u, &v, 4);
        half[i] = (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
    }
    FILE* f5 = fopen_check(bad, "wb");
    fwrite(h5, sizeof(int), 256, f5);
    fwrite(half, sizeof(uint16_t), model.num_parameters, f5);
    fclose(f5);
    GPT2 from_bf16;
    gpt2_build_from_checkpoint(&from_bf16, bad);
    double bf16_err = 0;
    int bf16_exact = 1;
    for (size_t i = 0; i < model.num_parameters; i++) {
        bf16_exact &= from_bf16.params_memory[i] == bf16_to_float(half[i]);
        bf16_err = fmax(bf16_err, fabs(from_bf16.params_memory[i] - model.params_memory[i]) / (fabs(model.params_memory[i]) + 1e-30));
    }
    check(bf16_exact && bf16_err <= 1.0 / 256, "bf16 checkpoint (version 5) loads, relative error", bf16_err, 1.0 / 256);
    free(half);
    gpt2_free(&from_bf16);
    // broken copies of the checkpoint
    snprintf(bad, sizeof(bad), "%s/truncated.bin", tmpdir);
    FILE* f = fopen_check(bad, "wb"); fwrite(b1, 1, size - 10, f); fclose(f);
    expect_failure("truncated checkpoint", fail_load, bad, "truncated");
    snprintf(bad, sizeof(bad), "%s/magic.bin", tmpdir);
    h[0] = 12345; f = fopen_check(bad, "wb"); fwrite(b1, 1, size, f); fclose(f); h[0] = 20240326;
    expect_failure("checkpoint with a wrong magic number", fail_load, bad, "bad magic");
    snprintf(bad, sizeof(bad), "%s/version.bin", tmpdir);
    h[1] = 4; f = fopen_check(bad, "wb"); fwrite(b1, 1, size, f); fclose(f); h[1] = 3;
    expect_failure("checkpoint with an unknown version", fail_load, bad, "version");
    snprintf(bad, sizeof(bad), "%s/pe.bin", tmpdir);
    int other = (PE_ID + 1) % PE_NUM_IDS, mine[256], theirs[256] = {0};
    GPT2Config oc; // a checkpoint of another encoding: its words from 8 on as a new model of it has them, no DAPE
    gpt2_config_from_preset(&oc, "nano", cfg.max_seq_len, other);
    oc.dape = 0; oc.dape_width = 0;
    checkpoint_header_fill(theirs, &oc, CHECKPOINT_FP32);
    memcpy(mine, h, sizeof(mine));
    memcpy(h + 8, theirs + 8, (256 - 8) * sizeof(int));
    f = fopen_check(bad, "wb"); fwrite(b1, 1, size, f); fclose(f);
    memcpy(h, mine, sizeof(mine));
    char expect[128];
    snprintf(expect, sizeof(expect), "trained with PE '%s' but this binary was built with PE '%s'", pe_name(other), model_label(PE_ID, DAPE_ID));
    expect_failure("checkpoint of another encoding names both", fail_load, bad, expect);
    snprintf(bad, sizeof(bad), "%s/revision.bin", tmpdir); // fire and sinusoidal: an old definition (0)
    int rev = pe_revision(PE_ID) == 0 ? 1 : 0;
    h[11] = rev; f = fopen_check(bad, "wb"); fwrite(b1, 1, size, f); fclose(f); h[11] = pe_revision(PE_ID);
    snprintf(expect, sizeof(expect), "holds revision %d of PE '%s', this binary implements revision %d", rev, pe_name(PE_ID), pe_revision(PE_ID));
    expect_failure("checkpoint of another revision of the encoding", fail_load, bad, expect);
    snprintf(bad, sizeof(bad), "%s/sizes.bin", tmpdir);
    h[6] = 13; f = fopen_check(bad, "wb"); fwrite(b1, 1, size, f); fclose(f); h[6] = 12;
    expect_failure("checkpoint with inconsistent sizes", fail_load, bad, "channels");
    snprintf(bad, sizeof(bad), "%s/missing.bin", tmpdir);
    expect_failure("missing checkpoint", fail_load, bad, "cannot open");
    free(b1); free(b2);
    gpt2_free(&loaded);

    // shards
    uint16_t toks[200];
    for (int i = 0; i < 200; i++) { toks[i] = (uint16_t)(i % 250); }
    char path[600], pattern[600];
    snprintf(path, sizeof(path), "%s/good_000000.bin", tmpdir);
    write_shard(path, 20240520, 1, 200, toks, 200);
    DataLoader dl;
    snprintf(pattern, sizeof(pattern), "%s/good_*.bin", tmpdir);
    dataloader_init(&dl, pattern, 2, 8, 0, 1, 250);
    dataloader_next_batch(&dl);
    dataloader_next_batch(&dl);
    int okb = dl.inputs[0] == 16 && dl.targets[0] == 17 && dl.inputs[15] == 31 && dl.targets[15] == 32;
    check(okb, "loader: second batch is tokens 16..32", !okb, 0);
    dataloader_free(&dl);
    snprintf(path, sizeof(path), "%s/magic_000000.bin", tmpdir);
    write_shard(path, 1234, 1, 200, toks, 200);
    snprintf(pattern, sizeof(pattern), "%s/magic_*.bin", tmpdir);
    expect_failure("shard with a wrong magic number", fail_dataloader, pattern, "bad magic");
    snprintf(path, sizeof(path), "%s/version_000000.bin", tmpdir);
    write_shard(path, 20240520, 2, 200, toks, 200);
    snprintf(pattern, sizeof(pattern), "%s/version_*.bin", tmpdir);
    expect_failure("shard with a wrong version", fail_dataloader, pattern, "version");
    snprintf(path, sizeof(path), "%s/count_000000.bin", tmpdir);
    write_shard(path, 20240520, 1, 300, toks, 200);
    snprintf(pattern, sizeof(pattern), "%s/count_*.bin", tmpdir);
    expect_failure("shard whose token count does not match its size", fail_dataloader, pattern, "header says 300 tokens");
    toks[5] = 300;
    snprintf(path, sizeof(path), "%s/range_000000.bin", tmpdir);
    write_shard(path, 20240520, 1, 200, toks, 200);
    snprintf(pattern, sizeof(pattern), "%s/range_*.bin", tmpdir);
    expect_failure("shard with a token id >= vocab", fail_dataloader, pattern, "out of range");
    snprintf(pattern, sizeof(pattern), "%s/nothing_*.bin", tmpdir);
    expect_failure("no file matching the pattern", fail_dataloader, pattern, "no file matches");
    expect_failure("token id out of range in a batch", fail_token_out_of_range, NULL, "out of range");

    if (gpt2_max_length(&model) < 64) { // an encoding with a length limit (learned: maxT)
        expect_failure("a forward beyond the encoding's length refused", fail_forward_beyond_maxT, NULL, "cannot process T = ");
    } else {
        int x[64], y[64];
        random_tokens(x, 64, cfg.vocab_size, &rng);
        random_tokens(y, 64, cfg.vocab_size, &rng);
        gpt2_forward(&model, x, y, 1, 64, 0);
        check(isfinite(model.mean_loss), "runs at 4x maxT (64 tokens)", model.mean_loss, 0);
    }
    gpt2_free(&model);
}

// ----------------------------------------------------------------------------
// masked shards (llmc/dataloader.h, answer-only data): the targets of unscored tokens are
// TARGET_UNSCORED and the others the next tokens, each batch counts its scored targets, and
// the look-ahead count of a step's batches (dataloader_scored) is the sum of theirs, across
// the end of a shard and the wrap to the first

// PoSE's rows (llmc/dataloader.h dataloader_pose): over a shard whose token i is i mod 50000,
// so that a row's tokens tell where in its window they came from, every row is the window's
// first r1 tokens and then a later run of tokens, with the targets the next of each (across the
// chunks' boundary), at positions t and then t + u; the official bounds, inclusive, are
// reached (r1 in [1, (T + 2) / 2], r2 in [T + 1, W], u in [0, L - T - 1]); a batch read again
// after a seek, and a second process's rows, are the same rows; with windows of T + 1 tokens
// and L = T + 1 a row is its window's tokens at positions 0..T-1 (no skip: plain training)
static void test_pose(void) {
    printf("PoSE: rows in two chunks of a window, their positions, the official bounds\n");
    enum { B = 4, T = 12, L = 100, NTOK = 400000, V = 50000 };
    uint16_t* toks = (uint16_t*)malloc_check(NTOK * sizeof(uint16_t));
    for (int i = 0; i < NTOK; i++) { toks[i] = (uint16_t)(i % V); }
    char pattern[600];
    snprintf(pattern, sizeof(pattern), "%s/pose_000.bin", tmpdir);
    write_shard(pattern, SHARD_MAGIC, SHARD_VERSION, NTOK, toks, NTOK);
    DataLoader dl, two;
    dataloader_init(&dl, pattern, B, T, 0, 1, GPT2_VOCAB);
    dataloader_pose(&dl, L, 7, POSE_WINDOWS);
    dataloader_init(&two, pattern, B / 2, T, 1, 2, GPT2_VOCAB); // the second of two processes with B / 2 rows
    dataloader_pose(&two, L, 7, POSE_WINDOWS);
    int W = dl.stride, n = T + 1, bad = 0, r1_lo = n, r1_hi = 0, r2_lo = W, r2_hi = 0, u_lo = L, u_hi = -1, batches = NTOK / (B * W);
    int bad_ranks = 0;
    for (int k = 0; k < batches; k++) {
        int64_t start = dl.pos;
        dataloader_next_batch(&dl);
        dataloader_next_batch(&two);
        for (int i = 0; i < (B / 2) * T; i++) {
            bad_ranks += two.inputs[i] != dl.inputs[(B / 2) * T + i] || two.targets[i] != dl.targets[(B / 2) * T + i]
                         || two.positions[i] != dl.positions[(B / 2) * T + i];
        }
        for (int b = 0; b < B; b++) {
            int first = (int)((start + (int64_t)b * W) % V), src[T + 1];
            for (int t = 0; t < T; t++) { src[t] = (dl.inputs[b * T + t] - first + V) % V; }
            src[T] = (dl.targets[b * T + T - 1] - first + V) % V;
            int r1 = 0; // the first chunk: the window's tokens 0..r1-1 at their positions
            while (r1 < T && src[r1] == r1 && dl.positions[b * T + r1] == r1) { r1++; }
            if (r1 == 0) { bad++; continue; }
            for (int t = 0; t < T; t++) { bad += (dl.targets[b * T + t] - first + V) % V != src[t + 1]; }
            if (r1 == T) { bad += src[T] != T; continue; } // no skip seen: the second chunk follows the first at u = 0
            int l2 = src[r1], u = dl.positions[b * T + r1] - r1; // the second chunk: window[l2..], positions + u
            for (int t = r1; t <= T; t++) { bad += src[t] != l2 + t - r1 || (t < T && dl.positions[b * T + t] != t + u); }
            int r2 = l2 + (n - r1);
            bad += l2 < r1 || r2 > W || u < 0 || u > L - n;
            r1_lo = r1 < r1_lo ? r1 : r1_lo; r1_hi = r1 > r1_hi ? r1 : r1_hi;
            r2_lo = r2 < r2_lo ? r2 : r2_lo; r2_hi = r2 > r2_hi ? r2 : r2_hi;
            u_lo = u < u_lo ? u : u_lo; u_hi = u > u_hi ? u : u_hi;
        }
    }
    char what[160];
    snprintf(what, sizeof(what), "%d rows: two chunks of the window, targets across them, positions t and t + u", batches * B);
    check(bad == 0, what, bad, 0);
    snprintf(what, sizeof(what), "bounds reached: r1 in [%d, %d], r2 in [%d, %d], u in [%d, %d]", r1_lo, r1_hi, r2_lo, r2_hi, u_lo, u_hi);
    int bounds = r1_lo == 1 && r1_hi == (n + 1) / 2 && r2_lo == n && r2_hi == W && u_lo == 0 && u_hi == L - n;
    check(bounds, what, !bounds, 0);
    check(bad_ranks == 0, "a second process's rows: those of one process with all the rows", bad_ranks, 0);
    // read again after a seek to its start (a resumed run): the same rows
    dataloader_reset(&dl);
    dataloader_next_batch(&dl);
    int64_t at = dl.pos;
    int keep_in[B * T], keep_pos[B * T];
    dataloader_next_batch(&dl);
    memcpy(keep_in, dl.inputs, sizeof(keep_in));
    memcpy(keep_pos, dl.positions, sizeof(keep_pos));
    dataloader_seek(&dl, 0, at);
    dataloader_next_batch(&dl);
    int same = memcmp(keep_in, dl.inputs, sizeof(keep_in)) == 0 && memcmp(keep_pos, dl.positions, sizeof(keep_pos)) == 0;
    check(same, "a batch read again after a seek: the same rows and positions", !same, 0);
    dataloader_free(&dl);
    dataloader_free(&two);
    // windows of T + 1 tokens, L = T + 1: nothing skipped
    dataloader_init(&dl, pattern, B, T, 0, 1, GPT2_VOCAB);
    dataloader_pose(&dl, T + 1, 7, 1);
    dataloader_next_batch(&dl);
    int plain = 0;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            plain += dl.inputs[b * T + t] != b * (T + 1) + t || dl.targets[b * T + t] != b * (T + 1) + t + 1 || dl.positions[b * T + t] != t;
        }
    }
    check(plain == 0, "windows of T + 1, L = T + 1: each row its window's tokens at 0..T-1 (plain)", plain, 0);
    dataloader_free(&dl);
    free(toks);
}

static void test_masked_shards(void) {
    printf("masked shards: targets, scored counts, the look-ahead count\n");
    enum { R = 4, V = 10 };
    const int rows[2] = {5, 3};
    uint16_t tok[2][8 * R + 1];
    uint8_t mask[2][8 * R + 1];
    char pattern[600];
    for (int s = 0; s < 2; s++) {
        int ntok = rows[s] * R + 1;
        for (int i = 0; i < ntok; i++) {
            tok[s][i] = (uint16_t)((7 * i + 3 * s) % V);
            mask[s][i] = i % R != 0 && i % R <= 1 + (i / R + s) % 3; // 1 to 3 scored targets a row
        }
        char path[600];
        snprintf(path, sizeof(path), "%s/masked_%03d.bin", tmpdir, s);
        FILE* f = fopen_check(path, "wb");
        int header[256] = {SHARD_MAGIC, SHARD_VERSION_MASKED, ntok, R, V};
        fwrite(header, sizeof(int), 256, f);
        fwrite(tok[s], sizeof(uint16_t), ntok, f);
        fwrite(mask[s], 1, ntok, f);
        fclose(f);
    }
    snprintf(pattern, sizeof(pattern), "%s/masked_*.bin", tmpdir);
    // B = 2 rows of R: shard 0 gives batches at tokens 0 and 8, shard 1 at 0, then it all again
    const int shard_of[3] = {0, 0, 1}, start_of[3] = {0, 8, 0};
    int64_t batch_scored[3] = {0};
    for (int k = 0; k < 3; k++) { for (int i = 1; i <= 2 * R; i++) { batch_scored[k] += mask[shard_of[k]][start_of[k] + i]; } }
    DataLoader dl;
    dataloader_init(&dl, pattern, 2, R, 0, 1, V);
    int bad_targets = 0, bad_counts = 0;
    for (int b = 0; b < 5; b++) {
        int64_t ahead = dataloader_scored(&dl, dl.shard_idx, dl.pos, 3);
        bad_counts += ahead != batch_scored[b % 3] + batch_scored[(b + 1) % 3] + batch_scored[(b + 2) % 3];
        dataloader_next_batch(&dl);
        const uint16_t* t = tok[shard_of[b % 3]] + start_of[b % 3];
        const uint8_t* m = mask[shard_of[b % 3]] + start_of[b % 3];
        for (int i = 0; i < 2 * R; i++) {
            bad_targets += dl.inputs[i] != t[i] || dl.targets[i] != (m[i + 1] ? t[i + 1] : TARGET_UNSCORED);
        }
        bad_counts += dl.scored != batch_scored[b % 3];
    }
    check(bad_targets == 0, "5 batches: inputs, and targets unscored where the mask is 0", bad_targets, 0);
    check(bad_counts == 0, "each batch's scored count, and the look-ahead of 3 batches", bad_counts, 0);
    dataloader_free(&dl);
}

// Length buckets (llmc/dataloader.h dataloader_buckets, the driver's -lb): masked rows cut
// at their last scored target and run in buckets, each a pass with its share of the mean,
// give the whole batch's loss and parameter gradients, for this encoding (a position sees
// only those before it); with randomized positions the buckets take the first positions of
// the batch's draw (rp_draw_len). DAPE_1xk with PyTorch's edge (DAPE_WINDOW_EDGE) is the
// exception: its rows cut short differ, and the driver keeps them whole. The buckets' cost is
// the least over every set of cuts.
static void test_length_buckets(int rp) {
    printf("length buckets (%s%s)\n", pe_name(PE_ID), rp ? ", randomized positions" : "");
    enum { B = 6, T = 40 };
    const int live[B] = {40, 7, 23, 7, 31, 2}; // 5 lengths, the longest T
    GPT2 model;
    uint64_t rng = regime_model(&model, T, rp ? AT_DRAWN : AT_INDICES, 9, 17, 6, 19);
    int x[B * T], y[B * T];
    random_tokens(x, B * T, model.config.vocab_size, &rng);
    random_tokens(y, B * T, model.config.vocab_size, &rng);
    int64_t scored = 0;
    for (int b = 0; b < B; b++) { // about half the targets before a row's last scored one are scored
        for (int t = 0; t < T; t++) {
            if (t >= live[b] || (t < live[b] - 1 && random_u32(&rng) % 2 == 0)) { y[b * T + t] = TARGET_UNSCORED; }
            scored += y[b * T + t] != TARGET_UNSCORED;
        }
    }
    size_t P = model.num_parameters;
    gpt2_forward(&model, x, y, B, T, 1);
    gpt2_backward(&model);
    double whole = model.mean_loss;
    real* g = (real*)malloc_check(P * sizeof(real));
    memcpy(g, model.grads_memory, P * sizeof(real));

    DataLoader dl = {0};
    dl.B = B; dl.T = T; dl.row_len = T; dl.inputs = x; dl.targets = y; dl.scored = scored;
    dl.bucket_tokens = (int*)malloc_check((size_t)2 * B * T * sizeof(int));
    RowBucket k[B];
    int groups = dataloader_buckets(&dl, 0, k);
    int rows = 0, computed = 0;
    for (int i = 0; i < groups; i++) { rows += k[i].rows; computed += k[i].rows * k[i].T; }
    check(groups == 5 && rows == B && computed == 40 + 7 + 23 + 7 + 31 + 2, "a pass's cost 0: a bucket per length, every row once",
          groups, 5);
    gpt2_zero_grad(&model);
    model.rp_draw_len = T;
    double loss = 0;
    for (int i = 0; i < groups; i++) {
        float parts = (float)((double)scored / k[i].scored);
        gpt2_forward(&model, k[i].inputs, k[i].targets, k[i].rows, k[i].T, 1.0f / parts);
        gpt2_backward(&model);
        loss += model.mean_loss / parts;
    }
    model.rp_draw_len = 0;
    double worst = 0, largest = 0;
    for (size_t i = 0; i < P; i++) {
        worst = fmax(worst, fabs(model.grads_memory[i] - g[i]));
        largest = fmax(largest, fabs(g[i]));
    }
    if (PE_WHOLE_ROWS) { // DAPE_1xk's edge, SHAPE's offsets
        check(worst > 1e-3 * largest && bucket_pass_tokens(32) == -1,
              "rows cut short or regrouped compute otherwise: the driver keeps rows whole", worst / largest, 1e-3);
    } else {
        check(fabs(loss - whole) < 1e-6 * whole, "the buckets' loss is the batch's (1e-6 relative)", fabs(loss - whole) / whole, 1e-6);
        check(worst < 1e-5 * largest, "the buckets' gradients are the batch's (1e-5 of the largest)", worst / largest, 1e-5);
    }

    // the cuts: a pass costing 10 tokens, against every set of cuts between the 5 lengths
    const int lengths[5] = {2, 7, 23, 31, 40}, count[5] = {1, 2, 1, 1, 1};
    int best = INT32_MAX;
    for (int cuts = 0; cuts < 16; cuts++) { // bit i: a cut after lengths[i]
        int cost = 0, n = 0;
        for (int i = 0; i < 5; i++) {
            n += count[i];
            if (i == 4 || (cuts >> i & 1)) { cost += n * lengths[i] + 10; n = 0; }
        }
        if (cost < best) { best = cost; }
    }
    groups = dataloader_buckets(&dl, 10, k);
    int cost = 0;
    for (int i = 0; i < groups; i++) { cost += k[i].rows * k[i].T + 10; }
    check(cost == best, "a pass's cost 10: the least cost of all 16 sets of cuts", cost, best);
    groups = dataloader_buckets(&dl, 1 << 20, k);
    check(groups == 1 && k[0].rows == B && k[0].T == T, "a pass's cost 2^20: the batch in one pass", groups, 1);
    free(dl.bucket_tokens);
    free(g);
    gpt2_free(&model);
}

// ----------------------------------------------------------------------------
// crash-safe writes (llmc/utils.h: AtomicFile): every write has its own temporary file, so
// that two writers of one file never share one, and a failed write leaves none behind

// number of temporary files of file `name` in directory `dir`
static int count_temporaries(const char* dir, const char* name) {
    DIR* d = opendir(dir);
    int n = 0;
    struct dirent* e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        unsigned host;
        long pid;
        const char* target = temporary_target(e->d_name, &host, &pid);
        n += target != NULL && strcmp(target, name) == 0;
    }
    if (d != NULL) { closedir(d); }
    return n;
}

static void fail_during_write(const void* path) {
    AtomicFile af;
    atomic_open(&af, (const char*)path);
    atomic_write(&af, "partial", 1, 7);
    fatal("a write fails halfway (as on a full disk)");
}

static void test_atomic_files(void) {
    printf("crash-safe writes\n");
    char path[600];
    snprintf(path, sizeof(path), "%s/atomic.txt", tmpdir);
    AtomicFile a, b;
    atomic_open(&a, path);
    atomic_open(&b, path);
    int distinct = strcmp(a.tmp_path, b.tmp_path) != 0 && count_temporaries(tmpdir, "atomic.txt") == 2;
    check(distinct, "two writes of one file have two temporary files", count_temporaries(tmpdir, "atomic.txt"), 2);
    atomic_write(&a, "first", 1, 5);
    atomic_write(&b, "second", 1, 6);
    atomic_commit(&a);
    atomic_commit(&b);
    char got[16] = {0};
    FILE* f = fopen_check(path, "rb");
    size_t n = fread(got, 1, sizeof(got) - 1, f);
    fclose(f);
    int last_wins = n == 6 && strcmp(got, "second") == 0 && count_temporaries(tmpdir, "atomic.txt") == 0;
    check(last_wins, "each commits whole, the last one wins, no temporary file is left", !last_wins, 0);
    snprintf(path, sizeof(path), "%s/failed.txt", tmpdir);
    expect_failure("a failed write exits with its error", fail_during_write, path, "a write fails halfway");
    int left = count_temporaries(tmpdir, "failed.txt") + file_exists(path);
    check(left == 0, "a failed write leaves no file, temporary or final", left, 0);

    // what may be removed: only a temporary file whose writer is gone
    const char* target = NULL;
    int users = temporary_is_orphan("notes.2024.1.tmp", &target) + (target != NULL)
              + temporary_is_orphan("model_00000010.bin.4242.0.tmp", &target) + (target != NULL);
    check(users == 0, "a user's files that end in .<digits>.<digits>.tmp are not temporary ones", users, 0);
    snprintf(path, sizeof(path), "%s/live.txt", tmpdir);
    atomic_open(&a, path);
    const char* name = strrchr(a.tmp_path, '/') + 1;
    int live = temporary_is_orphan(name, &target);
    check(!live && target != NULL && strcmp(target, "live.txt") == 0, "the temporary file of a running writer is not an orphan", live, 0);
    atomic_commit(&a);
    snprintf(path, sizeof(path), "%s/orphan.txt", tmpdir);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) { atomic_open(&a, path); _exit(0); } // a writer killed before its commit
    waitpid(child, NULL, 0);
    char orphan[256] = "", other_host[128];
    DIR* d = opendir(tmpdir);
    for (struct dirent* e; d != NULL && (e = readdir(d)) != NULL;) { // the child's temporary file
        unsigned host;
        long pid;
        const char* t = temporary_target(e->d_name, &host, &pid);
        if (t != NULL && strcmp(t, "orphan.txt") == 0 && pid == child) { snprintf(orphan, sizeof(orphan), "%s", e->d_name); }
    }
    if (d != NULL) { closedir(d); }
    int gone = orphan[0] != '\0' && temporary_is_orphan(orphan, &target) && strcmp(target, "orphan.txt") == 0;
    check(gone, "the temporary file of a writer that is gone is an orphan", !gone, 0);
    snprintf(path, sizeof(path), "%s/%s", tmpdir, orphan);
    unlink(path);
    snprintf(other_host, sizeof(other_host), TMP_PREFIX "%08x.%d.0.orphan.txt", host_id() ^ 1u, (int)child);
    int elsewhere = temporary_is_orphan(other_host, &target);
    check(!elsewhere, "one of a process on another machine is not (its process may run)", elsewhere, 0);
}

// an error message is never cut: a long path does not hide the reason after it
static void open_long_path(const void* arg) { fopen_check((const char*)arg, "rb"); }
static void test_long_error(void) {
    printf("long error messages\n");
    char path[3000] = "";
    append_format(path, sizeof(path), "%s", tmpdir);
    while (strlen(path) < 2000) { append_format(path, sizeof(path), "/missing"); }
    expect_failure("a 2000-character path and the reason after it", open_long_path, path, "missing (No such file or directory)");
}

// ----------------------------------------------------------------------------
// training sanity: AdamW drives the loss on one batch down

static void test_overfit(void) {
    printf("overfitting one batch\n");
    GPT2Config cfg = {0};
    cfg.num_layers = 2; cfg.num_heads = 4; cfg.channels = 32;
    cfg.vocab_size = 250; cfg.padded_vocab_size = 256; cfg.max_seq_len = 16; cfg.pe = PE_ID;
    gpt2_config_set_build(&cfg);
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 42);
    int B = 4, T = 16;
    int x[64], y[64];
    uint64_t rng = random_seed(8);
    random_tokens(x, B * T, cfg.vocab_size, &rng);
    for (int i = 0; i < B * T; i++) { y[i] = i + 1 < B * T ? x[i + 1] : x[0]; }
    float first = 0, last = 0;
    for (int step = 1; step <= 150; step++) {
        gpt2_zero_grad(&model);
        gpt2_forward(&model, x, y, B, T, 1);
        gpt2_backward(&model);
        double norm = sqrt(gpt2_grad_norm_squared(&model));
        gpt2_update(&model, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, norm > 1 ? 1 / norm : 1, step);
        if (step == 1) { first = model.mean_loss; }
        last = model.mean_loss;
    }
    printf("  loss %.4f at step 1, %.4f at step 150\n", first, last);
    // 0.0004 to 0.0005 at step 150 for every encoding, with OpenBLAS and with plain loops,
    // on 1 and 2 threads: the threshold is 200 times above where training ends
    check(first > 5.0f && last < 0.1f, "loss below 0.1 within 150 steps", last, 0.1);
    gpt2_free(&model);
}

// ----------------------------------------------------------------------------
// memory: a long evaluation keeps no T x T tensor (that would need 2 heads x 8192^2 x 4
// bytes = 512 MiB here)

static long rss_kib(void) {
    FILE* f = fopen("/proc/self/status", "r");
    if (f == NULL) { return -1; }
    char line[256];
    long v = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmHWM: %ld kB", &v) == 1) { break; }
    }
    fclose(f);
    return v;
}

static void test_long_sequence_memory(void) {
    printf("memory of an 8192-token evaluation\n");
    int T = 8192;
    GPT2Config cfg = {0};
    cfg.num_layers = 1; cfg.num_heads = 2; cfg.channels = 16;
    cfg.vocab_size = 250; cfg.padded_vocab_size = 256; cfg.max_seq_len = 64; cfg.pe = PE_ID;
    gpt2_config_set_build(&cfg);
    if (cfg.dape != 0) { cfg.dape_width = 2; } // DAPE's memory is per row: a narrow one does not hide it, and runs fast
    if (pe_max_length(&cfg) < T) { cfg.max_seq_len = T; } // an encoding limited by its table (learned): one of T rows
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 42);
    uint64_t rng = random_seed(3);
    long before = rss_kib();
    if (!gpt2_reaches(&model, T)) { pe_test_params(&model, &rng); } // a range of its parameters' (floater's): the tests' are in it
    int* x = (int*)malloc_check(T * sizeof(int));
    int* y = (int*)malloc_check(T * sizeof(int));
    random_tokens(x, T, cfg.vocab_size, &rng);
    random_tokens(y, T, cfg.vocab_size, &rng);
    gpt2_forward(&model, x, y, 1, T, 0);
    long grown = rss_kib() - before;
    check(isfinite(model.mean_loss) && grown < 64 * 1024, "peak memory growth in KiB", grown, 64 * 1024);
    free(x); free(y);
    gpt2_free(&model);
}

// ----------------------------------------------------------------------------
// DAPE (builds with DAPE=...): the row path against the official code's full-matrix
// computation and the spec's row reference, the edge rule, identities, no leak across
// the diagonal, the checkpoint's words

// a model of the tiny configuration after a training forward pass on random tokens
static void dape_test_model(GPT2* model, int B, int T, int seed, int* x) {
    GPT2Config cfg = tiny_config(T);
    gpt2_build_from_config(model, &cfg, seed);
    uint64_t rng = random_seed(seed + 1);
    perturb_parameters(model, 0.1f, &rng);
    pe_test_params(model, &rng);
    random_tokens(x, B * T, cfg.vocab_size, &rng);
    gpt2_forward(model, x, x, B, T, 1);
}

// largest difference between the model's row logits (dape_row_logits with the layer's
// own weights) and A from ref_dape_logits, over every row of every layer and batch row
static double dape_rows_vs_reference(GPT2* model, int B, int T, int extend, int poison) {
    GPT2Config* cfg = &model->config;
    int NH = cfg->num_heads, L = cfg->num_layers, D = cfg->dape_width, p = cfg->dape / 2, Cin = dape_in_channels(cfg->pe, NH);
    size_t n = (size_t)NH * T * T;
    double* S = (double*)malloc_check(n * sizeof(double));
    double* Bt = (double*)malloc_check(n * sizeof(double));
    double* A = (double*)malloc_check(n * sizeof(double));
    DapeRow* w = &model->dape->rows[0];
    double maxdiff = 0;
    for (int l = 0; l < L; l++) {
        dape_layer_setup(model, l, 0);
        PEBias pb;
        pe_bias_setup(&pb, model, l, B, T, 0);
        const real* qkv = model->acts.t.qkv + (size_t)l * model->acts_N * 3 * cfg->channels;
        for (int b = 0; b < B; b++) {
            ref_scores_and_bias(S, Bt, model, l, b, T);
            ref_dape_logits(A, S, Bt, model, l, T, extend);
            for (int i = 0; i < T; i++) {
                if (poison) { // whatever the workspace holds beyond what row i writes must not matter
                    for (size_t e = 0; e < (size_t)T * Cin; e++) { w->x[e] = NAN; }
                    for (size_t e = 0; e < (size_t)(T + p) * D; e++) { w->hid[e] = NAN; }
                    for (size_t e = 0; e < (size_t)T * NH; e++) { w->a[e] = NAN; }
                }
                dape_row_logits(w, &model->dape->layer, qkv, &pb, pe_positions(model, l), b, i, T);
                for (int c = 0; c <= i; c++) {
                    for (int h = 0; h < NH; h++) {
                        double d = fabs(w->a[c * NH + h] - A[((size_t)h * T + i) * T + c]);
                        maxdiff = d == d ? fmax(maxdiff, d) : INFINITY;
                    }
                }
            }
        }
    }
    free(S); free(Bt); free(A);
    return maxdiff;
}

static void test_dape_reference(void) {
    printf("DAPE (%s, k = %d, D = %d) against the official code's full-matrix computation\n",
           model_label(PE_ID, DAPE_ID), DAPE_ID, DAPE_WIDTH);
    int B = 2, T = 23, x[46];
    GPT2 model;
    dape_test_model(&model, B, T, 31, x);
    GPT2Config* cfg = &model.config;
    int NH = cfg->num_heads, p = cfg->dape / 2;
    char what[160];
    double e = dape_rows_vs_reference(&model, B, T, 0, 0);
    check(e < 1e-5, "row logits = full-matrix logits, every row and layer", e, 1e-5);
    e = dape_rows_vs_reference(&model, B, T, 0, 1);
    check(e < 1e-5, "the same with the row workspace poisoned (NaN)", e, 1e-5);
    // the spec's row reference against the full matrices: o = A - S - Beta
    size_t n = (size_t)NH * T * T;
    double* S = (double*)malloc_check(n * sizeof(double));
    double* Bt = (double*)malloc_check(n * sizeof(double));
    double* A = (double*)malloc_check(n * sizeof(double));
    double* o = (double*)malloc_check((size_t)T * NH * sizeof(double));
    int bias = dape_in_channels(cfg->pe, NH) == 2 * NH;
    double worst[2] = {0, 0};
    for (int edge = 1; edge >= 0; edge--) {
        ref_scores_and_bias(S, Bt, &model, 1, 1, T);
        ref_dape_logits(A, S, Bt, &model, 1, T, edge ? 0 : p);
        for (int i = 0; i < T; i++) {
            spec_dape_row(o, i, T, S, Bt, &model, 1, edge);
            for (int c = 0; c <= i; c++) {
                for (int h = 0; h < NH; h++) {
                    size_t at = ((size_t)h * T + i) * T + c;
                    worst[edge] = fmax(worst[edge], fabs(o[c * NH + h] - (A[at] - S[at] - (bias ? Bt[at] : 0))));
                }
            }
        }
    }
    check(worst[1] < 1e-12, "spec 2.7 row reference = full matrices (edge exact)", worst[1], 1e-12);
    check(worst[0] < 1e-12, "spec 2.7 row reference = full matrices (T -> infinity)", worst[0], 1e-12);
    // leak: scores and biases above the diagonal changed in the full matrices
    double* A2 = (double*)malloc_check(n * sizeof(double));
    uint64_t rng = random_seed(77);
    for (int h = 0; h < NH; h++) {
        for (int i = 0; i < T; i++) {
            for (int j = i + 1; j < T; j++) {
                S[((size_t)h * T + i) * T + j] = 100 * random_normal(&rng);
                Bt[((size_t)h * T + i) * T + j] = 100 * random_normal(&rng);
            }
        }
    }
    ref_dape_logits(A2, S, Bt, &model, 1, T, 0);
    ref_scores_and_bias(S, Bt, &model, 1, 1, T);
    ref_dape_logits(A, S, Bt, &model, 1, T, 0);
    double leak = 0;
    for (int h = 0; h < NH; h++) {
        for (int i = 0; i < T; i++) {
            for (int j = 0; j <= i; j++) { leak = fmax(leak, fabs(A[((size_t)h * T + i) * T + j] - A2[((size_t)h * T + i) * T + j])); }
        }
    }
    check(leak == 0, "full matrices: s, b at j > i changed, rows j <= i same", leak, 0);
    // the model end to end: tokens after position i0 changed, every logit up to i0 the same bits
    float* before = (float*)malloc_check((size_t)T * cfg->padded_vocab_size * sizeof(float));
    float* after = (float*)malloc_check(cfg->padded_vocab_size * sizeof(float));
    int i0s[3] = {0, 9, T - 2};
    for (int k = 0; k < 3; k++) {
        int i0 = i0s[k], y[23];
        for (int t = 0; t < T; t++) { y[t] = t <= i0 ? x[t] : (int)(random_u32(&rng) % cfg->vocab_size); }
        gpt2_forward(&model, x, NULL, 1, T, 0);
        for (int t = 0; t <= i0; t++) { gpt2_logits_row(&model, 0, t, before + (size_t)t * cfg->padded_vocab_size); }
        gpt2_forward(&model, y, NULL, 1, T, 0);
        int same = 1;
        for (int t = 0; t <= i0; t++) {
            gpt2_logits_row(&model, 0, t, after);
            same &= memcmp(after, before + (size_t)t * cfg->padded_vocab_size, cfg->vocab_size * sizeof(float)) == 0;
        }
        snprintf(what, sizeof(what), "tokens after %d changed: logits up to %d, same bits", i0, i0);
        check(same, what, !same, 0);
    }
    free(before); free(after); free(A2);
    free(S); free(Bt); free(A); free(o);
    gpt2_free(&model);
}

// the edge rule: with DAPE_EDGE_EXACT = 0 the hidden layer goes on past T; only the last
// k/2 rows of a window change, and they match the full matrices extended by k/2 columns
static void test_dape_edge(void) {
    printf("DAPE's edge rule (the hidden values past the end of the sequence)\n");
    int B = 2, T = 23, x[46];
    GPT2 model;
    dape_test_model(&model, B, T, 41, x);
    GPT2Config* cfg = &model.config;
    int p = cfg->dape / 2, C = cfg->channels, L = cfg->num_layers;
    size_t n = (size_t)L * model.acts_N * C;
    real* first = (real*)malloc_check(n * sizeof(real));
    memcpy(first, model.acts.t.atty, n * sizeof(real));
    model.dape_edge_exact = 1 - model.dape_edge_exact;
    gpt2_forward(&model, x, x, B, T, 1);
    int ext = model.dape_edge_exact ? 0 : p;
    char what[160];
    for (int l = 0; l < L; l++) {
        double e = dape_attention_vs_reference(&model, l, B, T, ext);
        snprintf(what, sizeof(what), "layer %d, edge rule %d: attention = full matrices", l, model.dape_edge_exact);
        check(e < 1e-5, what, e, 1e-5);
    }
    double e_rows = dape_rows_vs_reference(&model, B, T, ext, 0);
    check(e_rows < 1e-5, "edge rule flipped: row logits = full matrices", e_rows, 1e-5);
    double inner = 0, last = 0;
    for (int l = 0; l < L; l++) {
        for (int b = 0; b < B; b++) {
            for (int i = 0; i < T; i++) {
                for (int c = 0; c < C; c++) {
                    size_t at = (size_t)l * model.acts_N * C + ((size_t)b * T + i) * C + c;
                    double d = fabs(first[at] - model.acts.t.atty[at]);
                    if (i < T - p) { inner = fmax(inner, d); } else { last = fmax(last, d); }
                }
            }
        }
    }
    check(inner == 0, "rows i < T - k/2: same bits with either rule", inner, 0);
    if (p > 0) { check(last > 1e-6, "the last k/2 rows differ between the rules", last, 1e-6); }
    free(first);
    gpt2_free(&model);
}

// the logits of every row of layer 0, batch row 0, with the layer dl
static void dape_layer_rows(double* out, GPT2* model, const DapeLayer* dl, int T) {
    int NH = model->config.num_heads;
    PEBias pb;
    pe_bias_setup(&pb, model, 0, 1, T, 0);
    DapeRow* w = &model->dape->rows[0];
    for (int i = 0; i < T; i++) {
        dape_row_logits(w, dl, model->acts.t.qkv, &pb, pe_positions(model, 0), 0, i, T);
        for (int c = 0; c <= i; c++) {
            for (int h = 0; h < NH; h++) { out[((size_t)h * T + i) * T + c] = w->a[c * NH + h]; }
        }
    }
}

static void test_dape_identities(void) {
    printf("DAPE identities\n");
    int B = 2, T = 23, x[46];
    GPT2 model;
    dape_test_model(&model, B, T, 51, x);
    GPT2Config* cfg = &model.config;
    int NH = cfg->num_heads, C = cfg->channels, L = cfg->num_layers, K = cfg->dape, p = K / 2, D = cfg->dape_width;
    int Cin = dape_in_channels(cfg->pe, NH), bias = Cin == 2 * NH;
    real* saved = (real*)malloc_check(model.num_parameters * sizeof(real));
    memcpy(saved, model.params_memory, model.num_parameters * sizeof(real));
    char what[160];
    // the output layer zero: the base encoding exactly
    memset(model.params.dape_w2, 0, model.param_sizes[P_DAPE_W2] * sizeof(real));
    memset(model.params.dape_b2, 0, model.param_sizes[P_DAPE_B2] * sizeof(real));
    gpt2_forward(&model, x, x, B, T, 1);
    real* plain = (real*)malloc_check((size_t)B * T * C * sizeof(real));
    real* lse = (real*)malloc_check((size_t)B * NH * T * sizeof(real));
    for (int l = 0; l < L; l++) {
        double d = attention_vs_reference(&model, l, pe_ref_bias, B, T);
        snprintf(what, sizeof(what), "layer %d, W2 = b2 = 0: = the base's explicit bias matrix", l);
        check(d < 1e-5, what, d, 1e-5);
        PEBias pb;
        pe_bias_setup(&pb, &model, l, B, T, 0);
        attention_forward(plain, lse, model.acts.t.qkv + (size_t)l * model.acts_N * 3 * C, &pb, pe_positions(&model, l), model.att_scratch, B, T, C, NH);
        double e = 0;
        for (size_t k = 0; k < (size_t)B * T * C; k++) { e = fmax(e, fabs(plain[k] - model.acts.t.atty[(size_t)l * model.acts_N * C + k])); }
        snprintf(what, sizeof(what), "layer %d, W2 = b2 = 0: = the plain attention's output (to rounding)", l);
        check(e < 1e-6, what, e, 1e-6); // the plain attention sums its scores a block of keys at a time, DAPE key by key
    }
    memcpy(model.params_memory, saved, model.num_parameters * sizeof(real));
    gpt2_forward(&model, x, x, B, T, 1);

    // k = 1 is DAPE (MLP): a 1 x 1 layer on the row path against an MLP at each (i, j)
    uint64_t rng = random_seed(61);
    real* w1 = (real*)malloc_check((size_t)D * Cin * K * sizeof(real));
    real* b1 = (real*)malloc_check(D * sizeof(real));
    real* w2 = (real*)malloc_check((size_t)NH * D * K * sizeof(real));
    real* b2 = (real*)malloc_check(NH * sizeof(real));
    real* w1r = (real*)malloc_check((size_t)D * Cin * K * sizeof(real));
    real* w2r = (real*)malloc_check((size_t)NH * D * K * sizeof(real));
    for (int k = 0; k < D * Cin; k++) { w1[k] = 0.4 * random_normal(&rng); }
    for (int k = 0; k < D; k++) { b1[k] = 0.4 * random_normal(&rng); }
    for (int k = 0; k < NH * D; k++) { w2[k] = 0.3 * random_normal(&rng); }
    for (int k = 0; k < NH; k++) { b2[k] = 0.3 * random_normal(&rng); }
    DapeLayer mlp;
    dape_layer_init(&mlp, w1, b1, w2, b2, 1, D, Cin, NH, C / NH, 1, w1r, w2r);
    size_t n = (size_t)NH * T * T;
    double* S = (double*)malloc_check(n * sizeof(double));
    double* Bt = (double*)malloc_check(n * sizeof(double));
    double* A = (double*)malloc_check(n * sizeof(double));
    double* A2 = (double*)malloc_check(n * sizeof(double));
    ref_scores_and_bias(S, Bt, &model, 0, 0, T);
    dape_layer_rows(A, &model, &mlp, T);
    double e = 0;
    for (int i = 0; i < T; i++) {
        for (int j = 0; j <= i; j++) {
            double in[64], hid[DAPE_MAX_WIDTH];
            for (int ch = 0; ch < Cin; ch++) { in[ch] = ch < NH ? S[((size_t)ch * T + i) * T + j] : Bt[((size_t)(ch - NH) * T + i) * T + j]; }
            for (int d = 0; d < D; d++) {
                double z = b1[d];
                for (int ch = 0; ch < Cin; ch++) { z += w1[d * Cin + ch] * in[ch]; }
                hid[d] = ref_lrelu(z);
            }
            for (int h = 0; h < NH; h++) {
                double o = b2[h];
                for (int d = 0; d < D; d++) { o += w2[h * D + d] * hid[d]; }
                size_t at = ((size_t)h * T + i) * T + j;
                e = fmax(e, fabs(A[at] - (S[at] + (bias ? Bt[at] : 0) + o)));
            }
        }
    }
    check(e < 1e-5, "k = 1 on the row path = an MLP per (i, j) (DAPE)", e, 1e-5);
    // k > 1 with every tap but the centre zero: DAPE (MLP) with the centre taps
    if (K > 1) {
        const real* lw1 = model.params.dape_w1;
        const real* lw2 = model.params.dape_w2;
        real* w1k = (real*)calloc_check((size_t)D * Cin * K, sizeof(real));
        real* w2k = (real*)calloc_check((size_t)NH * D * K, sizeof(real));
        for (int k = 0; k < D * Cin; k++) { w1k[(size_t)k * K + p] = lw1[(size_t)k * K + p]; w1[k] = lw1[(size_t)k * K + p]; }
        for (int k = 0; k < NH * D; k++) { w2k[(size_t)k * K + p] = lw2[(size_t)k * K + p]; w2[k] = lw2[(size_t)k * K + p]; }
        real* w1rk = (real*)malloc_check((size_t)D * Cin * K * sizeof(real));
        real* w2rk = (real*)malloc_check((size_t)NH * D * K * sizeof(real));
        DapeLayer conv;
        dape_layer_init(&conv, w1k, model.params.dape_b1, w2k, model.params.dape_b2, K, D, Cin, NH, C / NH, 1, w1rk, w2rk);
        dape_layer_init(&mlp, w1, model.params.dape_b1, w2, model.params.dape_b2, 1, D, Cin, NH, C / NH, 1, w1r, w2r);
        dape_layer_rows(A, &model, &conv, T);
        dape_layer_rows(A2, &model, &mlp, T);
        e = 0;
        for (int h = 0; h < NH; h++) {
            for (int i = 0; i < T; i++) {
                for (int j = 0; j <= i; j++) { e = fmax(e, fabs(A[((size_t)h * T + i) * T + j] - A2[((size_t)h * T + i) * T + j])); }
            }
        }
        snprintf(what, sizeof(what), "1 x %d, only centre taps = DAPE (MLP) with them", K);
        check(e == 0, what, e, 0);
        free(w1k); free(w2k); free(w1rk); free(w2rk);
    }
    free(S); free(Bt); free(A); free(A2);
    free(w1); free(b1); free(w2); free(b2); free(w1r); free(w2r);
    free(plain); free(lse); free(saved);
    gpt2_free(&model);
}

static void test_dape_checkpoint(void) {
    printf("DAPE in the checkpoint (words 9 and 10)\n");
    GPT2Config cfg = tiny_config(16);
    GPT2 model, loaded;
    gpt2_build_from_config(&model, &cfg, 71);
    char ckpt[512], bad[512], expect[256];
    snprintf(ckpt, sizeof(ckpt), "%s/dape.bin", tmpdir);
    gpt2_save_checkpoint(&model, ckpt);
    FILE* f = fopen_check(ckpt, "rb");
    int64_t size = file_size_check(f, ckpt);
    unsigned char* buf = (unsigned char*)malloc_check(size);
    fread_check(buf, 1, size, f, ckpt);
    fclose(f);
    int* h = (int*)buf;
    check(h[9] == DAPE_ID && h[10] == DAPE_WIDTH, "word 9 = kernel width, word 10 = D", h[10], DAPE_WIDTH);
    // the same base without DAPE, and another DAPE variant: one error naming both
    int others[2] = {0, DAPE_ID == 1 ? 3 : 1};
    for (int k = 0; k < 2; k++) {
        snprintf(bad, sizeof(bad), "%s/dape_other%d.bin", tmpdir, k);
        h[9] = others[k]; h[10] = others[k] ? DAPE_WIDTH : 0;
        f = fopen_check(bad, "wb"); fwrite(buf, 1, size, f); fclose(f);
        snprintf(expect, sizeof(expect), "trained with PE '%s' but this binary was built with PE '%s'",
                 model_label(PE_ID, others[k]), model_label(PE_ID, DAPE_ID));
        expect_failure(others[k] ? "checkpoint of another DAPE variant names both" : "checkpoint without DAPE names both",
                       fail_load, bad, expect);
    }
    h[9] = DAPE_ID; h[10] = 0;
    snprintf(bad, sizeof(bad), "%s/dape_width.bin", tmpdir);
    f = fopen_check(bad, "wb"); fwrite(buf, 1, size, f); fclose(f);
    expect_failure("checkpoint with DAPE width 0", fail_load, bad, "bad DAPE width 0");
    // another width D is a size like C or L: read from the file
    cfg.dape_width = 5;
    GPT2 narrow;
    gpt2_build_from_config(&narrow, &cfg, 72);
    gpt2_save_checkpoint(&narrow, ckpt);
    gpt2_build_from_checkpoint(&loaded, ckpt);
    int same = loaded.config.dape_width == 5 && loaded.num_parameters == narrow.num_parameters
            && memcmp(loaded.params_memory, narrow.params_memory, narrow.num_parameters * sizeof(real)) == 0;
    check(same, "a D = 5 checkpoint loads as D = 5, bit-exact", loaded.config.dape_width, 5);
    int x[16];
    uint64_t rng = random_seed(73);
    random_tokens(x, 16, cfg.vocab_size, &rng);
    gpt2_forward(&loaded, x, x, 1, 16, 0);
    check(isfinite(loaded.mean_loss), "and runs", loaded.mean_loss, 0);
    free(buf);
    gpt2_free(&model); gpt2_free(&narrow); gpt2_free(&loaded);
}

// ----------------------------------------------------------------------------
// gradient checks (fp64 build): analytic gradients against central differences

// the loss at the model's parameters, and its piece (CoPE's needs every layer's q and k,
// which a training forward pass keeps: an encoding with its own attention gets one; an
// encoding whose positions differ in training gets one too, whose positions, SHAPE's offsets
// or CAPE's augmentation, are a training pass's, as the analytic gradient's)
static double loss_at(GPT2* model, const int* x, const int* y, int B, int T, uint64_t* piece) {
    gpt2_forward(model, x, y, B, T, PE_KIND == PE_KIND_ATTN || PE_TRAINING_POSITIONS ? 1 : 0);
    *piece = pe_loss_piece(model, B, T);
    return model->mean_loss;
}

// the central difference of the loss along dir (n values from parameter `offset`): the step
// eps is divided by 10 (at most 4 times, counted in *shrunk) while a point leaves the
// piece of the unperturbed parameters, where the difference would straddle a kink
static double central_difference(GPT2* model, const int* x, const int* y, int B, int T, size_t offset, const real* dir,
                                 size_t n, double eps, uint64_t piece, int* shrunk) {
    real* p = model->params_memory + offset;
    for (int tries = 0;; tries++, eps /= 10, (*shrunk)++) {
        uint64_t piece_plus, piece_minus;
        for (size_t i = 0; i < n; i++) { p[i] += eps * dir[i]; }
        double lp = loss_at(model, x, y, B, T, &piece_plus);
        for (size_t i = 0; i < n; i++) { p[i] -= 2 * eps * dir[i]; }
        double lm = loss_at(model, x, y, B, T, &piece_minus);
        for (size_t i = 0; i < n; i++) { p[i] += eps * dir[i]; }
        if ((piece_plus == piece && piece_minus == piece) || tries == 4) { return (lp - lm) / (2 * eps); }
    }
}

// DAPE's hidden units away from the LReLU's kink, where a finite difference is wrong by
// construction (thousands of units, so some would lie within a step of it): b1 = +-(0.5..1)
// and W1 so small that |W1 x| stays far below 0.5; both sides of the kink stay in use
static void dape_away_from_kink(GPT2* model, uint64_t* rng) {
    for (size_t i = 0; i < model->param_sizes[P_DAPE_B1]; i++) {
        real v = 0.5 + 0.5 * random_f32(rng);
        model->params.dape_b1[i] = random_f32(rng) < 0.5f ? -v : v;
    }
    for (size_t i = 0; i < model->param_sizes[P_DAPE_W1]; i++) { model->params.dape_w1[i] = 1e-3 * (2 * random_f32(rng) - 1); }
}

// the smallest |z| of DAPE's hidden pre-activations z (= h where h > 0, h / slope otherwise)
// over every layer and row of the last training forward pass
static double dape_min_preactivation(GPT2* model, int B, int T) {
    GPT2Config* cfg = &model->config;
    double least = INFINITY;
    for (int l = 0; l < cfg->num_layers; l++) {
        dape_layer_setup(model, l, 0);
        PEBias pb;
        pe_bias_setup(&pb, model, l, B, T, 0);
        DapeRow* w = &model->dape->rows[0];
        for (int b = 0; b < B; b++) {
            for (int i = 0; i < T; i++) {
                dape_row_logits(w, &model->dape->layer, model->acts.t.qkv + (size_t)l * model->acts_N * 3 * cfg->channels, &pb, pe_positions(model, l), b, i, T);
                for (size_t e = 0; e < (size_t)dape_hidden_end(&model->dape->layer, i, T) * cfg->dape_width; e++) {
                    double z = w->hid[e] > 0 ? w->hid[e] : w->hid[e] / DAPE_LRELU_SLOPE;
                    least = fmin(least, fabs(z));
                }
            }
        }
    }
    return least;
}

// edge_exact: DAPE's edge rule (pe/dape.h) for the run; rp: under one draw of
// randomized positions from [0, 3T), checking the tensors the positions reach first (wpe,
// qkvw, the encoding's own); masked: the loss of answer-only data, on a third of the
// targets (the others TARGET_UNSCORED), which must also be their mean loss in an unmasked pass;
// at: the positions (AT_*); variant: one of the encoding's own test variants (PE_TEST_VARIANTS;
// NULL: none)
static void test_gradients(int edge_exact, int at, int masked, const char* variant) {
#ifndef REAL_DOUBLE
    printf("gradient checks need the fp64 build (make build/gradcheck_<pe>)\n");
    (void)edge_exact; (void)at; (void)masked; (void)variant;
    failures++;
#else
    int B = 2, T = 24;
    GPT2Config cfg = tiny_config(T);
    PEEval e = {PE_EVAL_PLAIN, 2.0, T / 2};
    int variant_rp, variant_masked, variant_given;
    parse_test_variant("gradcheck", variant, &cfg, &e, &variant_rp, &variant_masked, &variant_given);
    at = variant_rp ? AT_DRAWN : variant_given ? AT_GIVEN : at;
    masked = masked || variant_masked;
    printf("gradient checks against central finite differences (%s, fp64%s%s%s%s%s)\n", model_label(PE_ID, DAPE_ID),
           DAPE_ID > 1 ? (edge_exact ? ", DAPE edge exact" : ", DAPE edge T -> infinity") : "",
           AT_NAMES[at], masked ? ", a third of the targets scored" : "",
           variant != NULL ? ", variant " : "", variant != NULL ? variant : "");
    if (at == AT_DRAWN) { cfg.rp_len = 3 * T; cfg.rp_seed = 8; }
    if (at == AT_GIVEN) { pe_config_positions(&cfg, 3 * T); }
    pe_test_config(&cfg);
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 13);
    model.pe_eval = e;
    model.rp_key = rp_key(RP_STREAM_TEST, 3, 0); // one draw for every forward pass of the check
    int given[48];
    debug_positions(given, B, T);
    model.pos_in = at == AT_GIVEN ? given : NULL;
    model.dape_edge_exact = edge_exact;
    uint64_t rng = random_seed(17);
    perturb_parameters(&model, 0.1, &rng);
    pe_test_params(&model, &rng);
    if (cfg.dape != 0) { dape_away_from_kink(&model, &rng); }
    int x[48], y[48];
    random_tokens(x, B * T, cfg.vocab_size, &rng);
    random_tokens(y, B * T, cfg.vocab_size, &rng);
    if (masked) { // positions 2, 5, 8, ... scored: their mean loss in a pass that scores every target
        gpt2_forward(&model, x, y, B, T, 0);
        double sum = 0;
        int n = 0;
        for (int i = 0; i < B * T; i++) {
            if (i % 3 == 2) { sum += model.acts.t.losses[i]; n++; } else { y[i] = TARGET_UNSCORED; }
        }
        gpt2_forward(&model, x, y, B, T, 0);
        double err = fabs(model.mean_loss - sum / n);
        check(err <= 1e-14, "masked loss = the mean of the scored targets' losses", err, 1e-14);
    }
    gpt2_zero_grad(&model);
    gpt2_forward(&model, x, y, B, T, 1);
    gpt2_backward(&model);
    if (cfg.dape != 0) {
        double z = dape_min_preactivation(&model, B, T);
        check(z > 0.1, "DAPE: every hidden |z| away from the LReLU's kink", z, 0.1);
    }
    real* grad = (real*)malloc_check(model.num_parameters * sizeof(real));
    memcpy(grad, model.grads_memory, model.num_parameters * sizeof(real));
    uint64_t piece = pe_loss_piece(&model, B, T);
    int shrunk = 0;
    const double eps = 1e-5, atol = 1e-8, rtol = 1e-5;
    const real one = 1;
    size_t offset = 0;
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) {
        size_t n = model.param_sizes[k];
        if (n == 0) { continue; }
        if (at != AT_INDICES && k != P_WPE && k != P_QKVW && k < P_PE_BEGIN) { offset += n; continue; }
        // up to 24 single elements, spread over the tensor, and one random direction
        double worst = 0, worst_abs = 0;
        int samples = n < 24 ? (int)n : 24;
        for (int s = 0; s < samples; s++) {
            size_t i = offset + (n <= 24 ? (size_t)s : random_u32(&rng) % n);
            if (k == P_WTE && (i - offset) / cfg.channels >= (size_t)cfg.vocab_size) { continue; } // padding rows
            double fd = central_difference(&model, x, y, B, T, i, &one, 1, eps, piece, &shrunk);
            double err = fabs(fd - grad[i]);
            worst_abs = fmax(worst_abs, err);
            worst = fmax(worst, err / (atol / rtol + fabs(fd)));
        }
        real* dir = (real*)malloc_check(n * sizeof(real));
        double analytic = 0;
        for (size_t i = 0; i < n; i++) {
            dir[i] = (k == P_WTE && i / cfg.channels >= (size_t)cfg.vocab_size) ? 0 : random_normal(&rng);
            analytic += dir[i] * grad[offset + i];
        }
        double fd = central_difference(&model, x, y, B, T, offset, dir, n, eps, piece, &shrunk);
        double dir_err = fabs(fd - analytic) / (atol / rtol + fabs(fd));
        free(dir);
        char what[160];
        snprintf(what, sizeof(what), "%-10s %6zu elements: max rel error (elements | direction)", PARAM_NAMES[k], n);
        printf("  %-58s %.2e | %.2e  (abs %.1e)\n", what, worst, dir_err, worst_abs);
        int ok = worst <= rtol && dir_err <= rtol;
        if (!ok) { printf("  %-58s FAIL (tolerance: |fd - analytic| <= %.0e + %.0e |fd|)\n", PARAM_NAMES[k], atol, rtol); failures++; }
        offset += n;
    }
    free(grad);
#ifdef PE_LOSS_PIECE
    printf("  steps divided by 10 to keep a difference off the loss's kinks: %d times\n", shrunk);
#endif
    pe_test_gradients(&model, B, T);
    gpt2_free(&model);
#endif
}

// ----------------------------------------------------------------------------
// the CPU reference for the CUDA path (llmc/debug_state.h)

// `variant` (NULL: plain; parse_test_variant) names what the whole reference runs under,
// forward, backward and steps: an evaluation variant (llmc/pe.h), a RoPE scaling method at
// s = 2 (a static factor of 2, or T = 2 L for the dynamic ones), or xpos's BCA with L = T / 2;
// "rp": randomized positions from [0, 2T) (the checkpoint's words 12, 13), one fixed draw (its
// key in the state's words 12-13) for the batch and every step; "mask": the targets of
// answer-only data, two of every three TARGET_UNSCORED (and the first ten), the loss the
// mean of the others; "pos": the given positions of debug_positions (the state's word 15 is 1,
// and they follow the step losses); the encoding's own options (in the checkpoint's header).
// tiny: a model and batch small enough for the CUDA path's CPU emulation to run in seconds
// (2 layers, 2 heads of 32, a vocabulary of 250, B = 2, T = 37: no tile is full; DEBUG_TINY_STEPS steps)
static void write_debug_state(const char* prefix, const char* variant, int tiny) {
    GPT2Config cfg = {0};
    cfg.num_layers = DEBUG_LAYERS; cfg.num_heads = DEBUG_HEADS; cfg.channels = DEBUG_CHANNELS;
    cfg.vocab_size = GPT2_VOCAB; cfg.padded_vocab_size = GPT2_PADDED_VOCAB; cfg.max_seq_len = DEBUG_T; cfg.pe = PE_ID;
    int B = DEBUG_B, T = DEBUG_T, steps = DEBUG_STEPS;
    if (tiny) {
        cfg.num_heads = 2; cfg.channels = 64; cfg.vocab_size = 250; cfg.padded_vocab_size = 256;
        B = 2; T = 37; cfg.max_seq_len = T; steps = DEBUG_TINY_STEPS;
    }
    gpt2_config_set_build(&cfg);
    int rp, masked, given;
    PEEval e = {PE_EVAL_PLAIN, 2.0, T / 2};
    parse_test_variant("debug-state", variant, &cfg, &e, &rp, &masked, &given);
    if (rp) { cfg.rp_len = 2 * T; cfg.rp_seed = 77; }
    int* pos = (int*)malloc_check((size_t)B * T * sizeof(int));
    if (given) { pe_config_positions(&cfg, debug_positions(pos, B, T)); }
    pe_test_config(&cfg);
    int Vp = cfg.padded_vocab_size;
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 1234);
    uint64_t rng = random_seed(99);
    perturb_parameters(&model, 0.02f, &rng);
    pe_test_params(&model, &rng);
    model.pe_eval = e;
    model.rp_key = rp_key(RP_STREAM_TEST, 5, 0);
    model.pos_in = given ? pos : NULL;
    char path[1024];
    snprintf(path, sizeof(path), "%s_model.bin", prefix);
    gpt2_save_checkpoint(&model, path);
    int* x = (int*)malloc_check((size_t)B * T * sizeof(int));
    int* y = (int*)malloc_check((size_t)B * T * sizeof(int));
    random_tokens(x, B * T, cfg.vocab_size, &rng);
    random_tokens(y, B * T, cfg.vocab_size, &rng);
    for (int i = 0; i < B * T && masked; i++) { if (i % 3 != 0 || i < 10) { y[i] = TARGET_UNSCORED; } }
    // logits, loss and gradients of the batch
    gpt2_zero_grad(&model);
    gpt2_forward(&model, x, y, B, T, 1);
    gpt2_backward(&model);
    float* logits = (float*)malloc_check((size_t)B * T * Vp * sizeof(float));
    for (int bt = 0; bt < B * T; bt++) { gpt2_logits_row(&model, bt / T, bt % T, logits + (size_t)bt * Vp); }
    float loss = (float)model.mean_loss;
    float* grads = (float*)malloc_check(model.num_parameters * sizeof(float));
    for (size_t i = 0; i < model.num_parameters; i++) { grads[i] = (float)model.grads_memory[i]; }
    // the losses of `steps` AdamW steps on the same batch
    float losses[DEBUG_STEPS];
    for (int step = 0; step < steps; step++) {
        gpt2_zero_grad(&model);
        gpt2_forward(&model, x, y, B, T, 1);
        gpt2_backward(&model);
        losses[step] = (float)model.mean_loss;
        double norm = sqrt(gpt2_grad_norm_squared(&model));
        gpt2_update(&model, DEBUG_LR, DEBUG_BETA1, DEBUG_BETA2, DEBUG_EPS, DEBUG_WD, norm > 1 ? (float)(1 / norm) : 1.0f, step + 1);
    }
    int header[256] = {0};
    header[0] = DEBUG_STATE_MAGIC; header[1] = 1; header[2] = B; header[3] = T; header[4] = steps; header[5] = PE_ID;
    header[6] = e.variant; header[7] = e.train_len;
    float factor = (float)e.rope_factor;
    memcpy(&header[10], &factor, 4);
    uint64_t np = model.num_parameters;
    memcpy(&header[8], &np, 8);
    memcpy(&header[12], &model.rp_key, 8);
    header[15] = given;
    memcpy(&header[16], &model.config.cape, sizeof(CapeAugment)); // a run setting, not in the checkpoint
    snprintf(path, sizeof(path), "%s_state.bin", prefix);
    AtomicFile af;
    atomic_open(&af, path);
    atomic_write(&af, header, sizeof(int), 256);
    atomic_write(&af, x, sizeof(int), (size_t)B * T);
    atomic_write(&af, y, sizeof(int), (size_t)B * T);
    atomic_write(&af, logits, sizeof(float), (size_t)B * T * Vp);
    atomic_write(&af, &loss, sizeof(float), 1);
    atomic_write(&af, grads, sizeof(float), model.num_parameters);
    atomic_write(&af, losses, sizeof(float), steps);
    if (given) { atomic_write(&af, pos, sizeof(int), (size_t)B * T); }
    atomic_commit(&af);
    printf("wrote %s_model.bin and %s_state.bin (%s, %s, loss %.6f, step losses %.6f ... %.6f)\n", prefix, prefix,
           model_label(PE_ID, DAPE_ID), variant != NULL ? variant : "plain", loss, losses[0], losses[steps - 1]);
    free(x); free(y); free(logits); free(grads); free(pos);
    gpt2_free(&model);
}

// ----------------------------------------------------------------------------
// the reference for the PyTorch model (python/model.py, python/test_model.py)

#define TORCH_REF_MAGIC 20240329
#define TORCH_REF_B 2
#define TORCH_REF_T 160 // beyond T5's last bucket (128); FIRE's thresholds 48 and 104 (L0 = 80)

// Writes PREFIX_model.bin, a tiny model (2 layers, 3 heads of size 8, V = 250) moved away
// from its initialization, unless MODEL.bin is given, and PREFIX_ref.bin: one batch of
// the model as loaded from that file, its logits and loss and every parameter gradient,
// in `real` (fp64 in the gradcheck build), under the evaluation variant `variant` (NULL:
// plain): training length L = T / 2, so that the dynamic RoPE methods scale by s = 2 and
// BCA masks, and a static RoPE factor of 4, other than the dynamic one.
// The variant "rp" instead: randomized positions from [0, 2T) (a new model's checkpoint
// words 12, 13; learned with 2T rows of wpe), one fixed draw, written after the gradients.
// The variant "mask": two of every three targets TARGET_UNSCORED (answer-only data).
// int32 header[256] = {TORCH_REF_MAGIC, 1, B, T, PE id, sizeof(real), variant, L, 0...}
// (num_params as uint64 at word 8, the RoPE factor as a double at word 10, the draws' key
// as uint64 at word 12, their number (0: plain positions) at word 14, cape's augmentation
// (CapeAugment's bytes: float global, float scale, int32 local) at words 16-18), then int32
// inputs[B*T], int32 targets[B*T], real logits[B*T*Vp], real loss, real grads[num_params],
// int32 positions[draws*B*T] (the positions the layers read: drawn or given, with the
// encoding's own, SHAPE's offsets; written for those variants and for an encoding with its own).
// The variant "pos": the given positions of debug_positions (llmc/debug_state.h) in every
// draw (the encodings that take positions).
static void write_torch_reference(const char* prefix, const char* checkpoint, const char* variant) {
    char path[1024];
    int B = TORCH_REF_B, T = TORCH_REF_T;
    int rp, masked, given;
    PEEval e = {PE_EVAL_PLAIN, 4.0, T / 2};
    parse_test_variant("torch-reference", variant, NULL, &e, &rp, &masked, &given);
    int* pos = (int*)malloc_check((size_t)B * T * sizeof(int));
    int span = debug_positions(pos, B, T);
    if (checkpoint == NULL) {
        GPT2Config cfg = tiny_config(T);
        cfg.num_heads = 3; cfg.channels = 24;
        if (rp) { cfg.rp_len = 2 * T; cfg.rp_seed = 31; }
        if (given) { pe_config_positions(&cfg, span); }
        pe_test_config(&cfg);
        GPT2 init;
        gpt2_build_from_config(&init, &cfg, 1234);
        uint64_t rng = random_seed(7);
        perturb_parameters(&init, 0.1f, &rng);
        pe_test_params(&init, &rng);
        snprintf(path, sizeof(path), "%s_model.bin", prefix);
        gpt2_save_checkpoint(&init, path);
        gpt2_free(&init);
        checkpoint = path;
    }
    GPT2 model; // the parameters as the file holds them, in fp32 or bf16
    gpt2_build_from_checkpoint(&model, checkpoint);
    GPT2Config test = model.config;
    pe_test_config(&test);
    model.config.cape = test.cape; // the tests' run settings, which no checkpoint holds
    model.pe_eval = e;
    if (rp && model.config.rp_len == 0) { fatal("torch-reference rp: %s has no randomized positions", checkpoint); }
    model.rp_key = rp_key(RP_STREAM_TEST, 4, 0);
    model.pos_in = given ? pos : NULL;
    int draws = rp || given || PE_OWN_POSITIONS_USED ? rp_draws(PE_ID, model.config.num_layers) : 0;
    int C = model.config.channels, V = model.config.vocab_size, Vp = model.config.padded_vocab_size;
    int* x = (int*)malloc_check((size_t)B * T * sizeof(int));
    int* y = (int*)malloc_check((size_t)B * T * sizeof(int));
    uint64_t rng = random_seed(11);
    random_tokens(x, B * T, V, &rng);
    random_tokens(y, B * T, V, &rng);
    for (int i = 0; i < B * T && masked; i++) { if (i % 3 != 0) { y[i] = TARGET_UNSCORED; } }
    gpt2_zero_grad(&model);
    gpt2_forward(&model, x, y, B, T, 1);
    gpt2_backward(&model);
    real* logits = (real*)malloc_check((size_t)B * T * Vp * sizeof(real));
    matmul_forward(logits, model.acts.t.lnf, model.params.wte, NULL, B * T, C, Vp);
    int header[256] = {0};
    header[0] = TORCH_REF_MAGIC; header[1] = 1; header[2] = B; header[3] = T; header[4] = PE_ID; header[5] = sizeof(real);
    header[6] = e.variant; header[7] = e.train_len;
    uint64_t np = model.num_parameters;
    memcpy(&header[8], &np, 8);
    memcpy(&header[10], &e.rope_factor, 8);
    memcpy(&header[12], &model.rp_key, 8);
    header[14] = draws;
    memcpy(&header[16], &model.config.cape, sizeof(CapeAugment)); // a run setting, not in the checkpoint
    snprintf(path, sizeof(path), "%s_ref.bin", prefix);
    AtomicFile af;
    atomic_open(&af, path);
    atomic_write(&af, header, sizeof(int), 256);
    atomic_write(&af, x, sizeof(int), (size_t)B * T);
    atomic_write(&af, y, sizeof(int), (size_t)B * T);
    atomic_write(&af, logits, sizeof(real), (size_t)B * T * Vp);
    atomic_write(&af, &model.mean_loss, sizeof(real), 1);
    atomic_write(&af, model.grads_memory, sizeof(real), model.num_parameters);
    atomic_write(&af, model.positions, sizeof(int), (size_t)draws * B * T);
    atomic_commit(&af);
    free(x); free(y); free(logits); free(pos);
    gpt2_free(&model);
}

// two checkpoints of the same configuration, tensor by tensor (multi-process and
// resume tests compare their final checkpoints with this)
// ----------------------------------------------------------------------------
// the evaluations of llmc/hellaswag.h and llmc/passkey.h (./test_gpt2 evals, ./test_gpt2
// passkey FILE; tests/evals.sh runs them with the files they need)

static MultiProcess test_mp; // one process (mp_init in main: the evaluations' sums call MPI)

// writes an eval file in llm.c's format: `n` random examples of the tiny vocabulary, with
// 2..5 completions, contexts of 1..40 tokens and completions of 1..8 (the longest rows
// exceed a maxT of 24, so a learned model cuts them)
static void write_random_evalfile(const char* path, int n, int V, uint64_t* rng) {
    uint16_t* stream = (uint16_t*)malloc_check((size_t)n * 512 * sizeof(uint16_t));
    int64_t len = 0;
    int longest = 0;
    for (int i = 0; i < n; i++) {
        int64_t start = len;
        int completions = 2 + (int)(random_u32(rng) % 4);
        stream[len++] = 65535; stream[len++] = 0; stream[len++] = (uint16_t)i;
        stream[len++] = (uint16_t)(random_u32(rng) % completions); stream[len++] = (uint16_t)completions;
        for (int part = 0; part <= completions; part++) {
            int k = part == 0 ? 1 + (int)(random_u32(rng) % 40) : 1 + (int)(random_u32(rng) % 8);
            stream[len++] = (uint16_t)k;
            for (int t = 0; t < k; t++) { stream[len++] = (uint16_t)(random_u32(rng) % V); }
        }
        stream[start + 1] = (uint16_t)(2 * (len - start));
        if (2 * (len - start) > longest) { longest = (int)(2 * (len - start)); }
    }
    int header[256] = {0};
    header[0] = 20240522; header[1] = 1; header[2] = n; header[3] = longest;
    FILE* f = fopen_check(path, "wb");
    fwrite(header, sizeof(int), 256, f);
    fwrite(stream, sizeof(uint16_t), len, f);
    fclose(f);
    free(stream);
}

// the summed loss of one completion, its row alone in a forward pass of its own length: the
// context's last tokens (as many as the window leaves), then the completion
static double completion_loss(GPT2* model, const EvalExample* ex, int c, int window) {
    int keep = ex->context_len, K = ex->completion_len[c];
    if (keep + K - 1 > window) { keep = window - K + 1; }
    int T = keep + K - 1, seq[64];
    for (int t = 0; t < keep; t++) { seq[t] = ex->context[ex->context_len - keep + t]; }
    for (int t = 0; t < K; t++) { seq[keep + t] = ex->completion[c][t]; }
    int x[64], y[64];
    float losses[64];
    for (int t = 0; t < T; t++) { x[t] = seq[t]; y[t] = seq[t + 1]; }
    gpt2_forward(model, x, y, 1, T, 0);
    gpt2_token_losses(model, losses);
    double sum = 0;
    for (int t = keep - 1; t < T; t++) { sum += losses[t]; }
    return sum;
}

static void fail_evalfile(const void* path) {
    EvalFile ef;
    evalfile_load(&ef, (const char*)path, 250, 24);
}

static void test_hellaswag_scoring(void) {
    printf("HellaSwag scoring (llmc/hellaswag.h)\n");
    GPT2Config cfg = tiny_config(24);
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 5);
    uint64_t rng = random_seed(6);
    perturb_parameters(&model, 0.5f, &rng);
    char path[512];
    snprintf(path, sizeof(path), "%s/eval.bin", tmpdir);
    write_random_evalfile(path, 60, cfg.vocab_size, &rng);
    int window = gpt2_max_length(&model);
    EvalFile ef;
    evalfile_load(&ef, path, cfg.vocab_size, window);
    // the definition, example by example: every completion's row alone, unpadded
    int correct = 0, correct_norm = 0, cut = 0;
    for (int i = 0; i < ef.num_examples; i++) {
        EvalExample ex;
        evalfile_example(&ef, i, window, &ex);
        double best_sum = INFINITY, best_mean = INFINITY;
        int pred = -1, pred_norm = -1, was_cut = 0;
        for (int c = 0; c < ex.completions; c++) {
            double sum = completion_loss(&model, &ex, c, window);
            if (sum < best_sum) { best_sum = sum; pred = c; }
            if (sum / ex.completion_len[c] < best_mean) { best_mean = sum / ex.completion_len[c]; pred_norm = c; }
            was_cut |= ex.context_len + ex.completion_len[c] - 1 > window;
        }
        correct += pred == ex.label;
        correct_norm += pred_norm == ex.label;
        cut += was_cut;
    }
    EvalResult packed = evalfile_score(&model, &ef, 64, &test_mp); // many examples per batch, padded
    EvalResult alone = evalfile_score(&model, &ef, 1, &test_mp);   // one example per batch
    printf("  definition: acc %d/60, acc_norm %d/60, cut %d; packed batches %d, %d, %d; one example each %d, %d, %d\n",
           correct, correct_norm, cut, packed.correct, packed.correct_norm, packed.cut, alone.correct, alone.correct_norm, alone.cut);
    int same = packed.examples == 60 && packed.correct == correct && packed.correct_norm == correct_norm && packed.cut == cut;
    check(same, "acc, acc_norm and cuts as the definition, packed batches", abs(packed.correct - correct) + abs(packed.correct_norm - correct_norm), 0);
    same = alone.examples == 60 && alone.correct == correct && alone.correct_norm == correct_norm && alone.cut == cut;
    check(same, "the same with one example per batch", abs(alone.correct - correct) + abs(alone.correct_norm - correct_norm), 0);
    check(window == 24 ? cut > 0 : cut == 0, "contexts cut only where the model has a window (learned: maxT = 24)", cut, 0);
    evalfile_free(&ef);
    // malformed files: one error each
    FILE* f = fopen_check(path, "rb");
    int64_t size = file_size_check(f, path);
    unsigned char* b = (unsigned char*)malloc_check(size);
    unsigned char* copy = (unsigned char*)malloc_check(size);
    fread_check(b, 1, size, f, path);
    fclose(f);
    char bad[512];
    snprintf(bad, sizeof(bad), "%s/bad_eval.bin", tmpdir);
    struct { const char* what; const char* expect; int64_t offset; uint16_t value; int64_t length; } cases[] = {
        {"eval file with a wrong magic", "bad magic", 0, 7, size},
        {"eval file: a truncated example", "truncated", 1024, 65535, size - 6},
        {"eval file: a label out of range", "label 9, outside", 1024 + 6, 9, size},
        {"eval file: a wrong delimiter", "delimiter", 1024, 7, size},
        {"eval file: a token outside the vocabulary", "outside the vocabulary", 1024 + 12, 300, size},
        {"eval file: a completion longer than the window", "longer than the model's window", -1, 0, 0},
    };
    for (int k = 0; k < (int)(sizeof(cases) / sizeof(cases[0])); k++) {
        if (k == 5 && window != 24) { continue; } // only a model with a window (learned)
        f = fopen_check(bad, "wb");
        if (cases[k].offset >= 0) { // the file with one value changed, or cut short
            memcpy(copy, b, size);
            if (cases[k].offset == 0) { copy[0] = (unsigned char)cases[k].value; }
            else { memcpy(copy + cases[k].offset, &cases[k].value, 2); }
            fwrite(copy, 1, cases[k].length, f);
        } else { // one example whose completion has 30 tokens
            int header[256] = {0};
            uint16_t e[38] = {65535, 2 * 38, 0, 0, 1, 1, 5, 30};
            for (int t = 8; t < 38; t++) { e[t] = 1; }
            header[0] = 20240522; header[1] = 1; header[2] = 1; header[3] = 2 * 38;
            fwrite(header, sizeof(int), 256, f);
            fwrite(e, sizeof(uint16_t), 38, f);
        }
        fclose(f);
        expect_failure(cases[k].what, fail_evalfile, bad, cases[k].expect);
    }
    free(b);
    free(copy);
    gpt2_free(&model);
}

// a model of GPT-2's vocabulary small enough for the passkey tests: 1 layer, 2 heads, 16 channels
static void passkey_test_model(GPT2* model, int maxT, uint64_t seed) {
    GPT2Config cfg = {0};
    cfg.num_layers = 1; cfg.num_heads = 2; cfg.channels = 16;
    cfg.vocab_size = 50257; cfg.padded_vocab_size = 50304; cfg.max_seq_len = maxT; cfg.pe = PE_ID;
    gpt2_config_set_build(&cfg);
    gpt2_build_from_config(model, &cfg, seed);
    uint64_t rng = random_seed(seed + 1);
    perturb_parameters(model, 0.3f, &rng);
}

// log-softmax of the logits at token v, in double
static double log_prob_of(const float* logits, int V, int v) {
    double maxv = -INFINITY, sum = 0;
    for (int i = 0; i < V; i++) { if (logits[i] > maxv) { maxv = logits[i]; } }
    for (int i = 0; i < V; i++) { sum += exp(logits[i] - maxv); }
    return logits[v] - maxv - log(sum);
}

static void test_passkey(const char* path) {
    printf("passkey retrieval (llmc/passkey.h)\n");
    PasskeyTokens pk;
    passkey_load(&pk, path, 50257);
    int minL = passkey_min_length(&pk);
    int* x = (int*)malloc_check(4096 * sizeof(int));
    int* y = (int*)malloc_check(4096 * sizeof(int));
    // the prompt: exactly L tokens, the key line at the depth asked for, the key twice in
    // it, the question and the key's teacher-forced tokens at the end
    int bad_len = 0, bad_parts = 0;
    double worst_depth = 0;
    const double depths[] = {0, 0.1, 0.25, 0.5, 0.75, 0.9, 1};
    for (int L = minL; L < minL + 400; L += 7) {
        for (int d = 0; d < 7; d++) {
            int key = passkey_key(&pk, 3, L * 7 + d);
            const uint16_t* kt = pk.values + pk.key_start[key - pk.first_key];
            int A = pk.key_len[key - pk.first_key];
            PasskeyPrompt pp;
            for (int t = 0; t < 4096; t++) { x[t] = -1; }
            if (!passkey_build(&pk, L, depths[d], key, x, y, &pp)) { bad_len++; continue; }
            bad_len += x[L - 1] < 0 || x[L] != -1;
            int task = pk.text_len[PK_TASK], nl = pk.text_len[PK_NEWLINE], q = L - A + 1 - pk.text_len[PK_QUESTION];
            int before = pp.key_line - task - nl - (pp.key_line > task + nl ? nl : 0); // filler tokens before the key line
            int ok = pp.answer_len == A && y[L - 1] == kt[A - 1] && x[pp.key_line - 1] == pk.text[PK_NEWLINE][nl - 1];
            for (int t = 0; t < A; t++) {
                ok &= x[pp.key_line + pk.text_len[PK_KEY_BEFORE] + t] == kt[t];
                ok &= x[pp.key_line + pk.text_len[PK_KEY_BEFORE] + A + pk.text_len[PK_KEY_BETWEEN] + t] == kt[t];
                ok &= (t < A - 1 ? x[L - A + 1 + t] : y[L - 1]) == kt[t];
            }
            for (int t = 0; t < pk.text_len[PK_QUESTION]; t++) { ok &= x[q + t] == pk.text[PK_QUESTION][t]; }
            for (int t = 0; t + 1 < L; t++) { ok &= y[t] == x[t + 1]; }
            bad_parts += !ok;
            worst_depth = fmax(worst_depth, fabs((double)before - depths[d] * pp.filler)); // in filler tokens
        }
    }
    check(bad_len == 0, "prompts of exactly L tokens, every L from the shortest on", bad_len, 0);
    check(bad_parts == 0, "key twice in its line, question, answer at the end", bad_parts, 0);
    check(worst_depth <= 1.0, "key line at the depth asked for (in filler tokens)", worst_depth, 1.0);
    int longest = 0; // the shortest window holds the longest key, one token less does not
    for (int k = 0; k < pk.num_keys && longest == 0; k++) { if (pk.key_len[k] == pk.longest_key) { longest = pk.first_key + k; } }
    PasskeyPrompt pp;
    int fits = passkey_build(&pk, minL, 0.5, longest, x, y, &pp) && !passkey_build(&pk, minL - 1, 0.5, longest, x, y, &pp);
    check(fits, "the shortest window holds the longest key", !fits, 0);
    // seeds: a trial's key depends on the seed and the trial alone
    int same = 0, differ = 0, in_range = 1;
    for (int t = 0; t < 100; t++) {
        int k = passkey_key(&pk, 1, t);
        same += k == passkey_key(&pk, 1, t);
        differ += k != passkey_key(&pk, 2, t);
        in_range &= k >= 10000 && k <= 99999;
    }
    check(same == 100 && differ >= 95 && in_range, "keys: 5 digits, the same for a seed, others for another", 100 - same + (differ < 95), 0);
    // scoring: the model's own greedy continuation, generated token by token, must count as
    // retrieved, with the sum of the generation's log-softmaxes as its log-probability; a
    // key that differs in its last token must not count
    GPT2 model;
    int L = minL + 40;
    passkey_test_model(&model, 256, 11);
    int V = model.config.vocab_size;
    float* logits = (float*)malloc_check((size_t)model.config.padded_vocab_size * sizeof(float));
    float* losses = (float*)malloc_check(4096 * sizeof(float));
    passkey_build(&pk, L, 0.5, pk.first_key, x, y, &pp);
    int A = pp.answer_len, P = L - A + 1; // the prompt's tokens
    double gen_logprob = 0;
    for (int a = 0; a < A; a++) { // greedy generation from the prompt and the tokens generated so far
        gpt2_forward(&model, x, NULL, 1, P + a, 0);
        gpt2_logits_row(&model, 0, P + a - 1, logits);
        int best = 0;
        for (int v = 1; v < V; v++) { if (logits[v] > logits[best]) { best = v; } }
        gen_logprob += log_prob_of(logits, V, best);
        if (a < A - 1) { x[P + a] = best; } else { y[L - 1] = best; }
    }
    for (int t = 0; t + 1 < L; t++) { y[t] = x[t + 1]; }
    double correct[1] = {0}, logprob[1] = {0};
    gpt2_forward(&model, x, y, 1, L, 0);
    gpt2_token_losses(&model, losses);
    passkey_score_rows(&model, 1, L, &pp, y, losses, logits, correct, logprob);
    printf("  greedy continuation: log-prob %.6f generated, %.6f scored\n", gen_logprob, logprob[0]);
    // the generation's log-softmaxes are summed in double, the scored log-probability from
    // the classifier's float losses (rounding about 2e-7 each, 2 or 3 tokens)
    check(correct[0] == 1 && fabs(logprob[0] - gen_logprob) < 1e-5, "greedy generation counts as retrieved, its log-prob",
          fabs(logprob[0] - gen_logprob), 1e-5);
    y[L - 1] = y[L - 1] == 0 ? 1 : 0;
    correct[0] = logprob[0] = 0;
    gpt2_forward(&model, x, y, 1, L, 0);
    gpt2_token_losses(&model, losses);
    passkey_score_rows(&model, 1, L, &pp, y, losses, logits, correct, logprob);
    check(correct[0] == 0, "a key whose last token differs does not", correct[0], 0);
    // the grid: n/a where the prompt does not fit (and beyond a learned model's maxT), the
    // same numbers at another batch size
    int lengths[3] = {minL - 1, minL + 9, 300};
    PasskeyCell cells[9], again[9];
    passkey_grid(&model, &pk, lengths, 3, 3, 4, 7, 4 * 256, &test_mp, cells);
    passkey_grid(&model, &pk, lengths, 3, 3, 4, 7, 1, &test_mp, again);
    int grid_ok = 1;
    double grid_diff = 0; // the log-probabilities at the two batch sizes
    for (int i = 0; i < 9; i++) {
        int expect_na = i < 3 || (i >= 6 && gpt2_max_length(&model) < lengths[2]);
        grid_ok &= (cells[i].trials == 0) == expect_na && cells[i].depth == (i % 3) * 0.5;
        grid_ok &= cells[i].trials == again[i].trials && cells[i].correct == again[i].correct;
        grid_ok &= expect_na || (cells[i].trials == 4 && cells[i].logprob < 0);
        if (!expect_na) { grid_diff = fmax(grid_diff, fabs(cells[i].logprob - again[i].logprob)); }
    }
    check(grid_ok, "grid: cells, n/a rows, the same at another batch size", !grid_ok, 0);
    // sums of float losses of about 10 (an ulp is 1e-6) from matmuls of other batch sizes:
    // up to 2e-6 apart here (OpenBLAS and plain loops, 1 and 2 threads)
    check(grid_diff < 2e-5, "grid: the same log-probabilities at another batch size", grid_diff, 2e-5);
    passkey_report(cells, 3, 3, 4, 7, "test", 256, 0, NULL);
    free(logits); free(losses); free(x); free(y);
    gpt2_free(&model);
    passkey_free(&pk);
}

// The passkey test's template in a vocabulary of its own: every GPT-2 id that
// gpt2_passkey.bin uses for its texts and its first `keys` keys renumbered from 0, so that
// a model small enough to learn retrieval in seconds can be trained on it (tests/evals.sh).
// Writes into dir: gpt2_passkey.bin renumbered (those keys only); token shards pk_train_000000.bin (n
// examples) and pk_val_000000.bin (200), each example the window of T - 1 tokens and its
// last target (T tokens, so that every row of T tokens the data loader reads is one whole
// example; random keys, depths uniform in [0, 1]); init.bin, a model of that vocabulary (2
// layers, 2 heads, 64 channels, maxT = T); and, given an eval file, the same renumbered.
static void write_passkey_remap(const char* dir, const char* path, int T, int n, int keys, const char* eval_in) {
    PasskeyTokens pk;
    passkey_load(&pk, path, 50257);
    if (keys < 1 || keys > pk.num_keys) { fatal("passkey-remap: %d keys, the file has %d", keys, pk.num_keys); }
    pk.num_keys = keys;
    int* map = (int*)malloc_check(65536 * sizeof(int));
    for (int i = 0; i < 65536; i++) { map[i] = -1; }
    // the file's values alternate between a length and its tokens
    int64_t count = pk.key_start[pk.num_keys - 1] + pk.key_len[pk.num_keys - 1];
    for (int64_t p = 0; p < count; p += 1 + pk.values[p]) {
        for (int t = 1; t <= pk.values[p]; t++) { map[pk.values[p + t]] = 0; }
    }
    int V = 0;
    for (int i = 0; i < 65536; i++) { if (map[i] == 0) { map[i] = V++; } }
    for (int64_t p = 0; p < count; p += 1 + pk.values[p]) {
        for (int t = 1; t <= pk.values[p]; t++) { pk.values[p + t] = (uint16_t)map[pk.values[p + t]]; }
    }
    char out[512];
    int header[256] = {0};
    header[0] = PASSKEY_MAGIC; header[1] = PASSKEY_VERSION; header[2] = PK_NUM_TEXTS; header[3] = pk.first_key; header[4] = pk.num_keys;
    snprintf(out, sizeof(out), "%s/gpt2_passkey.bin", dir);
    FILE* f = fopen_check(out, "wb");
    fwrite(header, sizeof(int), 256, f);
    fwrite(pk.values, sizeof(uint16_t), count, f);
    fclose(f);
    int* x = (int*)malloc_check((size_t)T * sizeof(int));
    int* y = (int*)malloc_check((size_t)T * sizeof(int));
    for (int split = 0; split < 2; split++) {
        int examples = split == 0 ? n : 200, seed = split == 0 ? 1001 : 2002;
        uint16_t* toks = (uint16_t*)malloc_check(((size_t)examples * T + 1) * sizeof(uint16_t));
        uint64_t rng = random_seed((uint64_t)seed);
        for (int i = 0; i < examples; i++) {
            PasskeyPrompt pp;
            if (!passkey_build(&pk, T - 1, random_f32(&rng), passkey_key(&pk, (uint64_t)seed, i), x, y, &pp)) {
                fatal("passkey-remap: T = %d is shorter than the prompt (%d)", T, passkey_min_length(&pk) + 1);
            }
            for (int t = 0; t < T - 1; t++) { toks[(size_t)i * T + t] = (uint16_t)x[t]; }
            toks[(size_t)i * T + T - 1] = (uint16_t)y[T - 2];
        }
        toks[(size_t)examples * T] = toks[0]; // the loader reads one token past the last row
        snprintf(out, sizeof(out), "%s/pk_%s_000000.bin", dir, split == 0 ? "train" : "val");
        write_shard(out, 20240520, 1, examples * T + 1, toks, examples * T + 1);
        free(toks);
    }
    GPT2Config cfg = {0}; // head size 32: the CUDA path's smallest
    cfg.num_layers = 2; cfg.num_heads = 2; cfg.channels = 64;
    cfg.vocab_size = V; cfg.padded_vocab_size = round_up(V, 64); cfg.max_seq_len = T; cfg.pe = PE_ID;
    gpt2_config_set_build(&cfg);
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 42);
    snprintf(out, sizeof(out), "%s/init.bin", dir);
    gpt2_save_checkpoint(&model, out);
    gpt2_free(&model);
    if (eval_in != NULL) { // an eval file: its tokens renumbered (every one must be the template's)
        EvalFile ef;
        evalfile_load(&ef, eval_in, 50257, INT32_MAX);
        int eh[256];
        int64_t nv;
        free(ef.values);
        ef.values = read_u16_file(eval_in, EVAL_MAGIC, EVAL_VERSION, "an eval file", eh, &nv);
        for (int i = 0; i < ef.num_examples; i++) {
            uint16_t* v = ef.values + ef.start[i];
            for (int64_t p = 5; p < v[1] / 2; p += 1 + v[p]) {
                for (int t = 1; t <= v[p]; t++) {
                    if (map[v[p + t]] < 0) { fatal("%s: token %d of example %d is not in the passkey template", eval_in, v[p + t], i); }
                    v[p + t] = (uint16_t)map[v[p + t]];
                }
            }
        }
        snprintf(out, sizeof(out), "%s/eval.bin", dir);
        f = fopen_check(out, "wb");
        fwrite(eh, sizeof(int), 256, f);
        fwrite(ef.values, sizeof(uint16_t), nv, f);
        fclose(f);
        evalfile_free(&ef);
    }
    printf("%s: the passkey template in a vocabulary of %d tokens, %d training examples of %d tokens\n", dir, V, n, T);
    free(x); free(y); free(map);
    passkey_free(&pk);
}

static int compare_checkpoints(const char* a_path, const char* b_path, double tol) {
    GPT2 a, b;
    gpt2_build_from_checkpoint(&a, a_path);
    gpt2_build_from_checkpoint(&b, b_path);
    if (memcmp(&a.config, &b.config, sizeof(GPT2Config)) != 0) { printf("different configurations\n"); return 1; }
    int bad = 0;
    size_t offset = 0;
    for (int k = 0; k < NUM_PARAMETER_TENSORS; k++) {
        double worst = 0;
        for (size_t i = offset; i < offset + a.param_sizes[k]; i++) { worst = fmax(worst, fabs(a.params_memory[i] - b.params_memory[i])); }
        if (a.param_sizes[k] > 0) { printf("  %-10s max |a - b| = %.3g\n", PARAM_NAMES[k], worst); }
        if (tol == 0 ? worst != 0 : worst > tol) { bad++; }
        offset += a.param_sizes[k];
    }
    printf(bad == 0 ? "checkpoints match (tolerance %g)\n" : "checkpoints DIFFER (tolerance %g)\n", tol);
    gpt2_free(&a);
    gpt2_free(&b);
    return bad == 0 ? 0 : 1;
}

#ifdef PE_REF_POS_BIAS_GRAD
// the sum over the pairs j <= i < T of every head of ds(h, i, j) b(i, j), the reference bias
static double ref_bias_dot(const PERef* r, const double* ds, int T) {
    double sum = 0;
    for (int h = 0; h < r->NH; h++) {
        for (int i = 0; i < T; i++) {
            for (int j = 0; j <= i; j++) { sum += ds[((size_t)h * T + i) * T + j] * pe_ref_pos_bias(r, h, i, j); }
        }
    }
    return sum;
}

// The reference gradient of a bias with parameters (PE_PART_REF's pe_ref_pos_bias_grad, which
// the CUDA attention check holds the kernels' parameter gradients to) against central
// differences of the reference bias itself: the derivative of F = sum_(h, i, j) ds_hij b(i, j)
// over every pair of T = 48 positions of a layer, ds random, in every element of every tensor
// of the encoding, each tensor by its relative L2 error, both layers of the tests' model
static void test_ref_bias_gradient(void) {
    const int T = 48;
    const double eps = 1e-6, tol = 1e-6;
    printf("the reference bias's parameter gradient (PE_PART_REF) against central differences of the reference bias\n");
    GPT2Config cfg = tiny_config(T);
    pe_test_config(&cfg);
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 5);
    uint64_t rng = random_seed(17);
    perturb_parameters(&model, 0.1f, &rng);
    pe_test_params(&model, &rng);
    real* t[NUM_PARAMETER_TENSORS];
    tensor_pointers(t, model.params_memory, model.param_sizes);
    int NH = cfg.num_heads;
    double* ds = (double*)malloc_check((size_t)NH * T * T * sizeof(double));
    for (size_t e = 0; e < (size_t)NH * T * T; e++) { ds[e] = random_normal(&rng); }
    for (int l = 0; l < cfg.num_layers; l++) {
        PERef r;
        pe_ref_init(&r, &cfg, model.param_sizes, (const real* const*)t, l);
        double* d[P_PE_END - P_PE_BEGIN + 1];
        for (int k = P_PE_BEGIN; k < P_PE_END; k++) { d[k - P_PE_BEGIN] = (double*)calloc_check(model.param_sizes[k] / cfg.num_layers + 1, sizeof(double)); }
        for (int h = 0; h < NH; h++) {
            for (int i = 0; i < T; i++) {
                for (int j = 0; j <= i; j++) { pe_ref_pos_bias_grad(&r, h, i, j, ds[((size_t)h * T + i) * T + j], d); }
            }
        }
        for (int k = P_PE_BEGIN; k < P_PE_END; k++) {
            double* p = (double*)r.par[k - P_PE_BEGIN];
            double num = 0, den = 0;
            for (size_t e = 0; e < model.param_sizes[k] / cfg.num_layers; e++) {
                double keep = p[e];
                p[e] = keep + eps;
                double fp = ref_bias_dot(&r, ds, T);
                p[e] = keep - eps;
                double fm = ref_bias_dot(&r, ds, T);
                p[e] = keep;
                double fd = (fp - fm) / (2 * eps);
                num += (fd - d[k - P_PE_BEGIN][e]) * (fd - d[k - P_PE_BEGIN][e]);
                den += fd * fd;
            }
            double rel = den > 0 ? sqrt(num / den) : sqrt(num);
            char what[128];
            snprintf(what, sizeof(what), "layer %d, %s: relative L2 error", l, PARAM_NAMES[k]);
            check(rel <= tol && den > 0, what, rel, tol);
            free(d[k - P_PE_BEGIN]);
        }
        pe_ref_free(&r);
    }
    free(ds);
    gpt2_free(&model);
}
#else
static void test_ref_bias_gradient(void) {}
#endif

int main(int argc, char** argv) {
    if (argc > 4 && strcmp(argv[1], "compare") == 0) {
        return compare_checkpoints(argv[2], argv[3], atof(argv[4]));
    }
    if (argc > 2 && strcmp(argv[1], "torch-reference") == 0) {
        const char* checkpoint = argc > 3 && strcmp(argv[3], "-") != 0 ? argv[3] : NULL;
        write_torch_reference(argv[2], checkpoint, argc > 4 ? argv[4] : NULL);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "variants") == 0) {
        printf("%s\n", PE_TEST_VARIANTS);
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "debug-state") == 0) {
        write_debug_state(argv[2], argc > 3 ? argv[3] : NULL, 0);
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "debug-state-tiny") == 0) {
        write_debug_state(argv[2], argc > 3 ? argv[3] : NULL, 1);
        return 0;
    }
    if (argc > 6 && strcmp(argv[1], "passkey-remap") == 0) {
        write_passkey_remap(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), argc > 7 ? argv[7] : NULL);
        return 0;
    }
    if (argc > 5 && strcmp(argv[1], "passkey-prompt") == 0) { // a window's tokens, then its last target
        PasskeyTokens pk;
        passkey_load(&pk, argv[2], 50257);
        int L = atoi(argv[3]);
        int* x = (int*)malloc_check((size_t)L * sizeof(int));
        int* y = (int*)malloc_check((size_t)L * sizeof(int));
        PasskeyPrompt pp;
        if (L < 1 || !passkey_build(&pk, L, atof(argv[4]), atoi(argv[5]), x, y, &pp)) { fatal("L = %d is shorter than the prompt", L); }
        for (int t = 0; t < L; t++) { printf("%d\n", x[t]); }
        printf("%d\n", y[L - 1]);
        return 0;
    }
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_gpt2_%s_%d", pe_name(PE_ID), (int)getpid());
    ensure_dir_writable(tmpdir);
    if (argc > 1 && (strcmp(argv[1], "evals") == 0 || strcmp(argv[1], "passkey") == 0)) {
        mp_init(&test_mp, &argc, &argv);
        if (strcmp(argv[1], "evals") == 0) { test_hellaswag_scoring(); }
        else if (argc > 2) { test_passkey(argv[2]); }
        else { fatal("usage: test_gpt2 passkey gpt2_passkey.bin"); }
        mp_finalize();
    } else if (argc > 1 && strcmp(argv[1], "gradcheck") == 0) {
        if (argc > 2 && strcmp(argv[2], "masked") == 0) {
            test_gradients(1, AT_INDICES, 1, NULL);
        } else {
            test_gradients(1, AT_INDICES, 0, NULL);
            test_ref_bias_gradient();
            if (DAPE_ID > 1) { test_gradients(0, AT_INDICES, 0, NULL); } // the last k/2 rows by the other edge rule
            if (rp_supported(PE_ID)) { test_gradients(1, AT_DRAWN, 0, NULL); test_gradients(1, AT_GIVEN, 0, NULL); }
            char variants[256], *rest = NULL;
            snprintf(variants, sizeof(variants), "%s", PE_TEST_VARIANTS);
            for (char* v = strtok_r(variants, " ", &rest); v != NULL; v = strtok_r(NULL, " ", &rest)) { test_gradients(1, AT_INDICES, 0, v); }
        }
    } else {
        test_reference_forward(AT_INDICES);
        if (rp_supported(PE_ID)) { test_reference_forward(AT_DRAWN); test_reference_forward(AT_GIVEN); }
        test_given_positions();
        test_random_positions();
        pe_tests();
        test_permutation();
        test_matmul();
        test_exp_vec();
        test_classifier();
        test_files_and_errors();
        test_masked_shards();
        test_pose();
        test_length_buckets(0);
        if (rp_supported(PE_ID)) { test_length_buckets(1); }
        test_atomic_files();
        test_long_error();
        test_overfit();
        test_long_sequence_memory();
        if (DAPE_ID != 0) {
            test_dape_reference();
            test_dape_edge();
            test_dape_identities();
            test_dape_checkpoint();
        }
    }
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (system(cmd) != 0) { printf("could not remove %s\n", tmpdir); }
    if (failures == 0) { printf("all tests passed (%s)\n", model_label(PE_ID, DAPE_ID)); }
    else { printf("%d FAILURES (%s)\n", failures, model_label(PE_ID, DAPE_ID)); }
    return failures == 0 ? 0 : 1;
}
