/*
The positional encoding (PE) is chosen at compile time with -DPE_<NAME> (`make train_gpt2
PE=<name>`), a name of the registry (llmc/pe_list.h). This header turns the switch into the
encoding's id, name and kind, includes the encoding's file (pe/<file>.h) and holds what
every encoding shares: the evaluation variants, RoPE's scaled frequencies, and randomized
positions.

An encoding's file has five parts, each included where it is needed (PE_PART):
  PE_PART_DEFINITION  its definition as a comment, its constants, the formulas both paths
                      share (host and device functions), its parameter tensors and their
                      initialization: included here, so llmc/model.h and both trainers see it
  PE_PART_CPU         the CPU path's hooks (train_gpt2.c), the readable reference
  PE_PART_CUDA        the CUDA path's hooks and kernels (train_gpt2.cu)
  PE_PART_TEST        an independent reference in double precision, for the tests
  PE_PART_REF         a bias of positions alone (and its parameters), written again in
                      double, for both trainers' tests (test_gpt2.c and the CUDA attention
                      check, llmc/attention_check.cuh)
docs/adding-an-encoding.md says what each hook does and which may be left out.

The id is stored in word 8 of the checkpoint header; 0 = learned, so llm.c's checkpoints
(which have 0 there) load as `learned`. Word 11 holds the revision of the encoding's
definition, so that a checkpoint trained under an older definition of the same encoding is
refused instead of silently evaluated with the new one.

Evaluation variants (runtime flags of the driver, never used in training): the RoPE
scaling methods of a `rope` model (PI, NTK-aware, YaRN, each static or dynamic),
xPos's blockwise causal attention, and plain positions for a model trained with
randomized positions; pe_eval below says which one is on, and rope_frequencies
(pe/rope.h) computes the scaled frequency table both trainers rotate with.

RoPE's frequency table (RopeTable below, a `rope` model's run-time options, kept in its
checkpoint): the base (ABF), Giraffe's truncated basis and Resonance RoPE's integer
wavelengths, used in training and at evaluation, with or without a scaling variant.

Randomized positions (-rp L, Ruoss et al. 2023; the section at the end): the positions
of a forward pass are T values drawn without replacement from [0, L) and sorted, instead
of 0..T-1; rp_draw makes them, bit for bit the same in both trainers.
*/
#ifndef LLMC_PE_H
#define LLMC_PE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "rand.h"
#include "pe_list.h"

// ----------------------------------------------------------------------------
// the registry, as ids, names and the compile-time selection

// the kinds of llmc/pe_list.h, numbered for the preprocessor
#define PE_KIND_NONE 0
#define PE_KIND_EMBED 1
#define PE_KIND_QK 2
#define PE_KIND_BIAS 3
#define PE_KIND_ATTN 4

// ids as enum constants: PE_ID_LEARNED = 0, ...; PE_NUM_IDS one past the last
#define PE_ENUM_(id, NAME, ...) PE_ID_##NAME = id,
enum { PE_REGISTRY(PE_ENUM_) PE_NUM_IDS };
// the ids must be 0, 1, 2, ... in the order of the lines (a table below is indexed by them)
#define PE_ORDER_(id, NAME, ...) PE_ORDER_##NAME,
enum { PE_REGISTRY(PE_ORDER_) PE_ORDER_END };
#define PE_ORDER_CHECK_(id, NAME, ...) typedef char pe_id_in_order_##NAME[id == PE_ORDER_##NAME ? 1 : -1];
PE_REGISTRY(PE_ORDER_CHECK_)

typedef struct {
    const char* name;
    int kind;      // PE_KIND_*
    int rp;        // takes randomized positions
    int dape;      // a base of DAPE
    int revision;  // of its definition (checkpoint word 11)
} PEInfo;
#define PE_INFO_(id, NAME, name, file, kind, rp, dape, rev) { #name, PE_KIND_##kind, rp, dape, rev },
static const PEInfo PE_INFO[PE_NUM_IDS] = { PE_REGISTRY(PE_INFO_) };

static inline const char* pe_name(int id) { return id >= 0 && id < PE_NUM_IDS ? PE_INFO[id].name : "unknown"; }
static inline int pe_revision(int id) { return PE_INFO[id].revision; }
// the encodings that have a position to randomize (not nope, the CABLE family, whose
// increments are learned per token, CoPE's positions of the context, txl; nor a DAPE
// build: the driver refuses those with one line)
static inline int rp_supported(int id) { return id >= 0 && id < PE_NUM_IDS && PE_INFO[id].rp; }

// the names of the encodings with rp (field 0) or dape (field 1) set, as "a, b, c"
static inline const char* pe_names_with(int field) {
    static char buf[2][512];
    char* out = buf[field];
    if (out[0] == '\0') {
        size_t used = 0;
        for (int id = 0; id < PE_NUM_IDS; id++) {
            if (!(field == 0 ? PE_INFO[id].rp : PE_INFO[id].dape)) { continue; }
            int n = snprintf(out + used, sizeof(buf[0]) - used, "%s%s", used > 0 ? ", " : "", PE_INFO[id].name);
            if (n < 0 || (size_t)n >= sizeof(buf[0]) - used) { break; }
            used += (size_t)n;
        }
    }
    return out;
}
static inline const char* pe_names_rp(void) { return pe_names_with(0); }
static inline const char* pe_names_dape(void) { return pe_names_with(1); }

// The selection. PE_IS(NAME) is 1 when the build says -DPE_<NAME> (defined as 1, as -D
// defines it), else 0, usable in #if (the registry's lines expand to a sum). Exactly one
// registered name must be given: an unknown or unregistered name is an error, never a
// fallback to another encoding.
#define PE_PLACEHOLDER_1 0,
#define PE_SECOND_(ignored, value, ...) value
#define PE_SECOND(...) PE_SECOND_(__VA_ARGS__)
#define PE_IS_ONE_(arg) PE_SECOND(arg 1, 0)
#define PE_IS_ONE__(value) PE_IS_ONE_(PE_PLACEHOLDER_##value)
#define PE_IS_ONE(x) PE_IS_ONE__(x)
#define PE_IS(NAME) PE_IS_ONE(PE_##NAME)
#define PE_COUNT_(id, NAME, ...) + PE_IS(NAME)
#if (0 PE_REGISTRY(PE_COUNT_)) != 1
#error "build with exactly one encoding of llmc/pe_list.h: -DPE_<NAME> (make ... PE=<name>)"
#endif
// the selected encoding's id, kind, whether it takes randomized positions and whether it is a
// base of DAPE (#if-able)
#define PE_ID_TERM_(id, NAME, ...) + PE_IS(NAME) * id
#define PE_ID (0 PE_REGISTRY(PE_ID_TERM_))
#define PE_KIND_TERM_(id, NAME, name, file, kind, ...) + PE_IS(NAME) * PE_KIND_##kind
#define PE_KIND (0 PE_REGISTRY(PE_KIND_TERM_))
#define PE_RP_TERM_(id, NAME, name, file, kind, rp, ...) + PE_IS(NAME) * rp
#define PE_RP (0 PE_REGISTRY(PE_RP_TERM_))
#define PE_DAPE_TERM_(id, NAME, name, file, kind, rp, dape, ...) + PE_IS(NAME) * dape
#define PE_DAPE (0 PE_REGISTRY(PE_DAPE_TERM_))
// its file, "../pe/<file>.h" (relative to this header)
#define PE_CAT_(a, b) a##b
#define PE_CAT(a, b) PE_CAT_(a, b)
#define PE_IF_1(then, otherwise) then
#define PE_IF_0(then, otherwise) otherwise
#define PE_IF(c) PE_CAT(PE_IF_, c)
#define PE_STR_(x) #x
#define PE_STR(x) PE_STR_(x)
#define PE_COMMA ,
#define PE_FILE_OF_(id, NAME, name, file, ...) PE_IF(PE_IS(NAME))(PE_STR(../pe/file.h) PE_COMMA, )
#define PE_FIRST_(first, ...) first
#define PE_FIRST(...) PE_FIRST_(__VA_ARGS__)
#define PE_FILE PE_FIRST(PE_REGISTRY(PE_FILE_OF_))

// the parts of an encoding's file (llmc/pe_part.h includes the one named by PE_PART)
#define PE_PART_DEFINITION 1
#define PE_PART_CPU 2
#define PE_PART_CUDA 3
#define PE_PART_TEST 4
#define PE_PART_REF 5

// The CPU path computes in `real`: float for training; the gradient checks build the very
// same code with -DREAL_DOUBLE so that finite differences are exact to ~1e-9. The CUDA
// path computes the formulas the encodings share in float.
#ifdef REAL_DOUBLE
typedef double real;
#else
typedef float real;
#endif

// the formulas an encoding's file shares between the two paths (host and device functions)
#ifdef __CUDACC__
#define PE_FN static __host__ __device__ __forceinline__
#else
#define PE_FN static inline
#endif

// ALiBi's head slopes into out[0..n), from the reference get_slopes: for a power-of-two n the
// geometric sequence 2^(-8/n), 2^(-16/n), ...; otherwise the slopes of the closest smaller
// power of two followed by every other slope of twice that power. Both trainers keep them
// (model->alibi_slopes) for any encoding that uses them.
static void alibi_slopes(float* out, int n) {
    int p = 1;
    while (p * 2 <= n) { p *= 2; }
    double start = pow(2.0, -8.0 / p);
    for (int i = 0; i < p; i++) { out[i] = (float)pow(start, i + 1); }
    if (p < n) {
        double start2 = pow(2.0, -8.0 / (2 * p));
        for (int i = 0; i < n - p; i++) { out[p + i] = (float)pow(start2, 2 * i + 1); }
    }
}

// the bias encodings whose bias is a function of the positions: those that take them (a draw
// of randomized positions, given ones) and those with positions of their own (BiPE-ALiBi's
// segments; PE_OWN_POSITIONS_USED, llmc/model.h); the others enter by the embedding or q, k
#define PE_BIAS_OF_POSITIONS (PE_KIND == PE_KIND_BIAS && (PE_RP || PE_OWN_POSITIONS_USED))

// ----------------------------------------------------------------------------
// evaluation variants (runtime flags): RoPE scaling and xPos's blockwise causal attention

enum {
    PE_EVAL_PLAIN,    // the encoding as trained
    PE_EVAL_PI,       // position interpolation: theta_k / s, s = the static factor
    PE_EVAL_NTK,      // NTK-aware: base * s^(hs / (hs - 2))
    PE_EVAL_YARN,     // YaRN: NTK-by-parts ramp over the pair index, logits times mscale(s)^2
    PE_EVAL_DYN_PI,   // the same three with s = max(1, T / training length) of each forward pass
    PE_EVAL_DYN_NTK,
    PE_EVAL_DYN_YARN,
    PE_EVAL_BCA,      // xPos: blockwise causal attention beyond the training length
    PE_EVAL_PLAINPOS, // randomized positions (-rp): positions 0..T-1 instead of a draw
    PE_EVAL_NUM
};
static const char* const PE_EVAL_NAMES[PE_EVAL_NUM] = {
    "plain", "pi", "ntk", "yarn", "dynamic-pi", "dynamic-ntk", "dynamic-yarn", "bca", "plainpos",
};

// the variant in effect: which one, the static RoPE factor s, and the training length L
typedef struct {
    int variant;
    double rope_factor;
    int train_len;
} PEEval;

// RoPE's frequency table, a `rope` model's options (the driver's -rb, -rt, -rr; checkpoint
// header words 15-17, 0 in files written before them: base 10000, the rest off), applied
// in this order to theta_k = base^(-2k/hs) by rope_frequencies (pe/rope.h): the base, a
// scaling variant of the evaluation, the truncation, the rounding
#define ROPE_BASE 10000 // RoPE's base, theta_k = base^(-2k/hs) (Su et al.)
typedef struct {
    int base;      // ABF's base (Xiong et al. 2023); 0: ROPE_BASE
    int truncate;  // Giraffe's truncated basis at length L (Pal et al. 2023); 0: off
    int resonance; // Resonance RoPE's integer wavelengths (Wang et al. 2024); 0: off
} RopeTable;

// the base a table's base word stands for: ROPE_BASE for 0
static inline int rope_base(int word) { return word > 0 ? word : ROPE_BASE; }

// CAPE's augmentation of a training pass's positions (Likhomanenko et al. 2021; pe/sinusoidal.h):
// a global shift of each row, uniform in [-global/2, global/2], a local shift of each token,
// uniform in [-1/2, 1/2] (local: 1), and a global scaling of each row, exp(u), u uniform in
// [-ln scale, ln scale]; the driver's -cg, -cs, -cl, run settings (an evaluation uses plain
// positions)
typedef struct {
    float global;
    float scale;
    int local;
} CapeAugment;
#define CAPE_DEFAULT_GLOBAL 10.0f // the official MT notebook's runs: positions shifted within [-5, 5],
#define CAPE_DEFAULT_SCALE 1.0f   // no scaling
#define CAPE_DEFAULT_LOCAL 1

// the encodings that take those options: rope alone (xpos's official code, torchscale's, fixes
// its table as does Giraffe's, which offers xpos or the truncation, never both; nor does xpos
// take the scaling variants)
static inline int rope_table_supported(int id) { return id == PE_ID_ROPE; }

// ----------------------------------------------------------------------------
// randomized positions (-rp L; Ruoss et al. 2023, google-deepmind/randomized_positional_encodings)
//
// A forward pass draws T positions without replacement from [0, L) and sorts them
// (the official noisy_fixed_positional_encodings: jrandom.choice(arange(L), (T,),
// replace=False), then sort); the encoding then uses position pi_t where it used t:
// the absolute encodings take rows pi_t of their table (learned: L <= maxT rows;
// sinusoidal: pi_t + 2, fairseq's offset), rope and xpos rotate by pi_t theta_k, the
// bias encodings see pi_i - pi_j (fire also pi_i for its normalizer). As the official
// code, the absolute encodings draw once per forward pass (its embedding layer) and
// every other encoding once per layer (its attention layers each draw from their own
// key); one draw serves every sequence of the batch. The draw comes from the model's
// seed (checkpoint word 13), a key the driver sets before each forward pass (training:
// the step, so a resumed run draws the same positions and every micro-batch and process
// of a step shares them; evaluation: the batch or window), and the layer. L = T gives
// 0..T-1 itself.

#define RP_STREAM_TRAIN 1   // the driver's keys (rp_key): a training step
#define RP_STREAM_VAL 2     // a validation batch
#define RP_STREAM_EVAL 3    // an extrapolation window (with its length and mode)
#define RP_STREAM_SAMPLE 4  // a sampled token
#define RP_STREAM_TEST 5    // the tests' fixed draws
#define RP_STREAM_GAP 6     // the context-use gap's windows of T tokens (with the window's length and mode)
#define RP_STREAM_HELLASWAG 7 // a batch of HellaSwag examples
#define RP_STREAM_PASSKEY 8 // a batch of passkey prompts
#define RP_STREAM_TASKS 9   // a batch of a task file's examples (with its row length)

// the positions a forward pass over T tokens draws: the model's rp_draw_len, or T where that
// is 0 (a draw of more than T yields its first T; the driver checks rp_draw_len <= L)
static inline int rp_draw_count(int draw_len, int T) { return draw_len > T ? draw_len : T; }

// one draw per layer (rotations, biases) or one per forward pass (the embeddings)
static inline int rp_draws(int pe, int num_layers) {
    return PE_INFO[pe].kind == PE_KIND_EMBED ? 1 : num_layers;
}

// the key of a forward pass: its stream (RP_STREAM_*) and up to two numbers within it
static inline uint64_t rp_key(uint64_t stream, uint64_t a, uint64_t b) {
    uint64_t k = stream * 0x9E3779B97F4A7C15ull;
    k = (k ^ (k >> 31) ^ a) * 0xBF58476D1CE4E5B9ull;
    k = (k ^ (k >> 29) ^ b) * 0x94D049BB133111EBull;
    return k ^ (k >> 32);
}

// Draw d of the pass with key `key` for a model of seed `seed`: n positions, sorted and
// distinct, uniformly from [0, L) (n <= L), of which the first T (T <= n) go to pos:
// selection sampling (Knuth's algorithm S), which keeps position t with probability
// (still needed) / (L - t) and so yields them in order; integer arithmetic only, so that
// both trainers draw the same bits. A row cut to its first T tokens (the driver's length
// buckets, -lb) takes the first T positions of its batch's draw of n = the batch's length.
static void rp_draw(int* pos, int T, int n, int L, uint64_t seed, uint64_t key, int d) {
    uint64_t state = random_seed(seed ^ rp_key(key, (uint64_t)d, 0x7270));
    int need = n;
    for (int t = 0; t < L && n - need < T; t++) {
        if ((((uint64_t)random_u32(&state) * (uint64_t)(L - t)) >> 32) < (uint64_t)need) { pos[n - need--] = t; }
    }
}

#endif // LLMC_PE_H
