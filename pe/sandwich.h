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
    int len = T > model->rp_span ? T : model->rp_span; // distances below the positions' range
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

#endif
