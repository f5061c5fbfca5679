/*
A small deterministic random number generator (xorshift64*), used for parameter
initialization and sampling on both paths, so that the CPU and CUDA trainers start
from bit-identical weights for the same seed, and a resumed run continues the same
random sequence (the state is one 64-bit word, saved with the training state).
*/
#ifndef LLMC_RAND_H
#define LLMC_RAND_H

#include <math.h>
#include <stdint.h>

static inline uint32_t random_u32(uint64_t* state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

// uniform in [0, 1)
static inline float random_f32(uint64_t* state) {
    return (random_u32(state) >> 8) / 16777216.0f;
}

// seeds are mixed once so that small seeds (0, 1, 2...) give unrelated streams
static inline uint64_t random_seed(uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    return z != 0 ? z : 0x2545F4914F6CDD1Dull;
}

// standard normal by Box-Muller, computed in double so the value does not depend on
// the compiler's float contraction choices
static inline float random_normal(uint64_t* state) {
    double u1 = (random_u32(state) + 1.0) / 4294967297.0;
    double u2 = random_u32(state) / 4294967296.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

#endif // LLMC_RAND_H
