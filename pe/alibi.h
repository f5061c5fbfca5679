/*
alibi (Press et al. 2022): a fixed bias, linear in the distance, with a slope per head:

    b(i, j) = -m_h (i - j)

not scaled by 1/sqrt(hs). The slopes are the reference get_slopes' (llmc/pe.h alibi_slopes;
both trainers keep them in model->alibi_slopes for any encoding). No parameters.
*/
#if PE_PART == PE_PART_DEFINITION

// the bias of distance n = i - j in a head of slope m
PE_FN real alibi_bias(real m, int n) { return -m * n; }
// the factor of the slopes (BiPE-ALiBi's 96, which includes this file: pe/bipe.h)
#ifndef ALIBI_SLOPE_SCALE
#define ALIBI_SLOPE_SCALE 1.0f
#endif

#elif PE_PART == PE_PART_CPU

#define PE_BIAS
typedef struct { const real* slopes; } PEBias;
typedef struct { real slope; int i; } PERow;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) { pb->slopes = model->alibi_slopes; }
static inline PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { PERow r = {pb->slopes[h] * ALIBI_SLOPE_SCALE, i}; return r; }
static inline real pe_bias(const PEBias* pb, const PERow* r, int j) { return alibi_bias(r->slope, r->i - j); }

#elif PE_PART == PE_PART_CUDA

#define PE_BIAS
struct PEBias { const float* slopes; };
struct PERow { float slope; int i; float shift; };
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) { pb->slopes = model->alibi_slopes; }
__device__ __forceinline__ PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { return {pb->slopes[h] * ALIBI_SLOPE_SCALE, i, 0.0f}; }
__device__ __forceinline__ float pe_bias(const PEBias* pb, const PERow* r, int j) { return alibi_bias(r->slope, r->i - j); }

#elif PE_PART == PE_PART_REF

#define PE_REF_POS_BIAS
static double pe_ref_pos_bias(const PERef* r, int h, int i, int j) {
    float slopes[1024];
    alibi_slopes(slopes, r->NH); // checked against the reference's values by pe_tests
    return -(double)slopes[h] * ALIBI_SLOPE_SCALE * (i - j);
}

#elif PE_PART == PE_PART_TEST && PE_IS(ALIBI)

#define PE_TESTS
static void pe_tests(void) {
    printf("identity: ALiBi slopes as the reference get_slopes\n");
    float s[12];
    alibi_slopes(s, 8);
    double e = 0;
    for (int h = 0; h < 8; h++) { e = fmax(e, fabs(s[h] - pow(2.0, -(h + 1)))); }
    check(e < 1e-7, "8 heads: 2^-1 ... 2^-8", e, 1e-7);
    alibi_slopes(s, 12); // 8 heads' slopes, then every other slope of 16 heads: 2^-0.5, 2^-1.5, ...
    e = 0;
    for (int h = 0; h < 8; h++) { e = fmax(e, fabs(s[h] - pow(2.0, -(h + 1)))); }
    for (int h = 0; h < 4; h++) { e = fmax(e, fabs(s[8 + h] - pow(2.0, -(0.5 + h)))); }
    check(e < 1e-7, "12 heads: 2^-1 ... 2^-8, 2^-0.5 ... 2^-3.5", e, 1e-7);
    alibi_slopes(s, 3);
    e = fmax(fmax(fabs(s[0] - 1.0 / 16), fabs(s[1] - 1.0 / 256)), fabs(s[2] - 0.25));
    check(e < 1e-7, "3 heads: 1/16, 1/256, 1/4", e, 1e-7);
}

#endif
