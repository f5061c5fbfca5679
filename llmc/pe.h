/*
The positional encoding (PE) is chosen at compile time with -DPE_<NAME>
(`make train_gpt2 PE=<name>`). This header turns that flag into a numeric id and a
name, and holds the constants both trainers share: ALiBi slopes, T5 buckets, and the
few fixed hyperparameters of each encoding. The definitions themselves (forward and
backward) live in one marked section of each trainer.

  id  name        where       learned parameters per layer
   0  learned     embedding   wpe [maxT, C] (once, not per layer)
   1  sinusoidal  embedding   none
   2  rope        q, k        none
   3  nope        none        none
   4  alibi       bias        none
   5  t5          bias        table [NH, 32]
   6  kerple      bias        r1 [NH], r2 [NH]
   7  fire        bias        MLP 1->32->NH, c, L
   8  cable_v1    bias        W_b [NH, C], b_b [NH]
   9  cable_nw    bias        W_b [NH, C], b_b [NH]
  10  cable       bias        W_b, b_b, W_w [NH, C], b_w [NH]
  11  kcable      bias        W_b [NH, C], b_b [NH]

The id is stored in word 8 of the checkpoint header; 0 = learned, so llm.c's
checkpoints (which have 0 there) load as `learned`.
*/
#ifndef LLMC_PE_H
#define LLMC_PE_H

#include <math.h>

#define PE_ID_LEARNED 0
#define PE_ID_SINUSOIDAL 1
#define PE_ID_ROPE 2
#define PE_ID_NOPE 3
#define PE_ID_ALIBI 4
#define PE_ID_T5 5
#define PE_ID_KERPLE 6
#define PE_ID_FIRE 7
#define PE_ID_CABLE_V1 8
#define PE_ID_CABLE_NW 9
#define PE_ID_CABLE 10
#define PE_ID_KCABLE 11
#define PE_NUM_IDS 12

#if defined(PE_SINUSOIDAL)
#define PE_ID PE_ID_SINUSOIDAL
#elif defined(PE_ROPE)
#define PE_ID PE_ID_ROPE
#elif defined(PE_NOPE)
#define PE_ID PE_ID_NOPE
#elif defined(PE_ALIBI)
#define PE_ID PE_ID_ALIBI
#elif defined(PE_T5)
#define PE_ID PE_ID_T5
#elif defined(PE_KERPLE)
#define PE_ID PE_ID_KERPLE
#elif defined(PE_FIRE)
#define PE_ID PE_ID_FIRE
#elif defined(PE_CABLE_V1)
#define PE_ID PE_ID_CABLE_V1
#elif defined(PE_CABLE_NW)
#define PE_ID PE_ID_CABLE_NW
#elif defined(PE_CABLE)
#define PE_ID PE_ID_CABLE
#elif defined(PE_KCABLE)
#define PE_ID PE_ID_KCABLE
#else
#ifndef PE_LEARNED
#define PE_LEARNED
#endif
#define PE_ID PE_ID_LEARNED
#endif

// the CABLE family shares one implementation: a per-token increment from a linear
// layer on x, its cumulative sum S over positions, and a bias made of S
#if defined(PE_CABLE_V1) || defined(PE_CABLE_NW) || defined(PE_CABLE) || defined(PE_KCABLE)
#define PE_CABLE_FAMILY
#endif

static const char* const PE_NAMES[PE_NUM_IDS] = {
    "learned", "sinusoidal", "rope", "nope", "alibi", "t5",
    "kerple", "fire", "cable_v1", "cable_nw", "cable", "kcable",
};

static inline const char* pe_name(int id) {
    return (id >= 0 && id < PE_NUM_IDS) ? PE_NAMES[id] : "unknown";
}

// ----------------------------------------------------------------------------
// constants of the encodings

#define ROPE_BASE 10000.0f
#define T5_NUM_BUCKETS 32
#define T5_MAX_EXACT 16
#define T5_MAX_DISTANCE 128
#define KERPLE_MIN 0.01f   // r1 and r2 are projected back to >= this after every update
#define FIRE_HIDDEN 32
#define FIRE_INIT_C 0.1f
#define FIRE_EPS 1e-6f
// a CABLE increment starts at softplus(0) = log 2 for every head and token, and the
// weight w of `cable` at 1: the released code's starting point
#define CABLE_INIT_INCREMENT 0.69314718f

// ALiBi head slopes (Press et al.): for a power-of-two n, the geometric sequence
// 2^(-8/n), 2^(-16/n), ...; otherwise the slopes of the closest smaller power of two
// followed by every other slope of twice that power (the reference get_slopes).
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

// Causal T5 bucket of a distance n = i - j >= 0: distances below 16 get their own
// bucket, larger ones share log-spaced buckets up to 128, beyond which all share the
// last bucket. Computed in double so both trainers agree on every boundary.
static inline int t5_bucket(int n) {
    if (n < T5_MAX_EXACT) { return n; }
    if (n >= T5_MAX_DISTANCE) { return T5_NUM_BUCKETS - 1; }
    int b = T5_MAX_EXACT + (int)(log((double)n / T5_MAX_EXACT) / log((double)T5_MAX_DISTANCE / T5_MAX_EXACT)
                                 * (T5_NUM_BUCKETS - T5_MAX_EXACT));
    return b < T5_NUM_BUCKETS - 1 ? b : T5_NUM_BUCKETS - 1;
}

#endif // LLMC_PE_H
