/*
The model's parameter layout, shared by the CPU and CUDA trainers because it is the
checkpoint format: the configuration, the model presets, the list of parameter
tensors (llm.c's 16 GPT-2 tensors in llm.c's order, then the encoding's, declared in its
file pe/<file>.h, then DAPE's), which of them take weight decay, the random
initialization, and the checkpoint header.

Checkpoint: int32 header[256] = {20240326, version (3 = fp32, 5 = bf16), maxT, V, L,
NH, C, Vp, PE id, DAPE variant, DAPE width, revision of the PE's definition (pe_revision),
randomized positions' range L (0: none) and seed (llmc/pe.h), the training length T (0 in
files written before it was recorded, and in llm.c's: then maxT is taken for it), rope's
frequency table (RopeTable, llmc/pe.h: word 15 the base, 0 for 10000; word 16 the
truncation length, 0: off; word 17 resonance, 0: off; 0 in files written before them, which
so keep the table they were trained with), shape's offset K (word 18, pe/sinusoidal.h; 0 for
every other encoding), shaw's clipping distance k and whether it has the value table a^V
(words 19 and 20, pe/shaw.h; 0 for every other encoding), floater's refresh R (word 21,
pe/floater.h; 0 for every other encoding), 0...}, then every parameter tensor in the order
below. A tensor that the PE does not use has size 0 (e.g. wpe for every PE but `learned` and
BiPE), so a
`learned` checkpoint is exactly llm.c's file, and llm.c's files (word 8 = 0) load
here as `learned`. maxT is the training length of every model but `learned`'s: FIRE's L0
and CoPE's number of positions P (llmc/pe.h) derive from it, so no further word holds them.
*/
#ifndef LLMC_MODEL_H
#define LLMC_MODEL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "pe.h"
#define PE_PART PE_PART_DEFINITION
#include "../pe/dape.h" // DAPE, the second switch: its variants, tensors and names
#undef PE_PART
#include "rand.h"
#include "utils.h"

#define CHECKPOINT_MAGIC 20240326
#define CHECKPOINT_FP32 3
#define CHECKPOINT_BF16 5
#define GPT2_VOCAB 50257
#define GPT2_PADDED_VOCAB 50304
#define GPT2_EOT 50256

typedef struct {
    int max_seq_len;       // maxT: positions of wpe (learned); the training length otherwise
    int vocab_size;        // V
    int padded_vocab_size; // Vp: V rounded up to a multiple of 128
    int num_layers;        // L
    int num_heads;         // NH
    int channels;          // C
    int pe;                // PE id (llmc/pe.h)
    int dape;              // DAPE variant = its kernel width k, 0 = none (pe/dape.h)
    int dape_width;        // DAPE's hidden width D (0 without DAPE)
    int rp_len;            // randomized positions (-rp): drawn from [0, rp_len); 0: positions 0..T-1
    int rp_seed;           // the seed of those draws (the run's -R)
    int train_len;         // the training length T (0: not recorded; maxT then stands for it)
    RopeTable rope;        // rope's frequency table: base, truncation, resonance (llmc/pe.h; zeros: plain)
    int shape_k;           // shape: the offsets' range K in training, and the offset at evaluation (pe/sinusoidal.h)
    CapeAugment cape;      // cape: the augmentation of training's positions (the run's -cg, -cs, -cl; not in the checkpoint)
    int shaw_k;            // shaw: the clipping distance k, rows 0..k of its tables (pe/shaw.h; 0 for the others)
    int shaw_values;       // shaw: 1 with the value table a^V (the paper's), 0 keys only (0 for the others)
    int floater_refresh;   // floater: its positions are solved again every this many updates (pe/floater.h)
} GPT2Config;

// shape's K of a new model: one of the official configurations' (config_shape: 10 to 500)
#define SHAPE_DEFAULT_K 100
// shaw's k of a new model: the paper's clipping distance (tensor2tensor's transformer_relative
// sets 20); the largest k a configuration may hold
#define SHAW_DEFAULT_K 16
#define SHAW_MAX_K 65536
// floater's R of a new model: the official update_flow_every (flow_transformer.py:252)
#define FLOATER_DEFAULT_REFRESH 400

// cape's augmentation of a model, new or read (the run's flags may change it): the defaults
// for cape, none for the others
static CapeAugment cape_augment_default(int pe) {
    CapeAugment none = {0, 0, 0}, cape = {CAPE_DEFAULT_GLOBAL, CAPE_DEFAULT_SCALE, CAPE_DEFAULT_LOCAL};
    return pe == PE_ID_CAPE ? cape : none;
}

// initialization helpers, on the host into fp32 (both trainers initialize the same way)
static void fill_normal(float* p, size_t n, float std, uint64_t* rng) {
    for (size_t i = 0; i < n; i++) { p[i] = std * random_normal(rng); }
}

static void fill_uniform(float* p, size_t n, float lo, float hi, uint64_t* rng) {
    for (size_t i = 0; i < n; i++) { p[i] = lo + (hi - lo) * random_f32(rng); }
}

static void fill_const(float* p, size_t n, float v) {
    for (size_t i = 0; i < n; i++) { p[i] = v; }
}

// the token embeddings: N(0, 0.02), the padded rows zero
static void fill_wte(float* p, size_t n, const GPT2Config* cfg, uint64_t* rng) {
    size_t used = (size_t)cfg->vocab_size * cfg->channels;
    fill_normal(p, used, 0.02f, rng);
    fill_const(p + used, n - used, 0.0f);
}

// DAPE's as PyTorch's default Conv2d init, U(+-1/sqrt(fan_in)): the bound, fan_in = Cin k for the
// first convolution, D k for the second
static float dape_init_bound(const GPT2Config* cfg, int second) {
    return 1.0f / sqrtf(second ? (float)cfg->dape_width * cfg->dape : (float)dape_in_channels(cfg->pe, cfg->num_heads) * cfg->dape);
}

// U(lo, hi), then each value clamped into [min, max]
static void fill_uniform_clamped(float* p, size_t n, float lo, float hi, float min, float max, uint64_t* rng) {
    fill_uniform(p, n, lo, hi, rng);
    for (size_t i = 0; i < n; i++) { p[i] = fminf(fmaxf(p[i], min), max); }
}

// ----------------------------------------------------------------------------
// the encoding's definition (pe/<file>.h, its PE_PART_DEFINITION): its constants, the formulas
// both trainers share, its parameter tensors (PE_TENSORS) and their initialization

#define PE_PART PE_PART_DEFINITION
#include "pe_part.h"
#undef PE_PART
// what an encoding without parameters or constraints leaves out
#ifndef PE_TENSORS
#define PE_TENSORS(X)
#endif
#ifndef PE_CONFIG_CHECK
static void pe_config_check(const GPT2Config* c, const char* what) {}
#endif
#ifndef PE_TOKEN_ACTS
#define PE_TOKEN_ACTS 0
#endif
#ifndef PE_STREAMS // residual streams: GPT-2's one (complex: a second, imaginary one)
#define PE_STREAMS 1
#endif
#ifndef PE_MAX_LENGTH // no limit on the sequence's length
static int pe_max_length(const GPT2Config* c) { return INT32_MAX; }
#define PE_LIMIT_REASON ""
#endif
#ifndef PE_EVAL_VARIANTS // the evaluation variants an encoding has (llmc/pe.h): plain only
static int pe_has_eval_variant(int v) { return v == PE_EVAL_PLAIN; }
#endif
#ifndef PE_LIMIT_NOTE // the n/a of an evaluation beyond the limit
#define PE_LIMIT_NOTE "beyond the encoding's range"
#endif
// an encoding whose rows depend on where the pass ends (DAPE_1xk's edge: a window's last k/2
// rows): a next-token prediction is then the last row of a pass over its prefix, as decoding
// computes it (llmc/task_eval.h). SHAPE's offsets and CAPE's augmentation depend on a row's
// place in a pass in training only; an evaluation's positions are each row's own, so their
// rows do not. BiPE's own positions (segments) of a token depend on the tokens up to it only,
// so a prefix's rows are the whole row's (test_gpt2.c: test_task_decoding, for every build)
#define PE_PREFIX_DEPENDENT DAPE_WINDOW_EDGE
// an encoding whose rows, cut short or grouped otherwise, compute otherwise (DAPE_1xk's edge;
// SHAPE's offsets, drawn per row of a pass): the driver's length buckets keep its rows whole
#ifndef PE_WHOLE_ROWS
#define PE_WHOLE_ROWS PE_PREFIX_DEPENDENT
#define PE_WHOLE_ROWS_WHY "DAPE_1xk: the rows of a window's last k/2 positions depend on where it ends"
#endif
#ifndef PE_OWN_POSITIONS // an encoding's own positions after those given, drawn or the indices, of the pass's tokens (B, T; NULL: none): none
static int pe_positions_own(const GPT2Config* cfg, int* pos, const int* tokens, int draws, int B, int T, int span, int training, uint64_t key) { return span; }
#define PE_OWN_POSITIONS_USED 0
#else
#define PE_OWN_POSITIONS_USED 1
#endif
// an encoding whose positions in a training pass are not an evaluation's (SHAPE's offsets,
// CAPE's augmentation): the tests compare a training pass with training passes
#ifndef PE_TRAINING_POSITIONS
#define PE_TRAINING_POSITIONS PE_OWN_POSITIONS_USED
#endif
#ifdef PE_POSITION_TABLE // maxT is the length of a table of positions (learned's)
#define PE_HAS_POSITION_TABLE 1
#else // maxT is the training length: nothing to size for the positions a new model is given
#define PE_HAS_POSITION_TABLE 0
static void pe_config_positions(GPT2Config* c, int positions) {}
#endif

// ----------------------------------------------------------------------------
// positions as data: every encoding that takes positions (the registry's rp column) reads
// token t of row b at position pos[b T + t] instead of t (the embeddings' rows, the rotations'
// angles, a bias's pos_i - pos_j), on both paths. One producer fills them for a forward pass:
// positions given by the caller (the data path: PoSE's chunks; an evaluation's offset), or a
// draw of randomized positions (-rp), or none (the indices).

// The positions of a forward pass over B x T tokens into pos, (draws, B, T): row b of draw d at
// pos + (d B + b) T. Given positions (given: (B, T), each row's own, >= 0 and never decreasing
// along the row, so that a key's never passes its query's) serve every draw; else
// a model with randomized positions (rp_len > 0) draws each draw's T positions from
// [0, rp_len) (rp_draw: n = rp_draw_count(draw_len, T) of them, the first T kept; the rows
// share them); else 0..T-1. Returns their range: the largest given position + 1, rp_len, or T.
static int pe_positions_make(int* pos, const int* given, int draws, int B, int T, int rp_len, int draw_len, uint64_t seed,
                             uint64_t key) {
    size_t BT = (size_t)B * T;
    int span = T;
    if (given != NULL && !rp_supported(PE_ID)) {
        fatal("positions given to PE '%s', which takes none (the encodings that take positions: %s)", pe_name(PE_ID),
              pe_names_rp());
    }
    if (given != NULL) {
        span = 0;
        for (size_t i = 0; i < BT; i++) {
            if (given[i] < 0 || (i % T > 0 && given[i] < given[i - 1])) {
                fatal("position %d of token %zu of the batch: positions are >= 0 and never decrease along a row", given[i], i);
            }
            if (given[i] >= span) { span = given[i] + 1; }
        }
    } else if (rp_len > 0) {
        span = rp_len;
    }
    for (int d = 0; d < draws; d++) {
        int* p = pos + (size_t)d * BT;
        if (given != NULL) { memcpy(p, given, BT * sizeof(int)); continue; }
        if (rp_len > 0) { rp_draw(p, T, rp_draw_count(draw_len, T), rp_len, seed, key, d); }
        else { for (int t = 0; t < T; t++) { p[t] = t; } }
        for (int b = 1; b < B; b++) { memcpy(p + (size_t)b * T, p, (size_t)T * sizeof(int)); }
    }
    return span;
}

// ----------------------------------------------------------------------------
// parameter tensors

// the encodings with a table of positions wpe [maxT, C]: learned's absolute positions, BiPE's
// positions within a segment (pe/bipe.h)
static int pe_has_wpe(int pe) { return pe == PE_ID_LEARNED || pe == PE_ID_BIPE_ROPE || pe == PE_ID_BIPE_ALIBI; }

// X(NAME, field, decay, size, init): the enum P_<NAME>, the field of the trainers' parameter
// structs, whether weight decay applies, the number of elements (an expression of
// fill_in_parameter_sizes' Vp, C, maxT, L, NH, and DAPE's k, D, Cin), and the statement
// that initializes its n elements at p from the random state rng (gpt2_init_params: cfg, and
// residual_std = 0.02 / sqrt(2 L)). Weight decay applies to the matrices (2-D per layer) and to
// nothing else. Every layer's values are consecutive. A tensor of size 0 is absent from the
// checkpoint (wpe for every encoding but learned and BiPE, pe_has_wpe).
#define GPT2_TENSORS(X) \
    X(WTE,      wte,      1, Vp * C,        fill_wte(p, n, cfg, rng)) /* also the classifier (tied) */ \
    X(WPE,      wpe,      1, pe_has_wpe(cfg->pe) ? maxT * C : 0, fill_normal(p, n, 0.02f, rng)) \
    X(LN1W,     ln1w,     0, L * C,         fill_const(p, n, 1.0f)) \
    X(LN1B,     ln1b,     0, L * C,         fill_const(p, n, 0.0f)) \
    GPT2_BLOCK_TENSORS(X, , ) \
    X(LNFW,     lnfw,     0, C,             fill_const(p, n, 1.0f)) \
    X(LNFB,     lnfb,     0, C,             fill_const(p, n, 0.0f))
// a block's tensors after its ln1, as X(...) lines whose names start with NAME and name
// (GPT-2's: empty; a second residual stream's, PE_STREAMS: its encoding's prefix)
#define GPT2_BLOCK_TENSORS(X, NAME, name) \
    X(NAME##QKVW,     name##qkvw,     1, L * 3 * C * C, fill_normal(p, n, 0.02f, rng)) \
    X(NAME##QKVB,     name##qkvb,     0, L * 3 * C,     fill_const(p, n, 0.0f)) \
    X(NAME##ATTPROJW, name##attprojw, 1, L * C * C,     fill_normal(p, n, residual_std, rng)) \
    X(NAME##ATTPROJB, name##attprojb, 0, L * C,         fill_const(p, n, 0.0f)) \
    X(NAME##LN2W,     name##ln2w,     0, L * C,         fill_const(p, n, 1.0f)) \
    X(NAME##LN2B,     name##ln2b,     0, L * C,         fill_const(p, n, 0.0f)) \
    X(NAME##FCW,      name##fcw,      1, L * 4 * C * C, fill_normal(p, n, 0.02f, rng)) \
    X(NAME##FCB,      name##fcb,      0, L * 4 * C,     fill_const(p, n, 0.0f)) \
    X(NAME##FCPROJW,  name##fcprojw,  1, L * C * 4 * C, fill_normal(p, n, residual_std, rng)) \
    X(NAME##FCPROJB,  name##fcprojb,  0, L * C,         fill_const(p, n, 0.0f))
#define PARAMETER_TENSORS(X) GPT2_TENSORS(X) PE_TENSORS(X) DAPE_TENSORS(X)

#define P_ENUM_(NAME, field, decay, size, init) P_##NAME,
enum { PARAMETER_TENSORS(P_ENUM_) NUM_PARAMETER_TENSORS };
// the encoding's tensors are P_PE_BEGIN .. P_PE_END - 1
#define P_COUNT_(NAME, field, decay, size, init) + 1
enum { P_PE_BEGIN = 0 GPT2_TENSORS(P_COUNT_), P_PE_END = P_PE_BEGIN PE_TENSORS(P_COUNT_) };
#define P_NAME_(NAME, field, decay, size, init) #field,
static const char* const PARAM_NAMES[NUM_PARAMETER_TENSORS] = { PARAMETER_TENSORS(P_NAME_) };
#define P_DECAY_(NAME, field, decay, size, init) decay,
static const int PARAM_DECAY[NUM_PARAMETER_TENSORS] = { PARAMETER_TENSORS(P_DECAY_) };

static void fill_in_parameter_sizes(size_t* sizes, const GPT2Config* cfg) {
    size_t Vp = cfg->padded_vocab_size, C = cfg->channels, maxT = cfg->max_seq_len;
    size_t L = cfg->num_layers, NH = cfg->num_heads;
    size_t k = cfg->dape, D = cfg->dape_width, Cin = dape_in_channels(cfg->pe, (int)NH);
#define P_SIZE_(NAME, field, decay, size, init) sizes[P_##NAME] = (size);
    PARAMETER_TENSORS(P_SIZE_)
}

// The encoding's parameters at one layer, in double, as the tests' references of a bias of
// positions read them (an encoding's PE_PART_REF: pe_ref_pos_bias, pe_ref_pos_bias_grad; both
// trainers' tests fill one from their model): the configuration, and par[k] the values of
// tensor P_PE_BEGIN + k at that layer (PE_AT(par, NAME) names tensor P_<NAME>'s)
#define PE_AT(par, NAME) ((par)[P_##NAME - P_PE_BEGIN])
typedef struct {
    GPT2Config cfg;
    int NH, hs;
    const double* par[P_PE_END - P_PE_BEGIN + 1];
} PERef;

// r for layer l of a model whose tensor k holds sizes[k] values of `real` at tensors[k] (on
// the host): the layer's share of each of the encoding's tensors (its size / L) converted to
// double, in memory of r's own (pe_ref_free)
static void pe_ref_init(PERef* r, const GPT2Config* cfg, const size_t* sizes, const real* const* tensors, int l) {
    r->cfg = *cfg;
    r->NH = cfg->num_heads;
    r->hs = cfg->channels / cfg->num_heads;
    for (int k = P_PE_BEGIN; k < P_PE_END; k++) {
        size_t n = sizes[k] / cfg->num_layers;
        double* p = (double*)malloc_check(n * sizeof(double) + 1);
        for (size_t e = 0; e < n; e++) { p[e] = tensors[k][(size_t)l * n + e]; }
        r->par[k - P_PE_BEGIN] = p;
    }
}
static void pe_ref_free(PERef* r) {
    for (int k = P_PE_BEGIN; k < P_PE_END; k++) { free((void*)r->par[k - P_PE_BEGIN]); }
}

static size_t count_parameters(const GPT2Config* cfg) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    fill_in_parameter_sizes(sizes, cfg);
    size_t n = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { n += sizes[i]; }
    return n;
}

// ----------------------------------------------------------------------------
// configurations: presets and checks

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

// checks a configuration read from a file or the command line; `what` names its source
static void gpt2_config_check(const GPT2Config* c, const char* what) {
    if (c->num_layers < 1 || c->num_layers > 1024) { fatal("%s: bad number of layers %d", what, c->num_layers); }
    if (c->num_heads < 1 || c->num_heads > 1024) { fatal("%s: bad number of heads %d", what, c->num_heads); }
    if (c->channels < 1 || c->channels > 65536 || c->channels % c->num_heads != 0) {
        fatal("%s: bad channels %d (must be a multiple of the %d heads)", what, c->channels, c->num_heads);
    }
    if (c->vocab_size < 2 || c->vocab_size > 65536 || c->padded_vocab_size < c->vocab_size
        || c->padded_vocab_size > (1 << 20)) {
        fatal("%s: bad vocabulary sizes V=%d Vp=%d", what, c->vocab_size, c->padded_vocab_size);
    }
    if (c->max_seq_len < 1 || c->max_seq_len > (1 << 24)) { fatal("%s: bad max sequence length %d", what, c->max_seq_len); }
    if (c->pe < 0 || c->pe >= PE_NUM_IDS) { fatal("%s: unknown positional encoding id %d", what, c->pe); }
    if (!dape_variant_known(c->dape)) { fatal("%s: unknown DAPE variant %d (0, 1, 3, 5 or 7)", what, c->dape); }
    if (c->dape == 0 && c->dape_width != 0) { fatal("%s: DAPE width %d without DAPE", what, c->dape_width); }
    if (c->dape != 0 && (c->dape_width < 1 || c->dape_width > DAPE_MAX_WIDTH)) {
        fatal("%s: bad DAPE width %d (1..%d)", what, c->dape_width, DAPE_MAX_WIDTH);
    }
    if (c->dape != 0 && !dape_base_supported(c->pe)) {
        fatal("%s: DAPE on PE '%s' (DAPE runs on %s)", what, pe_name(c->pe), pe_names_dape());
    }
    if (c->rp_len < 0 || c->rp_len > (1 << 24)) { fatal("%s: bad range of randomized positions %d", what, c->rp_len); }
    if (c->train_len < 0 || c->train_len > (1 << 24) || (c->pe == PE_ID_LEARNED && c->train_len > c->max_seq_len)) {
        fatal("%s: bad training length %d (learned: at most maxT = %d)", what, c->train_len, c->max_seq_len);
    }
    const RopeTable* r = &c->rope;
    if (r->base < 0 || r->base == 1 || r->truncate < 0 || r->truncate > (1 << 24) || r->resonance < 0 || r->resonance > 1) {
        fatal("%s: bad RoPE frequency table: base %d (0 for 10000, or >= 2), truncation length %d (0: off, up to %d), "
              "resonance %d (0 or 1)", what, r->base, r->truncate, 1 << 24, r->resonance);
    }
    if ((r->base != 0 || r->truncate != 0 || r->resonance != 0) && !rope_table_supported(c->pe)) {
        fatal("%s: RoPE frequency table options (base %d, truncation %d, resonance %d) on PE '%s' (they exist for rope)",
              what, r->base, r->truncate, r->resonance, pe_name(c->pe));
    }
    if (c->shape_k < 0 || c->shape_k > (1 << 24) || (c->shape_k != 0 && c->pe != PE_ID_SHAPE)) {
        fatal("%s: bad offset K %d of shape (word 18: 0..%d, and 0 but for shape)", what, c->shape_k, 1 << 24);
    }
    const CapeAugment* a = &c->cape;
    int cape = c->pe == PE_ID_CAPE;
    if (!(a->global >= 0 && a->global <= (1 << 24)) || !(a->scale >= (cape ? 1 : 0) && a->scale <= 1000) || a->local < 0 || a->local > 1 ||
        (!cape && (a->global != 0 || a->scale != 0 || a->local != 0))) {
        fatal("%s: bad augmentation of cape: global shift %g (0..%d), scale %g (1..1000), local shift %d (0 or 1); "
              "none but for cape", what, a->global, 1 << 24, a->scale, a->local);
    }
    int shaw = c->pe == PE_ID_SHAW;
    if (shaw ? c->shaw_k < 1 || c->shaw_k > SHAW_MAX_K || c->shaw_values < 0 || c->shaw_values > 1 : c->shaw_k != 0 || c->shaw_values != 0) {
        fatal("%s: bad tables of shaw: clipping distance k %d (word 19: 1..%d), value table %d (word 20: 1 with a^V, 0 keys "
              "only); both 0 but for shaw", what, c->shaw_k, SHAW_MAX_K, c->shaw_values);
    }
    if (c->floater_refresh < 0 || c->floater_refresh > (1 << 24) || (c->floater_refresh == 0) != (c->pe != PE_ID_FLOATER)) {
        fatal("%s: bad refresh R %d of floater (word 21: 1..%d for floater, 0 for the others)", what, c->floater_refresh, 1 << 24);
    }
    if (c->rp_len > 0 && !rp_supported(c->pe)) {
        fatal("%s: randomized positions on PE '%s' (they exist for %s)", what, model_label(c->pe, c->dape), pe_names_rp());
    }
    if (c->pe == PE_ID) { pe_config_check(c, what); } // the encoding's own constraints (pe/<file>.h)
}

// what this binary's build decides of a new configuration of its encoding (c->pe): DAPE's
// variant and default width (pe/dape.h), cape's augmentation (the run may change it), shaw's
// tables (k and a^V: the run's -ak, -av may choose others for a new model), floater's refresh
// (the default; the run may change it)
static void gpt2_config_set_build(GPT2Config* c) {
    c->dape = DAPE_ID;
    c->dape_width = DAPE_ID != 0 ? DAPE_WIDTH : 0;
    c->cape = cape_augment_default(c->pe);
    c->shaw_k = c->pe == PE_ID_SHAW ? SHAW_DEFAULT_K : 0;
    c->shaw_values = c->pe == PE_ID_SHAW;
    c->floater_refresh = c->pe == PE_ID_FLOATER ? FLOATER_DEFAULT_REFRESH : 0;
}

// Model presets by name: the papers' GPT-Tiny / Small / Medium, llm.c's dN
// (d6, d12, d24, d36, d48), a CPU preset small enough to train in minutes on two
// cores, `nano` for tests and smoke runs, and `task` for the algorithmic tasks (llmc/tasks.h:
// a new model on their data takes their vocabulary; heads of 32, a size the CUDA kernels
// take). maxT is the training length T.
// Returns 0 if the name is no preset.
static int gpt2_config_from_preset(GPT2Config* c, const char* name, int T, int pe) {
    int L = 0, NH = 0, C = 0;
    if (strcmp(name, "nano") == 0) { L = 2; NH = 4; C = 128; }
    else if (strcmp(name, "task") == 0) { L = 2; NH = 2; C = 64; }
    else if (strcmp(name, "task5") == 0) { L = 5; NH = 2; C = 64; } // the task studies' depth, heads of the kernels' 32
    else if (strcmp(name, "cpu") == 0) { L = 4; NH = 8; C = 256; }
    else if (strcmp(name, "tiny") == 0) { L = 6; NH = 8; C = 512; }
    else if (strcmp(name, "small") == 0) { L = 12; NH = 12; C = 768; }
    else if (strcmp(name, "medium") == 0) { L = 24; NH = 16; C = 1024; }
    else {
        const char* d = name;
        if (strncmp(d, "gpt2:", 5) == 0) { d += 5; }
        if (d[0] != 'd' || d[1] == '\0') { return 0; }
        char* end = NULL;
        long depth = strtol(d + 1, &end, 10);
        if (*end != '\0') { return 0; }
        if (depth == 6) { C = 384; NH = 6; }
        else if (depth == 12) { C = 768; NH = 12; }
        else if (depth == 24) { C = 1024; NH = 16; }
        else if (depth == 36) { C = 1280; NH = 20; }
        else if (depth == 48) { C = 1600; NH = 25; }
        else { fatal("unsupported GPT-2 depth in preset '%s' (use d6, d12, d24, d36 or d48)", name); }
        L = (int)depth;
    }
    c->num_layers = L;
    c->num_heads = NH;
    c->channels = C;
    c->max_seq_len = T;
    c->vocab_size = GPT2_VOCAB;
    c->padded_vocab_size = GPT2_PADDED_VOCAB;
    c->pe = pe;
    gpt2_config_set_build(c);
    c->rp_len = 0;
    c->rp_seed = 0;
    c->train_len = T;
    c->rope = (RopeTable){0, 0, 0};
    c->shape_k = pe == PE_ID_SHAPE ? SHAPE_DEFAULT_K : 0;
    return 1;
}

// ----------------------------------------------------------------------------
// random initialization, on the host into fp32, identical for both trainers:
// GPT-2's N(0, 0.02) weights with residual projections scaled by 1/sqrt(2L), zero
// biases, unit layernorm weights; the encoding's tensors as its paper or code starts them,
// DAPE's as PyTorch's default Conv2d / Linear init: the tensors' lists above say how.

static void gpt2_init_params(float* params, const GPT2Config* cfg, uint64_t seed) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    fill_in_parameter_sizes(sizes, cfg);
    uint64_t state = random_seed(seed);
    uint64_t* rng = &state;
    float residual_std = 0.02f / sqrtf(2.0f * cfg->num_layers);
    float* p = params;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        size_t n = sizes[i];
#define P_INIT_(NAME, field, decay, size, init) case P_##NAME: init; break;
        switch (i) { PARAMETER_TENSORS(P_INIT_) }
        p += n;
    }
}

// ----------------------------------------------------------------------------
// checkpoint header

static void checkpoint_header_fill(int* header, const GPT2Config* cfg, int version) {
    memset(header, 0, 256 * sizeof(int));
    header[0] = CHECKPOINT_MAGIC;
    header[1] = version;
    header[2] = cfg->max_seq_len;
    header[3] = cfg->vocab_size;
    header[4] = cfg->num_layers;
    header[5] = cfg->num_heads;
    header[6] = cfg->channels;
    header[7] = cfg->padded_vocab_size;
    header[8] = cfg->pe;
    header[11] = pe_revision(cfg->pe);
    header[9] = cfg->dape;
    header[10] = cfg->dape_width;
    header[12] = cfg->rp_len;
    header[13] = cfg->rp_seed;
    header[14] = cfg->train_len;
    header[15] = cfg->rope.base == ROPE_BASE ? 0 : cfg->rope.base; // one word for the default base
    header[16] = cfg->rope.truncate;
    header[17] = cfg->rope.resonance;
    header[18] = cfg->shape_k;
    header[19] = cfg->shaw_k;
    header[20] = cfg->shaw_values;
    header[21] = cfg->floater_refresh;
}

// Opens a checkpoint and validates its header and size against the PE this binary
// was built with. Returns the open file positioned at the first parameter.
static FILE* checkpoint_open(const char* path, GPT2Config* cfg, int* version) {
    FILE* f = fopen_read_regular(path);
    int64_t size = file_size_check(f, path);
    int header[256];
    if (size < (int64_t)sizeof(header)) { fatal("%s is not a checkpoint: %lld bytes, shorter than the header", path, (long long)size); }
    fread_check(header, sizeof(int), 256, f, path);
    if (header[0] != CHECKPOINT_MAGIC) { fatal("%s is not a checkpoint: bad magic %d (expected %d)", path, header[0], CHECKPOINT_MAGIC); }
    if (header[1] != CHECKPOINT_FP32 && header[1] != CHECKPOINT_BF16) {
        fatal("%s: unsupported checkpoint version %d (expected 3 = fp32 or 5 = bf16)", path, header[1]);
    }
    *version = header[1];
    cfg->max_seq_len = header[2];
    cfg->vocab_size = header[3];
    cfg->num_layers = header[4];
    cfg->num_heads = header[5];
    cfg->channels = header[6];
    cfg->padded_vocab_size = header[7];
    cfg->pe = header[8];
    cfg->dape = header[9];
    cfg->dape_width = header[10];
    cfg->rp_len = header[12];
    cfg->rp_seed = header[13];
    cfg->train_len = header[14];
    cfg->rope.base = header[15];
    cfg->rope.truncate = header[16];
    cfg->rope.resonance = header[17];
    cfg->shape_k = header[18];
    cfg->shaw_k = header[19];
    cfg->shaw_values = header[20];
    cfg->cape = cape_augment_default(cfg->pe);
    cfg->floater_refresh = header[21];
    gpt2_config_check(cfg, path);
    if (cfg->pe != PE_ID || cfg->dape != DAPE_ID) {
        fatal("%s was trained with PE '%s' but this binary was built with PE '%s' (rebuild with PE=%s%s%s)",
              path, model_label(cfg->pe, cfg->dape), model_label(PE_ID, DAPE_ID), pe_name(cfg->pe),
              cfg->dape != 0 ? " DAPE=" : "", dape_make_name(cfg->dape));
    }
    if (header[11] != pe_revision(cfg->pe)) {
        fatal("%s holds revision %d of PE '%s', this binary implements revision %d (README: the encodings); "
              "a model trained under another definition cannot be loaded, retrain it",
              path, header[11], pe_name(cfg->pe), pe_revision(cfg->pe));
    }
    int64_t expected = (int64_t)sizeof(header) + (int64_t)count_parameters(cfg) * (*version == CHECKPOINT_FP32 ? 4 : 2);
    if (size < expected) { fatal("%s is truncated: %lld bytes, expected %lld", path, (long long)size, (long long)expected); }
    if (size > expected) { fatal("%s has %lld bytes, more than the %lld its header describes", path, (long long)size, (long long)expected); }
    return f;
}

// bf16 <-> fp32 conversions for checkpoint version 5 (round to nearest even)
static inline float bf16_to_float(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// number of non-finite parameters in a checkpoint file, read back after it was written:
// a checkpoint is only marked complete when this is 0
static size_t checkpoint_count_nonfinite(const char* path) {
    GPT2Config cfg;
    int version;
    FILE* f = checkpoint_open(path, &cfg, &version);
    size_t n = count_parameters(&cfg), bad = 0, chunk = 1 << 20;
    size_t width = version == CHECKPOINT_FP32 ? 4 : 2;
    unsigned char* buf = (unsigned char*)malloc_check(chunk * width);
    for (size_t i = 0; i < n; i += chunk) {
        size_t k = n - i < chunk ? n - i : chunk;
        fread_check(buf, width, k, f, path);
        for (size_t j = 0; j < k; j++) {
            float x;
            if (width == 4) { memcpy(&x, buf + 4 * j, 4); }
            else { uint16_t b; memcpy(&b, buf + 2 * j, 2); x = bf16_to_float(b); }
            bad += !isfinite(x);
        }
    }
    free(buf);
    fclose(f);
    return bad;
}

// ----------------------------------------------------------------------------
// training state (resume): int32 header[256], then the AdamW moments m and v (fp32)
// of this rank's parameters, then `tail` bytes of the driver's own (the training-health
// windows), then the encoding's own state (pe_resume_bytes of them: FLOATER's positions in
// use, pe/floater.h). llm.c's state file idea, with our own fields. Header words: 0 magic, 1
// version, 2 processes, 3 rank, 4 PE id, 10 step, 11 consecutive skipped updates, 12 updates, 13
// the OpenMP threads of the rank that wrote it (0: not recorded, as in files written before it
// was), 14 how many of words 40-55 hold flags (0: the 11 of files written before it was), 20-21
// sampling RNG, 30-35 data position and length of m and v, 40-55 the run's flags that resume
// depends on (llmc/driver.h: RESUME_FLAGS), 56-61 the identity of the training data, 62 the
// encoding's bytes at the end (0 in files written before them, which had none), 64-127 the -e
// it started from, 128-255 its -i pattern (NUL-terminated strings).

#define STATE_MAGIC 20240527
#define STATE_VERSION 102
#define STATE_NUM_FLAGS 16
#define STATE_MODEL_BYTES 256
#define STATE_PATTERN_BYTES 512

typedef struct {
    int step;             // optimizer steps done
    int world;            // processes when saved
    int rank;
    int pe;
    uint64_t rng;         // sampling RNG
    uint64_t shard_idx;   // training data position
    uint64_t shard_pos;
    uint64_t num_params;  // length of m and v in this file
    int updates;          // AdamW updates applied (skipped steps do not count)
    int bad_steps;        // consecutive skipped updates (training health)
    int threads;          // OpenMP threads of the process that wrote it (0: not recorded)
    int flags[STATE_NUM_FLAGS];     // the run's flags, as raw int32 words (the driver says which)
    int num_flags;                  // how many of them are recorded (0: as many as files had before it was)
    int data_shards;                // the training data: number of shards,
    int64_t data_tokens;            // tokens in all,
    uint64_t data_hash;             // hash of the shards' names and token counts
    int pe_bytes;                   // the encoding's own state at the end of the file (pe_resume_bytes)
    char model[STATE_MODEL_BYTES];  // -e: the checkpoint or preset the run started from
    char train_pattern[STATE_PATTERN_BYTES]; // -i
} TrainState;

static void state_header_fill(int* h, const TrainState* s) {
    memset(h, 0, 256 * sizeof(int));
    h[0] = STATE_MAGIC;
    h[1] = STATE_VERSION;
    h[2] = s->world;
    h[3] = s->rank;
    h[4] = s->pe;
    h[10] = s->step;
    h[11] = s->bad_steps;
    h[12] = s->updates;
    h[13] = s->threads;
    h[14] = s->num_flags;
    memcpy(&h[20], &s->rng, 8);
    memcpy(&h[30], &s->shard_idx, 8);
    memcpy(&h[32], &s->shard_pos, 8);
    memcpy(&h[34], &s->num_params, 8);
    memcpy(&h[40], s->flags, sizeof(s->flags));
    h[56] = s->data_shards;
    memcpy(&h[58], &s->data_tokens, 8);
    memcpy(&h[60], &s->data_hash, 8);
    h[62] = s->pe_bytes;
    memcpy(&h[64], s->model, STATE_MODEL_BYTES);
    memcpy(&h[128], s->train_pattern, STATE_PATTERN_BYTES);
}

// opens a state file and validates it; returns the file positioned at m
static FILE* state_open(const char* path, TrainState* s, int64_t tail) {
    FILE* f = fopen_read_regular(path);
    int64_t size = file_size_check(f, path);
    int h[256];
    if (size < (int64_t)sizeof(h)) { fatal("%s is not a training state file (too short)", path); }
    fread_check(h, sizeof(int), 256, f, path);
    if (h[0] != STATE_MAGIC) { fatal("%s is not a training state file: bad magic %d", path, h[0]); }
    if (h[1] > 0 && h[1] < STATE_VERSION) {
        fatal("%s: state version %d is from an older trainer, which did not record the flags that resume checks; "
              "continue that run with the trainer that wrote it", path, h[1]);
    }
    if (h[1] != STATE_VERSION) { fatal("%s: unsupported state version %d (expected %d)", path, h[1], STATE_VERSION); }
    s->world = h[2];
    s->rank = h[3];
    s->pe = h[4];
    s->step = h[10];
    s->bad_steps = h[11];
    s->updates = h[12];
    s->threads = h[13];
    s->num_flags = h[14];
    memcpy(&s->rng, &h[20], 8);
    memcpy(&s->shard_idx, &h[30], 8);
    memcpy(&s->shard_pos, &h[32], 8);
    memcpy(&s->num_params, &h[34], 8);
    memcpy(s->flags, &h[40], sizeof(s->flags));
    s->data_shards = h[56];
    memcpy(&s->data_tokens, &h[58], 8);
    memcpy(&s->data_hash, &h[60], 8);
    s->pe_bytes = h[62];
    memcpy(s->model, &h[64], STATE_MODEL_BYTES);
    memcpy(s->train_pattern, &h[128], STATE_PATTERN_BYTES);
    if (s->world < 1 || s->rank < 0 || s->rank >= s->world || s->step < 0 || s->updates < 0 || s->bad_steps < 0 || s->threads < 0
        || s->num_flags < 0 || s->num_flags > STATE_NUM_FLAGS || s->pe_bytes < 0
        || s->model[STATE_MODEL_BYTES - 1] != '\0' || s->train_pattern[STATE_PATTERN_BYTES - 1] != '\0') {
        fatal("%s: corrupt header", path);
    }
    int64_t expected = (int64_t)sizeof(h) + tail + s->pe_bytes;
    if (s->num_params > (uint64_t)(size / 8) || size != expected + 8 * (int64_t)s->num_params) {
        fatal("%s: %lld bytes, not what its header describes (truncated or corrupt)", path, (long long)size);
    }
    return f;
}

#endif // LLMC_MODEL_H
