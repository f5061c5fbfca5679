/*
t5 (Raffel et al. 2020): a learned scalar per layer, head and distance bucket,

    b(i, j) = table[h][bucket(i - j)]

with T5's causal buckets: 32 buckets, distances below 16 get their own, larger ones share
log-spaced buckets up to 128, beyond which all share the last one. The table starts at
N(0, 0.02).
*/
#if PE_PART == PE_PART_DEFINITION

#define T5_NUM_BUCKETS 32
#define T5_MAX_EXACT 16
#define T5_MAX_DISTANCE 128

#define PE_TENSORS(X) \
    X(T5_TABLE, t5_table, 1, L * NH * T5_NUM_BUCKETS, fill_normal(p, n, 0.02f, rng))

// the causal T5 bucket of a distance n = i - j >= 0, computed in double so that both
// trainers agree on every boundary
static inline int t5_bucket(int n) {
    if (n < T5_MAX_EXACT) { return n; }
    if (n >= T5_MAX_DISTANCE) { return T5_NUM_BUCKETS - 1; }
    int b = T5_MAX_EXACT + (int)(log((double)n / T5_MAX_EXACT) / log((double)T5_MAX_DISTANCE / T5_MAX_EXACT)
                                 * (T5_NUM_BUCKETS - T5_MAX_EXACT));
    return b < T5_NUM_BUCKETS - 1 ? b : T5_NUM_BUCKETS - 1;
}

#elif PE_PART == PE_PART_CPU

#define PE_BIAS
#define PE_BIAS_GRAD
#define PE_BH_GRADS T5_NUM_BUCKETS // a bucket's gradient per (slot, head)
typedef struct { const real* table; real* dbh; int NH; int bucket[T5_MAX_DISTANCE]; } PEBias;
typedef struct { int h, i; } PERow;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads;
    pb->NH = NH;
    pb->table = model->params.t5_table + (size_t)l * NH * T5_NUM_BUCKETS;
    pb->dbh = model->pe_dbh;
    for (int n = 0; n < T5_MAX_DISTANCE; n++) { pb->bucket[n] = t5_bucket(n); }
    if (backward) { memset(pb->dbh, 0, (size_t)B * NH * PE_BH_GRADS * sizeof(real)); }
}
static inline int pe_t5_bucket(const PEBias* pb, int n) { return n < T5_MAX_DISTANCE ? pb->bucket[n] : T5_NUM_BUCKETS - 1; }
static inline PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { PERow r = {h, i}; return r; }
static inline real pe_bias(const PEBias* pb, const PERow* r, int j) {
    return pb->table[r->h * T5_NUM_BUCKETS + pe_t5_bucket(pb, r->i - j)];
}
static inline void pe_bias_backward(PEBias* pb, int slot, const PERow* r, int j, real ds) {
    pb->dbh[((size_t)slot * pb->NH + r->h) * PE_BH_GRADS + pe_t5_bucket(pb, r->i - j)] += ds;
}
#define PE_BIAS_REDUCE
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int slots) {
    int NH = pb->NH;
    real* dtable = model->grads.t5_table + (size_t)l * NH * T5_NUM_BUCKETS;
    for (int b = 0; b < slots; b++) {
        for (int h = 0; h < NH; h++) {
            for (int k = 0; k < T5_NUM_BUCKETS; k++) { dtable[h * T5_NUM_BUCKETS + k] += pb->dbh[((size_t)b * NH + h) * PE_BH_GRADS + k]; }
        }
    }
}

#endif
