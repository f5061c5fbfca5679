/*
fire (Li et al. 2024), as the FIRE class of the DAPE repository (whose numbers the papers
report): a learned function of the normalized distance,

    b(i, j) = f(psi(i - j) / (psi(max(L, i)) + eps)),   psi(x) = log(|c| x + 1)

with the query position i counted from 0, f an MLP 1 -> 32 (ReLU) -> NH shared by the heads
of a layer, c learned (starts at 0.1), and the threshold L = |l| L0 learning its multiplier
l (starts at 1) of the fixed L0 = maxT // 2 (the training length halved). The MLP starts as
PyTorch's default Linear init, U(+-1/sqrt(fan_in)). Revision 1 (revision 0 normalized by
psi(max(L, i + 1)) and learned L in tokens).
*/
#if PE_PART == PE_PART_DEFINITION

#define FIRE_HIDDEN 32
#define FIRE_INIT_C 0.1f
#define FIRE_INIT_L 1.0f // the multiplier l of the threshold L = |l| L0
#define FIRE_EPS 1e-6f

#define PE_TENSORS(X) \
    X(FIRE_W1, fire_w1, 1, L * FIRE_HIDDEN,      fill_uniform(p, n, -1.0f, 1.0f, rng)) \
    X(FIRE_B1, fire_b1, 0, L * FIRE_HIDDEN,      fill_uniform(p, n, -1.0f, 1.0f, rng)) \
    X(FIRE_W2, fire_w2, 1, L * NH * FIRE_HIDDEN, fill_uniform(p, n, -1.0f / sqrtf(FIRE_HIDDEN), 1.0f / sqrtf(FIRE_HIDDEN), rng)) \
    X(FIRE_B2, fire_b2, 0, L * NH,               fill_uniform(p, n, -1.0f / sqrtf(FIRE_HIDDEN), 1.0f / sqrtf(FIRE_HIDDEN), rng)) \
    X(FIRE_C,  fire_c,  0, L,                    fill_const(p, n, FIRE_INIT_C)) \
    X(FIRE_L,  fire_L,  0, L,                    fill_const(p, n, FIRE_INIT_L))

#elif PE_PART == PE_PART_CPU

#define PE_BIAS
#define PE_BIAS_GRAD
#define PE_BH_GRADS (3 * FIRE_HIDDEN + 3) // per (slot, head): w1, b1, this head's w2 row, b2, c, l
typedef struct { const real* w1; const real* b1; const real* w2; const real* b2; real c; real l; real L0; real* dbh; int NH; } PEBias;
typedef struct { int h, i; } PERow;
static void pe_bias_setup(PEBias* pb, GPT2* model, int l, int B, int T, int backward) {
    int NH = model->config.num_heads;
    pb->NH = NH;
    pb->w1 = model->params.fire_w1 + (size_t)l * FIRE_HIDDEN;
    pb->b1 = model->params.fire_b1 + (size_t)l * FIRE_HIDDEN;
    pb->w2 = model->params.fire_w2 + (size_t)l * NH * FIRE_HIDDEN;
    pb->b2 = model->params.fire_b2 + (size_t)l * NH;
    pb->c = model->params.fire_c[l];
    pb->l = model->params.fire_L[l];
    pb->L0 = (real)(model->config.max_seq_len / 2);
    pb->dbh = model->pe_dbh;
    if (backward) { memset(pb->dbh, 0, (size_t)B * NH * PE_BH_GRADS * sizeof(real)); }
}
static inline PERow pe_bias_row(const PEBias* pb, int b, int h, int i) { PERow r = {h, i}; return r; }
// the MLP's input u = psi(i - j) / (psi(max(L, i)) + eps); also returns psi's two values and max(L, i)
static inline real fire_input(const PEBias* pb, int i, int j, real* psi_num, real* psi_den, real* lpos) {
    real c = fabs(pb->c);
    real L = fabs(pb->l) * pb->L0;
    *lpos = L > i ? L : (real)i;
    *psi_num = log(c * (i - j) + 1);
    *psi_den = log(c * *lpos + 1) + (real)FIRE_EPS;
    return *psi_num / *psi_den;
}
static inline real pe_bias(const PEBias* pb, const PERow* r, int j) {
    real pn, pd, lp;
    real u = fire_input(pb, r->i, j, &pn, &pd, &lp);
    const real* w2 = pb->w2 + r->h * FIRE_HIDDEN;
    real out = pb->b2[r->h];
    for (int k = 0; k < FIRE_HIDDEN; k++) {
        real hid = pb->w1[k] * u + pb->b1[k];
        if (hid > 0) { out += w2[k] * hid; }
    }
    return out;
}
static inline void pe_bias_backward(PEBias* pb, int slot, const PERow* r, int j, real ds) {
    int i = r->i;
    real pn, pd, lp;
    real u = fire_input(pb, i, j, &pn, &pd, &lp);
    const real* w2 = pb->w2 + r->h * FIRE_HIDDEN;
    real* d = pb->dbh + ((size_t)slot * pb->NH + r->h) * PE_BH_GRADS;
    real* dw1 = d;
    real* db1 = d + FIRE_HIDDEN;
    real* dw2 = d + 2 * FIRE_HIDDEN;
    real du = 0;
    for (int k = 0; k < FIRE_HIDDEN; k++) {
        real hid = pb->w1[k] * u + pb->b1[k];
        if (hid > 0) {
            dw2[k] += ds * hid;
            real dhid = ds * w2[k];
            dw1[k] += dhid * u;
            db1[k] += dhid;
            du += dhid * pb->w1[k];
        }
    }
    d[3 * FIRE_HIDDEN] += ds; // b2
    // u = pn / pd with pn = log(|c| n + 1), pd = log(|c| lp + 1) + eps
    real c = fabs(pb->c), sc = pb->c >= 0 ? 1 : -1;
    real n = (real)(i - j);
    real dpn = du / pd, dpd = -du * pn / (pd * pd);
    real dc = dpn * n / (c * n + 1) + dpd * lp / (c * lp + 1);
    d[3 * FIRE_HIDDEN + 1] += dc * sc;
    if (fabs(pb->l) * pb->L0 > i) { // the threshold is active: lp = |l| L0
        real sl = pb->l >= 0 ? 1 : -1;
        d[3 * FIRE_HIDDEN + 2] += dpd * c / (c * lp + 1) * pb->L0 * sl;
    }
}
#define PE_BIAS_REDUCE
static void pe_bias_reduce(PEBias* pb, GPT2* model, int l, int slots) {
    int NH = pb->NH;
    real* dw1 = model->grads.fire_w1 + (size_t)l * FIRE_HIDDEN;
    real* db1 = model->grads.fire_b1 + (size_t)l * FIRE_HIDDEN;
    real* dw2 = model->grads.fire_w2 + (size_t)l * NH * FIRE_HIDDEN;
    real* db2 = model->grads.fire_b2 + (size_t)l * NH;
    for (int b = 0; b < slots; b++) {
        for (int h = 0; h < NH; h++) {
            const real* d = pb->dbh + ((size_t)b * NH + h) * PE_BH_GRADS;
            for (int k = 0; k < FIRE_HIDDEN; k++) {
                dw1[k] += d[k];
                db1[k] += d[FIRE_HIDDEN + k];
                dw2[h * FIRE_HIDDEN + k] += d[2 * FIRE_HIDDEN + k];
            }
            db2[h] += d[3 * FIRE_HIDDEN];
            model->grads.fire_c[l] += d[3 * FIRE_HIDDEN + 1];
            model->grads.fire_L[l] += d[3 * FIRE_HIDDEN + 2];
        }
    }
}

#endif
