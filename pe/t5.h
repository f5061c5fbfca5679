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

#elif PE_PART == PE_PART_CUDA

// The buckets of distances below 128 come from t5_bucket() on the host, in constant memory.
// Gradient (column side): a distance of 128 or more is bucket 31, summed per thread; the
// nearer pairs of a warp are staged in shared memory and lane k sums bucket k's (a bucket
// per lane, no dynamically indexed array)
#define PE_BIAS
#define PE_BIAS_GRAD
#define PE_BIAS_WARP
#define PE_BIAS_REDUCE
#define PE_PAR_N T5_NUM_BUCKETS
static_assert(T5_NUM_BUCKETS == WARP_SIZE, "t5: a bucket per lane");
__constant__ unsigned char t5_bucket_of[T5_MAX_DISTANCE];
struct PEGrad { float bucket, far; static constexpr bool per_lane = true; }; // lane k: bucket k; far: this thread's bucket-31 pairs
struct PEBias { const floatX* table; float* partials; };
struct PERow { const floatX* table; int i; float shift; }; // the table's row of head h
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    static int uploaded = 0;
    if (!uploaded) {
        unsigned char buckets[T5_MAX_DISTANCE];
        for (int n = 0; n < T5_MAX_DISTANCE; n++) { buckets[n] = (unsigned char)t5_bucket(n); }
        cudaCheck(cudaMemcpyToSymbol(t5_bucket_of, buckets, sizeof(buckets)));
        uploaded = 1;
    }
    pb->table = model->params.t5_table + (size_t)l * model->config.num_heads * T5_NUM_BUCKETS;
    pb->partials = model->gs.pe_partials;
}
__device__ __forceinline__ int pe_t5_bucket(int n) { return n < T5_MAX_DISTANCE ? t5_bucket_of[n] : T5_NUM_BUCKETS - 1; }
__device__ __forceinline__ PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { return {pb->table + h * T5_NUM_BUCKETS, i, 0.0f}; }
__device__ __forceinline__ float pe_bias(const PEBias* pb, const PERow* r, int j) { return (float)r->table[pe_t5_bucket(r->i - j)]; }
__device__ __forceinline__ void pe_bias_backward_warp(const PEBias* pb, PEGrad* g, int side, const PERow* r, int j, float ds, bool valid) {
    if (side != PE_SIDE_COL) { return; }
    int n = r->i - j;
    bool near = valid && n < T5_MAX_DISTANCE;
    if (valid && !near) { g->far += ds; }
    if (!warp_any(near)) { return; }
    __shared__ float2 stage[PE_WARP_THREADS]; // (bucket, ds) of each lane's pair, ds = 0 if not near
    int lane = threadIdx.x % WARP_SIZE, first = threadIdx.x - lane;
    stage[threadIdx.x] = make_float2(near ? (float)pe_t5_bucket(n) : -1.0f, near ? ds : 0.0f);
    __syncwarp();
    float sum = 0.0f;
    #pragma unroll 1
    for (int l = 0; l < WARP_SIZE; l++) {
        float2 v = stage[first + l];
        if (v.x == (float)lane) { sum += v.y; }
    }
    g->bucket += sum;
    __syncwarp(); // the stage is rewritten by the next pair
}
__device__ __forceinline__ void pe_bias_flush(const PEBias* pb, PEGrad* g, int side, int b, int h, int t, bool valid, int slot) {
    int lane = threadIdx.x % WARP_SIZE;
    flush_lane_partials(pb->partials, T5_NUM_BUCKETS, side, slot, [&](int q) {
        return (q == lane ? g->bucket : 0.0f) + (q == T5_NUM_BUCKETS - 1 ? g->far : 0.0f);
    });
}
// t5_bias_reduce_kernel: dtable[h][k] += the partials of every (b, key block) of head h
__global__ void t5_bias_reduce_kernel(float* dtable, const float* partials, int B, int NH, int blocks) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= NH * T5_NUM_BUCKETS) { return; }
    int h = idx / T5_NUM_BUCKETS, k = idx % T5_NUM_BUCKETS;
    float s = 0.0f;
    for (int b = 0; b < B; b++) {
        for (int kb = 0; kb < blocks; kb++) { s += partials[(((size_t)b * NH + h) * blocks + kb) * PE_PAR_N + k]; }
    }
    dtable[idx] += s;
}
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int B) {
    int NH = model->config.num_heads;
    int blocks = CEIL_DIV(model->seq_len, ATT_KV_BK);
    t5_bias_reduce_kernel<<<CEIL_DIV(NH * T5_NUM_BUCKETS, 256), 256, 0, ctx.stream>>>(
        model->grads.t5_table + (size_t)l * NH * T5_NUM_BUCKETS, pb->partials, B, NH, blocks);
    cudaCheckLaunch("t5_bias_reduce_kernel");
}

#elif PE_PART == PE_PART_REF

// T5's _relative_position_bucket (causal), computed the way the reference does in fp32
static int ref_t5_bucket(int n) {
    if (n < 16) { return n; }
    int v = 16 + (int)(logf((float)n / 16.0f) / logf(128.0f / 16.0f) * 16.0f);
    return v < 31 ? v : 31;
}

// the table's entry of head h and the distance's bucket; its gradient: ds into that entry
#define PE_REF_POS_BIAS
#define PE_REF_POS_BIAS_GRAD
static double pe_ref_pos_bias(const PERef* r, int h, int i, int j) { return PE_AT(r->par, T5_TABLE)[h * 32 + ref_t5_bucket(i - j)]; }
static void pe_ref_pos_bias_grad(const PERef* r, int h, int i, int j, double ds, double* const* d) {
    PE_AT(d, T5_TABLE)[h * 32 + ref_t5_bucket(i - j)] += ds;
}

#elif PE_PART == PE_PART_TEST

#define PE_TESTS
static void pe_tests(void) {
    printf("identity: T5 buckets as the reference _relative_position_bucket\n");
    int bad = 0;
    for (int n = 0; n < 5000; n++) { bad += t5_bucket(n) != ref_t5_bucket(n); }
    check(bad == 0, "buckets of distances 0..4999", bad, 0);
    check(t5_bucket(15) == 15 && t5_bucket(16) == 16 && t5_bucket(20) == 17 && t5_bucket(127) == 31 && t5_bucket(100000) == 31,
          "known buckets 15->15, 16->16, 20->17, 127->31, 1e5->31", 0, 0);
}

#endif
