/*
sandwich (Chi et al. 2023), as NeMo's code, the only published one: the inner products of
sinusoidal embeddings (d' = hs) as a bias, no parameters,

    b(i, j) = (sum_{k=1}^{hs/2} cos((i - j) 10000^(-2k/hs)) - hs/2) / (8 (h + 1) / NH)

0 on the diagonal, never positive, decaying with the distance. It depends on the head and
the distance only: both paths keep a table [NH][len] of it, computed in double and grown as
longer sequences (or a wider range of randomized positions) come.
*/
#if PE_PART == PE_PART_DEFINITION

#define PE_CONFIG_CHECK
static void pe_config_check(const GPT2Config* c, const char* what) {
    if ((c->channels / c->num_heads) % 2 != 0) { fatal("%s: sandwich needs an even head size, got %d", what, c->channels / c->num_heads); }
}

// the sum over the hs/2 frequencies at distance n (0 at n = 0), and head h's scale
static inline double sandwich_sum(int n, int hs) {
    double sum = 0;
    for (int k = 1; k <= hs / 2; k++) { sum += cos(n * pow(10000.0, -2.0 * k / hs)); }
    return sum - hs / 2.0;
}
static inline double sandwich_head_scale(int h, int NH) { return 8.0 * (h + 1) / NH; }

#elif PE_PART == PE_PART_CPU

#define PE_BIAS
typedef struct { const real* table; int len; } PEBias;
typedef struct { int h, i; } PERow;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads, hs = model->config.channels / NH;
    int len = T > model->pos_span ? T : model->pos_span; // distances below the positions' range
    if (model->pe_table_len < len) {
        free(model->pe_table);
        model->pe_table = (real*)malloc_check((size_t)NH * len * sizeof(real));
        for (int h = 0; h < NH; h++) {
            for (int n = 0; n < len; n++) { model->pe_table[(size_t)h * len + n] = (real)(sandwich_sum(n, hs) / sandwich_head_scale(h, NH)); }
        }
        model->pe_table_len = len;
    }
    pb->table = model->pe_table;
    pb->len = model->pe_table_len;
}
static inline PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { PERow r = {h, i}; return r; }
static inline real pe_bias(const PEBias* pb, const PERow* r, int j) { return pb->table[(size_t)r->h * pb->len + r->i - j]; }

#elif PE_PART == PE_PART_CUDA

// the table on the device, computed in double on the host (as the CPU path)
#define PE_BIAS
struct PEBias { const float* table; int len; };
struct PERow { int b, h, i; float shift; };
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads, hs = model->config.channels / NH;
    int len = T > model->pos_span ? T : model->pos_span; // distances below the positions' range
    if (model->pe_table_len < len) {
        float* host = (float*)malloc_check((size_t)NH * len * sizeof(float));
        for (int h = 0; h < NH; h++) {
            for (int n = 0; n < len; n++) { host[(size_t)h * len + n] = (float)(sandwich_sum(n, hs) / sandwich_head_scale(h, NH)); }
        }
        pe_table_upload((void**)&model->pe_table, host, (size_t)NH * len * sizeof(float), "the sandwich bias table");
        free(host);
        model->pe_table_len = len;
    }
    pb->table = model->pe_table;
    pb->len = model->pe_table_len;
}
__device__ __forceinline__ PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { return {b, h, i, 0.0f}; }
__device__ __forceinline__ float pe_bias(const PEBias* pb, const PERow* r, int j) { return pb->table[(size_t)r->h * pb->len + r->i - j]; }

#elif PE_PART == PE_PART_REF

// NeMo: (sum_{k=1}^{d/2} cos((i-j) / 10000^(2k/d)) - d/2) / ((h+1) * 8 / NH), d = head size
#define PE_REF_POS_BIAS
static double pe_ref_pos_bias(const PERef* r, int h, int i, int j) {
    double sum = 0;
    for (int k = 1; k <= r->hs / 2; k++) { sum += cos((i - j) / pow(10000.0, 2.0 * k / r->hs)); }
    return (sum - r->hs / 2.0) / ((h + 1) * 8.0 / r->NH);
}

#elif PE_PART == PE_PART_TEST

// model's heads and for GPT-2 small's head size
#define PE_TESTS
static void pe_tests(void) {
    printf("sandwich: the bias is 0 on the diagonal and never positive\n");
    int T = 4096;
    GPT2Config cfg = tiny_config(16);
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 1);
    PEBias pb;
    pe_bias_setup(&pb, &model, 0, 1, T, 0);
    double diag = 0, top = -INFINITY;
    for (int h = 0; h < cfg.num_heads; h++) {
        for (int i = 0; i < T; i++) {
            PERow ri = pe_bias_row(&pb, 0, h, i), rl = pe_bias_row(&pb, 0, h, T - 1);
            diag = fmax(diag, fabs(pe_bias(&pb, &ri, i)));
            top = fmax(top, pe_bias(&pb, &rl, i < T - 1 ? i : 0));
        }
    }
    check(diag == 0, "b(i, i) = 0, every head", diag, 0);
    check(top < 0, "b(i, j) < 0 for every distance 1 .. 4095, every head", top, 0);
    double top64 = -INFINITY;
    for (int k = 1; k < 65536; k++) { top64 = fmax(top64, sandwich_sum(k, 64)); }
    check(sandwich_sum(0, 64) == 0 && top64 <= 0, "hs = 64: numerator 0 at distance 0, <= 0 up to 65535", top64, 0);
    gpt2_free(&model);
}

#endif
