/*
alibi (Press et al. 2022): a fixed bias, linear in the distance, with a slope per head:

    b(i, j) = -m_h (i - j)

not scaled by 1/sqrt(hs). The slopes, from the reference get_slopes: for a power-of-two
number of heads n the geometric sequence 2^(-8/n), 2^(-16/n), ...; otherwise the slopes of
the closest smaller power of two followed by every other slope of twice that power. No
parameters.
*/
#if PE_PART == PE_PART_DEFINITION

// ALiBi's head slopes into out[0..n)
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

// the bias of distance n = i - j in a head of slope m
PE_FN real alibi_bias(real m, int n) { return -m * n; }

#elif PE_PART == PE_PART_CPU

#define PE_MODEL_INIT
static void pe_model_init(GPT2* model) {
    int NH = model->config.num_heads;
    float* slopes = (float*)malloc_check(NH * sizeof(float));
    alibi_slopes(slopes, NH);
    model->alibi_slopes = (real*)malloc_check(NH * sizeof(real));
    for (int h = 0; h < NH; h++) { model->alibi_slopes[h] = slopes[h]; }
    free(slopes);
}

#define PE_BIAS
typedef struct { const real* slopes; } PEBias;
typedef struct { real slope; int i; } PERow;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) { pb->slopes = model->alibi_slopes; }
static inline PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { PERow r = {pb->slopes[h], i}; return r; }
static inline real pe_bias(const PEBias* pb, const PERow* r, int j) { return alibi_bias(r->slope, r->i - j); }

#endif
