/*
floater: FLOATER (Liu et al. 2020), as its official code (xuanqing94/FLOATER at d788b5e, a
fairseq fork; the solver of the authors' torchdiffeq fork, xuanqing94/torchdiffeq at 05d9ae1,
which its README installs): position vectors from a neural ODE, added to q, k and v in every
layer, over fairseq's sinusoidal embedding, which the official model keeps (pe/sinusoidal.h:
wte[token] sqrt(C) + p[pos + 2]; flow_transformer.py:464-473, :688-694):

    q_t += P_{l,q}(s_t), k_t += P_{l,k}(s_t), v_t += P_{l,v}(s_t),   s_t = pos_t dt, dt = 0.01

(before the attention scales q.k by 1/sqrt(hs), as flow_attention.py:114-126 adds them before
q *= scaling), pos_t the token's position (its index, or given or drawn: positions as data).
P(s) is the state of R = 3 L rows of C (row 3 l + j: part j = q, k, v of layer l), each row
an ODE of its own with one dynamics shared by every row (flow_funcs.py:101-133):

    dP/ds = h(s, P),   h(s, x) = W2 [relu(W1 [x; s] + b1); s] + b2,   P(0) = P0

time appended to the input of each Linear(C + 1, C) (Linear_t, flow_funcs.py:25-41). P0
[L, 3, C] starts uniform in +-sqrt(6 / ((L + 3) C)) (xavier_uniform of the official (3, L, C)
proj_bias, :244-246, :272-273), W1, W2 [C, C + 1] at N(0, 2 / (2C + 1)) (xavier_normal), b1,
b2 at 0. The solver is torchdiffeq's "rk4" of the authors' fork: Kutta's 3/8 rule
(rk_common.py rk4_alt_step_func), 5 steps of dt / 5 per position (step_size time_dt / 5,
:266-269):

    k1 = h(s, y), k2 = h(s + d/3, y + d k1 / 3), k3 = h(s + 2d/3, y + d (k1 / -3 + k2)),
    k4 = h(s + d, y + d (k1 - k2 + k3)),   y' = y + (k1 + 3 k2 + 3 k3 + k4) d / 8

Where it differs from the official code (docs/encodings.md says why):
  - the grid reaches any length: positions are solved as far as a pass needs them (the
    official asserts T <= 255, :324, :660), integrating on from the last one solved;
  - position p is the state after exactly 5p steps of d = dt / 5; the official's fp32 grid
    (solvers.py:57-66, 88-97: the first grid point >= p dt, whose interpolation is handed the
    step's end twice) takes 5p + 1 steps for 133 of the positions 1..254;
  - the gradient goes back through the solver's steps (each interval recomputed from the
    solution at its start), the exact gradient of the computed positions; the official uses
    the adjoint method (odeint_adjoint), which solves a second ODE backwards;
  - GPT-2's own qkv bias stays (the official projection has none: its P is the bias);
  - refresh (-fr R, checkpoint word 21): a training pass re-solves the positions when the
    parameters changed and R updates have passed since the last solve (or none has: they were
    set, not trained); between, the last solution, with no gradient to the ODE (the
    official's update_flow_every = 400 and its detached cache, :325-335). Its counter counts
    every forward call, evaluations too; this one counts updates. An evaluation always takes
    the positions of the parameters it evaluates (a cache of its own), so that an evaluation
    during training is one of the model saved then;
  - the positions in use and their age go into the training state file (pe_resume_save),
    so that a resumed run uses the same positions (the official checkpoint keeps its cache).
*/
#if PE_PART == PE_PART_DEFINITION

#include "sinusoidal.h"

#define FLOATER_DT 0.01    // time_dt (flow_transformer.py:247): position p at s = p dt
#define FLOATER_SUBSTEPS 5 // RK steps per dt (:268: step_size time_dt / 5)
// The positions' range: those whose vectors stay within +-2^56, below which q.k (hs 2^112 at
// most) and layernorm's sums of squares (C 2^112) stay within fp32's 2^128. The ODE's solution
// may grow exponentially with s (about e^(0.7 s) at the initialization: the cpu preset's leaves
// the range at position 5963): a pass that needs a position beyond is refused, an evaluation of
// that length is n/a (pe_reach)
#define FLOATER_RANGE 72057594037927936.0 // 2^56
#define PE_LIMIT_NOTE "beyond its positions' range (their ODE's solution leaves +-2^56)"

// xavier_uniform of the official (3, L, C) tensor (fan_in L C, fan_out 3 C): P0's bound
static float floater_p0_bound(const GPT2Config* cfg) {
    return sqrtf(6.0f / ((float)(cfg->num_layers + 3) * cfg->channels));
}
// xavier_normal of a (C, C + 1) weight: W1's and W2's standard deviation
static float floater_w_std(const GPT2Config* cfg) { return sqrtf(2.0f / (2.0f * cfg->channels + 1.0f)); }

// P0 per layer (q, k, v rows of C); the dynamics' MLP, shared by every layer: the tensors are
// one slice of the parameters, in this order (the ODE's parameters, theta)
#define PE_TENSORS(X) \
    X(FLOATER_P0, floater_p0, 0, L * 3 * C,   fill_uniform(p, n, -floater_p0_bound(cfg), floater_p0_bound(cfg), rng)) \
    X(FLOATER_W1, floater_w1, 1, C * (C + 1), fill_normal(p, n, floater_w_std(cfg), rng)) \
    X(FLOATER_B1, floater_b1, 0, C,           fill_const(p, n, 0.0f)) \
    X(FLOATER_W2, floater_w2, 1, C * (C + 1), fill_normal(p, n, floater_w_std(cfg), rng)) \
    X(FLOATER_B2, floater_b2, 0, C,           fill_const(p, n, 0.0f))

// the time of stage s (0..3) of RK step n: the step starts at n dt / 5, the 3/8 rule's stages
// at 0, 1/3, 2/3 and 1 of it
PE_FN double floater_time(long n, int s) { return (n + s / 3.0) * (FLOATER_DT / FLOATER_SUBSTEPS); }

// the input of stage s (1..3) from the step's start y and the stages before it, as
// rk4_alt_step_func writes it
PE_FN real floater_stage_input(int s, real y, real k1, real k2, real k3, real d) {
    return s == 1 ? y + d * k1 / 3 : s == 2 ? y + d * (k1 / -3 + k2) : y + d * (k1 - k2 + k3);
}
// the end of the step
PE_FN real floater_step_end(real y, real k1, real k2, real k3, real k4, real d) { return y + (k1 + 3 * k2 + 3 * k3 + k4) * (d / 8); }
// d(stage s's input)/d(k_j), j < s, over the step d: the 3/8 rule's tableau
PE_FN real floater_tableau(int s, int j) {
    const real a[4][3] = {{0, 0, 0}, {(real)1 / 3, 0, 0}, {(real)-1 / 3, 1, 0}, {1, -1, 1}};
    return a[s][j];
}
// d(step end)/d(k_j) over d: the 3/8 rule's weights
PE_FN real floater_weight(int j) { return j == 0 || j == 3 ? (real)1 / 8 : (real)3 / 8; }

// Does a training pass solve its positions again? When there is no solution yet, or the
// parameters differ from the solution's (not current) and either R updates have passed since
// it was solved (age >= R) or none has (age 0: the parameters were set, not trained)
static int floater_refresh_due(int have, int current, int age, int R) { return !have || (!current && (age == 0 || age >= R)); }

// the training state file's part (pe_resume_save): int32 age, int32 whether the training
// solution has parameters, then its parameters theta (theta_len of them, in checkpoint order) in fp32
static size_t floater_resume_bytes(size_t theta_len) { return 2 * sizeof(int32_t) + theta_len * sizeof(float); }

#elif PE_PART == PE_PART_CPU

#include "sinusoidal.h"

// A solution: the positions 0..n-1 of the ODE with parameters theta (a copy of the model's),
// which a pass that needs more integrates on from position n - 1
typedef struct {
    real* theta;  // the ODE's parameters (P0, W1, b1, W2, b2 as the model lays them out)
    int have;     // theta holds a copy
    real* P;      // (cap, R, C) the positions' vectors
    int n, cap;
    int range;    // the first position out of range (FLOATER_RANGE) among those solved; INT32_MAX: none
} FloaterSolution;

// the encoding's state across passes (model->pe_state): training takes `train` (solved again as
// the refresh says, stale between), an evaluation `eval` (of the current parameters)
struct PEState {
    FloaterSolution train, eval;
    int age;      // updates since `train` was solved
    int grad;     // the last training pass's positions are those of the current parameters
    const FloaterSolution* use; // the last pass's positions
    real* dP;     // (span, R, C) the last pass's gradient of its positions
    size_t dP_len;
};

// the length of theta (the encoding's tensors, consecutive in the parameters)
static size_t floater_theta_len(const GPT2* model) {
    size_t n = 0;
    for (int k = P_FLOATER_P0; k <= P_FLOATER_B2; k++) { n += model->param_sizes[k]; }
    return n;
}

// the ODE's pieces in a copy theta of the model's tensors
typedef struct { const real *P0, *W1, *b1, *W2, *b2; } FloaterParams;
static FloaterParams floater_params(const real* theta, const GPT2* model) {
    const size_t* n = model->param_sizes;
    FloaterParams p;
    p.P0 = theta;
    p.W1 = p.P0 + n[P_FLOATER_P0];
    p.b1 = p.W1 + n[P_FLOATER_W1];
    p.W2 = p.b1 + n[P_FLOATER_B1];
    p.b2 = p.W2 + n[P_FLOATER_W2];
    return p;
}

static struct PEState* floater_state(GPT2* model) {
    if (model->pe_state == NULL) { model->pe_state = (struct PEState*)calloc_check(1, sizeof(struct PEState)); }
    return model->pe_state;
}

// floater_linear: out (n, C) = [x; t] W^T + b for n rows x (n, C), W (C, C + 1): torch's
// Linear(C + 1, C) on an input with the time appended (Linear_t); each output the same sum
// whichever rows share the call
static void floater_linear(real* out, const real* x, const real* W, const real* b, real t, int n, int C) {
    for (int o = 0; o < C; o++) {
        const real* w = W + (size_t)o * (C + 1);
        for (int r = 0; r < n; r++) {
            const real* xr = x + (size_t)r * C;
            real acc = 0;
            #pragma omp simd reduction(+:acc)
            for (int k = 0; k < C; k++) { acc += w[k] * xr[k]; }
            out[(size_t)r * C + o] = acc + w[C] * t + b[o];
        }
    }
}

// floater_dynamics: k (n, C) = h(t, x) (flow_func_linear: Linear_t, ReLU, Linear_t), the hidden
// pre-activation into z and its ReLU into a
static void floater_dynamics(real* k, real* z, real* a, const real* x, real t, const FloaterParams* p, int n, int C) {
    floater_linear(z, x, p->W1, p->b1, t, n, C);
    for (size_t i = 0; i < (size_t)n * C; i++) { a[i] = z[i] > 0 ? z[i] : 0; }
    floater_linear(k, a, p->W2, p->b2, t, n, C);
}

// floater_rk_step: RK step n of the 3/8 rule on n rows y (rows, C), in place; the stages into k
// (4, rows, C), their inputs into X and their hidden pre-activations into z (4, rows, C each:
// what the backward needs), a (rows, C) scratch
static void floater_rk_step(real* y, real* k, real* X, real* z, real* a, long n, const FloaterParams* p, int rows, int C) {
    size_t m = (size_t)rows * C;
    real d = (real)(FLOATER_DT / FLOATER_SUBSTEPS);
    for (int s = 0; s < 4; s++) {
        real* Xs = X + s * m;
        for (size_t i = 0; i < m; i++) { Xs[i] = s == 0 ? y[i] : floater_stage_input(s, y[i], k[i], k[m + i], k[2 * m + i], d); }
        floater_dynamics(k + s * m, z + s * m, a, Xs, (real)floater_time(n, s), p, rows, C);
    }
    for (size_t i = 0; i < m; i++) { y[i] = floater_step_end(y[i], k[i], k[m + i], k[2 * m + i], k[3 * m + i], d); }
}

// floater_extend: the solution s up to position upto (exclusive), integrating on from its
// last position with its own parameters (position 0 is P0); each thread integrates a slice of
// the rows alone (the rows are independent ODEs), so the bits do not depend on the threads,
// and stops at their first position out of range (s->range: the first of any row's)
static void floater_extend(FloaterSolution* s, const GPT2* model, int upto) {
    if (upto <= s->n || s->range < upto) { return; }
    int R = 3 * model->config.num_layers, C = model->config.channels;
    size_t row = (size_t)R * C;
    if (upto > s->cap) {
        s->cap = upto > 2 * s->cap ? upto : 2 * s->cap;
        s->P = (real*)realloc(s->P, (size_t)s->cap * row * sizeof(real));
        if (s->P == NULL) { fatal("out of memory for floater's positions (%d of %zu values)", s->cap, row); }
    }
    FloaterParams p = floater_params(s->theta, model);
    if (s->n == 0) { memcpy(s->P, p.P0, row * sizeof(real)); s->n = 1; }
    int from = s->n, range = s->range;
    #pragma omp parallel reduction(min:range)
    {
        size_t r0, r1;
        thread_slice(R, &r0, &r1);
        int rows = (int)(r1 - r0);
        size_t m = (size_t)rows * C;
        real* work = (real*)calloc_check(14 * m + 1, sizeof(real));
        real *y = work, *k = y + m, *X = k + 4 * m, *z = X + 4 * m, *a = z + 4 * m;
        if (rows > 0) {
            memcpy(y, s->P + (size_t)(from - 1) * row + r0 * C, m * sizeof(real));
            for (int pos = from; pos < upto && pos < range; pos++) {
                for (int q = 0; q < FLOATER_SUBSTEPS; q++) { floater_rk_step(y, k, X, z, a, (long)(pos - 1) * FLOATER_SUBSTEPS + q, &p, rows, C); }
                memcpy(s->P + (size_t)pos * row + r0 * C, y, m * sizeof(real));
                for (size_t i = 0; i < m; i++) { if (!(fabs(y[i]) <= FLOATER_RANGE)) { range = pos; } } // NaN too
            }
        }
        free(work);
    }
    s->n = upto;
    s->range = range;
}

// makes s the solution of the model's current parameters (a copy of them, no position yet)
static void floater_resolve(FloaterSolution* s, const GPT2* model) {
    size_t n = floater_theta_len(model);
    if (s->theta == NULL) { s->theta = (real*)malloc_check(n * sizeof(real)); }
    memcpy(s->theta, model->params.floater_p0, n * sizeof(real));
    s->have = 1;
    s->n = 0;
    s->range = INT32_MAX;
}

// is s the solution of the model's current parameters?
static int floater_current(const FloaterSolution* s, const GPT2* model) {
    return s->have && memcmp(s->theta, model->params.floater_p0, floater_theta_len(model) * sizeof(real)) == 0;
}

// The positions of a pass over positions [0, span): a training pass's the refresh's
// (floater_refresh_due), an evaluation's those of the current parameters; refused beyond their range
static void floater_positions(GPT2* model, int span) {
    struct PEState* st = floater_state(model);
    if (model->training) {
        FloaterSolution* s = &st->train;
        if (floater_refresh_due(s->have, floater_current(s, model), st->age, model->config.floater_refresh)) {
            floater_resolve(s, model);
            st->age = 0;
        }
        st->grad = floater_current(s, model);
        st->use = s;
    } else {
        if (!floater_current(&st->eval, model)) { floater_resolve(&st->eval, model); }
        st->use = &st->eval;
    }
    floater_extend((FloaterSolution*)st->use, model, span);
    if (span > st->use->range) {
        fatal("PE floater cannot take position %d: its positions' ODE leaves +-2^56 at position %d", span - 1, st->use->range);
    }
}

// the positions an evaluation over T tokens needs (randomized ones: their range) within the range of
// the current parameters' solution (solved as far)
#define PE_REACH
static int pe_reach(GPT2* model, int T) {
    struct PEState* st = floater_state(model);
    int span = rp_active(model) && model->config.rp_len > T ? model->config.rp_len : T;
    if (!floater_current(&st->eval, model)) { floater_resolve(&st->eval, model); }
    floater_extend(&st->eval, model, span);
    return span <= st->eval.range;
}

#define PE_LAYER
// adds the vectors of layer l at the tokens' positions to q, k and v (the pass's positions,
// made at layer 0)
static void pe_layer_forward(GPT2* model, int l, int B, int T) {
    int C = model->config.channels, R = 3 * model->config.num_layers;
    if (l == 0) { floater_positions(model, model->pos_span); }
    const real* P = model->pe_state->use->P;
    real* qkv = model->acts.t.qkv + layer_slot(model, l) * model->acts_N * 3 * C;
    const int* pos = pe_positions(model, 0);
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const real* v = P + ((size_t)pos[bt] * R + 3 * l) * C; // q, k, v of layer l: 3C consecutive
        real* x = qkv + (size_t)bt * 3 * C;
        for (int c = 0; c < 3 * C; c++) { x[c] += v[c]; }
    }
}

// floater_dynamics_backward: from dk (n, C), the gradient of h(t, x) at the stage input x with
// hidden pre-activation z: the parameters' gradients added into g (dW1, db1, dW2, db2, laid out
// as theta's MLP part), dx (n, C) written; da (n, C) scratch
static void floater_dynamics_backward(real* dx, real* da, const real* dk, const real* x, const real* z, real t, const FloaterParams* p,
                                      const FloaterParams* g, int n, int C) {
    real *dW1 = (real*)g->W1, *db1 = (real*)g->b1, *dW2 = (real*)g->W2, *db2 = (real*)g->b2;
    memset(da, 0, (size_t)n * C * sizeof(real));
    for (int r = 0; r < n; r++) {
        const real* g2 = dk + (size_t)r * C;
        const real* zr = z + (size_t)r * C;
        real* dar = da + (size_t)r * C;
        real* dxr = dx + (size_t)r * C;
        for (int j = 0; j < C; j++) { dxr[j] = zr[j] > 0 ? zr[j] : 0; } // a = relu(z), until dx is made
        for (int o = 0; o < C; o++) { // the second layer: k = W2 [a; t] + b2
            real* dw = dW2 + (size_t)o * (C + 1);
            const real* w = p->W2 + (size_t)o * (C + 1);
            for (int j = 0; j < C; j++) { dw[j] += g2[o] * dxr[j]; dar[j] += g2[o] * w[j]; }
            dw[C] += g2[o] * t;
            db2[o] += g2[o];
        }
        for (int j = 0; j < C; j++) { dar[j] = zr[j] > 0 ? dar[j] : 0; } // now dz
        const real* xr = x + (size_t)r * C;
        memset(dxr, 0, C * sizeof(real));
        for (int o = 0; o < C; o++) { // the first layer: z = W1 [x; t] + b1
            real* dw = dW1 + (size_t)o * (C + 1);
            const real* w = p->W1 + (size_t)o * (C + 1);
            for (int j = 0; j < C; j++) { dw[j] += dar[o] * xr[j]; dxr[j] += dar[o] * w[j]; }
            dw[C] += dar[o] * t;
            db1[o] += dar[o];
        }
    }
}

// floater_backward: the gradient of the pass's positions dP (span, R, C) into the ODE's
// parameters' gradients, through the solver's steps (the discrete adjoint): walking the
// positions back, each interval's steps recomputed from the solution at its start, then
// their stages walked back. Each thread takes a slice of the rows (their adjoints are
// independent) with gradients of the MLP of its own, summed in thread order.
static void floater_backward(GPT2* model, const FloaterSolution* s, const real* dP, int span) {
    int R = 3 * model->config.num_layers, C = model->config.channels;
    size_t row = (size_t)R * C, mlp = floater_theta_len(model) - model->param_sizes[P_FLOATER_P0];
    FloaterParams p = floater_params(s->theta, model);
    int threads = omp_get_max_threads();
    real* partial = (real*)calloc_check((size_t)threads * mlp + 1, sizeof(real));
    real d = (real)(FLOATER_DT / FLOATER_SUBSTEPS);
    #pragma omp parallel
    {
        size_t r0, r1;
        thread_slice(R, &r0, &r1);
        int rows = (int)(r1 - r0);
        size_t m = (size_t)rows * C;
        real* mine = partial + (size_t)omp_get_thread_num() * mlp;
        FloaterParams g = {NULL, mine, mine + (size_t)C * (C + 1), mine + (size_t)C * (C + 1) + C, mine + 2 * (size_t)C * (C + 1) + C};
        real* work = (real*)calloc_check((size_t)(8 * FLOATER_SUBSTEPS + 13) * m + 1, sizeof(real));
        real *X = work, *z = X + 4 * FLOATER_SUBSTEPS * m, *y = z + 4 * FLOATER_SUBSTEPS * m, *k = y + m, *a = k + 4 * m;
        real *gy = a + m, *dk = gy + m, *dx = dk + 4 * m, *da = dx + m;
        if (rows > 0) {
            memcpy(gy, dP + (size_t)(span - 1) * row + r0 * C, m * sizeof(real));
            for (int pos = span - 1; pos >= 1; pos--) {
                memcpy(y, s->P + (size_t)(pos - 1) * row + r0 * C, m * sizeof(real));
                long n0 = (long)(pos - 1) * FLOATER_SUBSTEPS;
                for (int q = 0; q < FLOATER_SUBSTEPS; q++) {
                    floater_rk_step(y, k, X + 4 * q * m, z + 4 * q * m, a, n0 + q, &p, rows, C);
                }
                for (int q = FLOATER_SUBSTEPS - 1; q >= 0; q--) {
                    for (int j = 0; j < 4; j++) {
                        for (size_t i = 0; i < m; i++) { dk[j * m + i] = gy[i] * d * floater_weight(j); }
                    }
                    for (int st = 3; st >= 0; st--) { // gy: d(step end)/dy = 1, then each stage's input
                        floater_dynamics_backward(dx, da, dk + st * m, X + (4 * q + st) * m, z + (4 * q + st) * m,
                                                  (real)floater_time(n0 + q, st), &p, &g, rows, C);
                        for (size_t i = 0; i < m; i++) {
                            gy[i] += dx[i];
                            for (int j = 0; j < st; j++) { dk[j * m + i] += d * floater_tableau(st, j) * dx[i]; }
                        }
                    }
                }
                const real* direct = dP + (size_t)(pos - 1) * row + r0 * C;
                for (size_t i = 0; i < m; i++) { gy[i] += direct[i]; }
            }
            real* dP0 = model->grads.floater_p0 + r0 * C;
            for (size_t i = 0; i < m; i++) { dP0[i] += gy[i]; }
        }
        free(work);
    }
    real* dmlp = model->grads.floater_w1;
    for (int t = 0; t < threads; t++) {
        const real* part = partial + (size_t)t * mlp;
        for (size_t i = 0; i < mlp; i++) { dmlp[i] += part[i]; }
    }
    free(partial);
}

// the gradients of q, k and v of layer l summed into the pass's positions (layer L - 1 comes
// first: it clears them); after layer 0, through the ODE into its parameters. A pass on stale
// positions (not those of the current parameters) has no gradient there.
static void pe_layer_backward(GPT2* model, int l, int B, int T) {
    struct PEState* st = model->pe_state;
    if (!st->grad) { return; }
    int C = model->config.channels, L = model->config.num_layers, R = 3 * L, span = model->pos_span;
    size_t len = (size_t)span * R * C;
    if (l == L - 1) {
        if (st->dP_len < len) { free(st->dP); st->dP = (real*)malloc_check(len * sizeof(real)); st->dP_len = len; }
        memset(st->dP, 0, len * sizeof(real));
    }
    const real* dqkv = model->grads_acts.t.qkv + (size_t)l * model->acts_N * 3 * C;
    const int* pos = pe_positions(model, 0);
    #pragma omp parallel
    {
        size_t c0, c1; // each thread a slice of the 3C channels, the tokens in order
        thread_slice(3 * C, &c0, &c1);
        for (int bt = 0; bt < B * T; bt++) {
            real* dv = st->dP + ((size_t)pos[bt] * R + 3 * l) * C;
            for (size_t c = c0; c < c1; c++) { dv[c] += dqkv[(size_t)bt * 3 * C + c]; }
        }
    }
    if (l == 0) { floater_backward(model, st->use, st->dP, span); }
}

#define PE_AFTER_UPDATE
// the training positions are one update older
static void pe_after_update(GPT2* model) { floater_state(model)->age++; }

// the training state file's part (floater_resume_bytes): a resumed run integrates the same
// positions from the same parameters
#define PE_RESUME
static size_t pe_resume_bytes(const GPT2* model) { return floater_resume_bytes(floater_theta_len(model)); }
static void pe_resume_save(const GPT2* model, void* out) {
    const struct PEState* st = model->pe_state;
    int32_t head[2] = {st != NULL ? st->age : 0, st != NULL && st->train.have};
    memcpy(out, head, sizeof(head));
    float* theta = (float*)((char*)out + sizeof(head));
    for (size_t i = 0; i < floater_theta_len(model); i++) { theta[i] = head[1] ? (float)st->train.theta[i] : 0.0f; }
}
static void pe_resume_load(GPT2* model, const void* in) {
    struct PEState* st = floater_state(model);
    int32_t head[2];
    memcpy(head, in, sizeof(head));
    const float* theta = (const float*)((const char*)in + sizeof(head));
    st->age = head[0];
    st->train.n = 0;
    st->train.have = 0;
    if (!head[1]) { return; }
    floater_resolve(&st->train, model);
    for (size_t i = 0; i < floater_theta_len(model); i++) { st->train.theta[i] = theta[i]; }
}

#define PE_FREE
static void pe_free(GPT2* model) {
    struct PEState* st = model->pe_state;
    if (st == NULL) { return; }
    FloaterSolution* s[2] = {&st->train, &st->eval};
    for (int k = 0; k < 2; k++) { free(s[k]->theta); free(s[k]->P); }
    free(st->dP);
    free(st);
    model->pe_state = NULL;
}

#elif PE_PART == PE_PART_CUDA

#include "sinusoidal.h"

// The solver on the GPU, in fp32 from the kernels' copy of the parameters (floatX), as the CPU
// path's: one block per row of the state (the rows are independent ODEs) integrates it over
// every position a pass needs in one launch, a thread per 4 outputs of each Linear_t reading
// 4 consecutive weights at once from copies made with the solution's copy of the parameters
// (transposed for the forward, without the time column for the backward: coalesced and
// aligned); the backward walks the positions back a chunk of intervals a launch (each
// interval's 5 steps recomputed, the stages' inputs, pre-activations and gradients kept in a
// tape of FLOATER_TAPE_BYTES at most), and a second launch sums the chunk's parameter gradients
// over the intervals, rows and stages in a fixed order (no atomics), a 4 x 4 tile of each
// weight matrix a thread. C is a multiple of 4 (of the heads' 32).
#define FLOATER_MAX_THREADS 256
#define FLOATER_EVALS (4 * FLOATER_SUBSTEPS) // h evaluations of an interval
#define FLOATER_TILE 4

// a block's threads: C rounded up to a warp, at most FLOATER_MAX_THREADS
static int floater_threads(int C) { int t = CEIL_DIV(C, WARP_SIZE) * WARP_SIZE; return t < FLOATER_MAX_THREADS ? t : FLOATER_MAX_THREADS; }

// a solution: positions 0..n-1 of the parameters theta (the device's span of the encoding's
// tensors, P0 to b2 with the layout's gaps, a copy of the kernels' floatX parameters)
struct FloaterSolution {
    floatX* theta;
    floatX* wt; // W1, W2 of theta transposed ((C + 1, C) each), then without their time column ((C, C) each)
    int have;
    float* P; // (cap, R, C)
    int n, cap;
    int range; // the first position out of range (FLOATER_RANGE) among those solved; INT32_MAX: none
};
struct PEState {
    FloaterSolution train, eval; // a training pass's (the refresh's), an evaluation's
    int age;                     // updates since `train` was solved
    int grad;                    // the last training pass's positions are the current parameters'
    const FloaterSolution* use;  // the last pass's positions
    float* dP;                   // (span, R, C) the last pass's gradient of its positions
    size_t dP_len;
    float* work;                 // (R, floater_row_work) the rows' workspaces
    size_t work_len;
    int* flag;                   // (1 + R) the parameters differ from a copy; each row's first position out of range
};
// a row's workspace of C-vectors: in the forward y, k (4), X, z, a; in the backward y, k (4), a, gy,
// dk (4), dX, da, then from FLOATER_TAPE on the tape of a chunk's intervals: of each interval's
// stages X, z, dk, dz (FLOATER_INTERVAL vectors an interval)
#define FLOATER_TAPE 13
#define FLOATER_INTERVAL (4 * FLOATER_EVALS)
#define FLOATER_TAPE_BYTES (64 << 20) // the backward's tapes of the rows, at most: the intervals a launch
// the floats of a row's workspace with a tape of `chunk` intervals
static size_t floater_row_work(int C, int chunk) { return (FLOATER_TAPE + (size_t)chunk * FLOATER_INTERVAL) * C; }

// the ODE's pieces in a solution's copy of the device's span of the tensors, and its copies of W1, W2
struct FloaterDevParams { const floatX *P0, *W1, *b1, *W2, *b2, *W1T, *W2T, *W1N, *W2N; };
static FloaterDevParams floater_dev_params(const FloaterSolution* s, const GPT2* model) {
    const size_t* at = model->param_offsets;
    const floatX* theta = s->theta;
    size_t C = model->config.channels, n = (C + 1) * C;
    return {theta, theta + (at[P_FLOATER_W1] - at[P_FLOATER_P0]), theta + (at[P_FLOATER_B1] - at[P_FLOATER_P0]),
            theta + (at[P_FLOATER_W2] - at[P_FLOATER_P0]), theta + (at[P_FLOATER_B2] - at[P_FLOATER_P0]),
            s->wt, s->wt + n, s->wt + 2 * n, s->wt + 2 * n + C * C};
}
// the length of the device's span of the encoding's tensors (P0 to b2, with the layout's gaps)
static size_t floater_span_len(const GPT2* model) {
    return model->param_offsets[P_FLOATER_B2] + model->param_sizes[P_FLOATER_B2] - model->param_offsets[P_FLOATER_P0];
}

// 4 consecutive values at p (aligned to 4 of them) in one load
template<class T>
__device__ __forceinline__ float4 floater_load4(const T* p) {
    struct alignas(4 * sizeof(T)) Four { T v[4]; };
    Four w = *reinterpret_cast<const Four*>(p);
    return make_float4((float)w.v[0], (float)w.v[1], (float)w.v[2], (float)w.v[3]);
}
// a += s v, elementwise
__device__ __forceinline__ void floater_fma4(float4& a, float s, float4 v) { a.x += s * v.x; a.y += s * v.y; a.z += s * v.z; a.w += s * v.w; }

// out (C) = sum_k M[k][o] x[k] (+ M[C][o] t + b[o], bias: the forward's last row and bias) for
// x (C) of the block, M (rows, C) row-major: a thread per 4 outputs
__device__ void floater_matvec_row(float* out, const float* x, const floatX* M, const floatX* b, float t, int C, bool bias) {
    for (int o0 = 4 * threadIdx.x; o0 < C; o0 += 4 * blockDim.x) {
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int k = 0; k < C; k++) { floater_fma4(acc, x[k], floater_load4(M + (size_t)k * C + o0)); }
        if (bias) {
            floater_fma4(acc, t, floater_load4(M + (size_t)C * C + o0));
            floater_fma4(acc, 1.0f, floater_load4(b + o0));
        }
        *reinterpret_cast<float4*>(out + o0) = acc;
    }
}

// RK step n on the block's row y (C): the stages into k (4C), their inputs into X and their
// hidden pre-activations into z (C each per stage: stride `stride` between stages; 0: one
// slot reused), a (C) scratch
__device__ void floater_rk_step_row(float* y, float* k, float* X, float* z, float* a, long n, const FloaterDevParams* p, int C,
                                    int stride) {
    float d = (float)(FLOATER_DT / FLOATER_SUBSTEPS);
    for (int s = 0; s < 4; s++) {
        float* Xs = X + s * stride;
        for (int i = threadIdx.x; i < C; i += blockDim.x) {
            Xs[i] = s == 0 ? y[i] : floater_stage_input(s, y[i], k[i], k[C + i], k[2 * C + i], d);
        }
        __syncthreads();
        float t = (float)floater_time(n, s);
        floater_matvec_row(z + s * stride, Xs, p->W1T, p->b1, t, C, true);
        __syncthreads();
        for (int i = threadIdx.x; i < C; i += blockDim.x) { float v = z[s * stride + i]; a[i] = v > 0.0f ? v : 0.0f; }
        __syncthreads();
        floater_matvec_row(k + s * C, a, p->W2T, p->b2, t, C, true);
        __syncthreads();
    }
    for (int i = threadIdx.x; i < C; i += blockDim.x) { y[i] = floater_step_end(y[i], k[i], k[C + i], k[2 * C + i], k[3 * C + i], d); }
    __syncthreads();
}

// floater_extend_kernel: block r integrates row r from position from - 1 (P0 at from = 0) to
// upto - 1, each position's state into P (positions, R, C), and stops at its first position out
// of range, written to range[r] (INT32_MAX: none)
__global__ void floater_extend_kernel(float* P, int* range, float* work, size_t row_work, FloaterDevParams p, int from, int upto, int R,
                                      int C) {
    int r = blockIdx.x;
    float* y = work + r * row_work;
    float *k = y + C, *X = k + 4 * C, *z = X + C, *a = z + C; // a one-slot tape
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        y[i] = from == 0 ? (float)p.P0[(size_t)r * C + i] : P[((size_t)(from - 1) * R + r) * C + i];
        if (from == 0) { P[(size_t)r * C + i] = y[i]; }
    }
    __syncthreads();
    int first = INT32_MAX;
    for (int pos = from > 0 ? from : 1; pos < upto; pos++) {
        for (int q = 0; q < FLOATER_SUBSTEPS; q++) { floater_rk_step_row(y, k, X, z, a, (long)(pos - 1) * FLOATER_SUBSTEPS + q, &p, C, 0); }
        float out = 0.0f;
        for (int i = threadIdx.x; i < C; i += blockDim.x) {
            P[((size_t)pos * R + r) * C + i] = y[i];
            out += fabsf(y[i]) <= (float)FLOATER_RANGE ? 0.0f : 1.0f; // NaN too
        }
        if (block_sum(out) > 0.0f) { first = pos; break; }
    }
    if (threadIdx.x == 0) { range[r] = first; }
}

// floater_backward_kernel: block r walks its row's adjoint gy back over the intervals from
// position hi down to lo (the interval of position pos: from pos - 1 to pos, its steps
// recomputed from P[pos - 1], the stages' inputs X, pre-activations z, and gradients dk, dz kept
// in tape slot hi - pos for floater_param_backward_kernel), starting from dP[hi] (first) or the
// adjoint of the launch before, adding dP[pos - 1] after each; at position 0 the adjoint is P0's
// gradient (hi = lo = 0: a pass over position 0 alone)
__global__ void floater_backward_kernel(float* dP0, float* work, size_t row_work, const float* P, const float* dP, FloaterDevParams p, int hi,
                                        int lo, int first, int R, int C) {
    int r = blockIdx.x;
    float* y = work + r * row_work;
    float *k = y + C, *a = k + 4 * C, *gy = a + C, *dk = gy + C, *dX = dk + 4 * C, *da = dX + C;
    float d = (float)(FLOATER_DT / FLOATER_SUBSTEPS);
    for (int i = threadIdx.x; i < C && first; i += blockDim.x) { gy[i] = dP[((size_t)hi * R + r) * C + i]; }
    for (int pos = hi; pos >= 1 && pos >= lo; pos--) {
        float* tape = y + (FLOATER_TAPE + (size_t)(hi - pos) * FLOATER_INTERVAL) * C;
        for (int i = threadIdx.x; i < C; i += blockDim.x) { y[i] = P[((size_t)(pos - 1) * R + r) * C + i]; }
        __syncthreads();
        long n0 = (long)(pos - 1) * FLOATER_SUBSTEPS;
        for (int q = 0; q < FLOATER_SUBSTEPS; q++) { // tape[(e * 4 + 0..3) C]: X, z, dk, dz of evaluation e = 4 q + s
            floater_rk_step_row(y, k, tape + (size_t)16 * q * C, tape + (size_t)(16 * q + 1) * C, a, n0 + q, &p, C, 4 * C);
        }
        for (int q = FLOATER_SUBSTEPS - 1; q >= 0; q--) {
            for (int i = threadIdx.x; i < C; i += blockDim.x) {
                for (int j = 0; j < 4; j++) { dk[j * C + i] = gy[i] * d * floater_weight(j); }
            }
            __syncthreads();
            for (int s = 3; s >= 0; s--) {
                float* e = tape + (size_t)(4 * (4 * q + s)) * C; // X, z, dk, dz of this stage
                for (int i = threadIdx.x; i < C; i += blockDim.x) { e[2 * C + i] = dk[s * C + i]; }
                __syncthreads();
                floater_matvec_row(da, e + 2 * C, p.W2N, NULL, 0.0f, C, false); // W2[:, :C]^T dk
                __syncthreads();
                for (int i = threadIdx.x; i < C; i += blockDim.x) { // dz = relu'(z) da
                    da[i] = e[C + i] > 0.0f ? da[i] : 0.0f;
                    e[3 * C + i] = da[i];
                }
                __syncthreads();
                floater_matvec_row(dX, da, p.W1N, NULL, 0.0f, C, false); // dX = W1[:, :C]^T dz
                __syncthreads();
                for (int i = threadIdx.x; i < C; i += blockDim.x) {
                    gy[i] += dX[i];
                    for (int j = 0; j < s; j++) { dk[j * C + i] += d * floater_tableau(s, j) * dX[i]; }
                }
                __syncthreads();
            }
        }
        for (int i = threadIdx.x; i < C; i += blockDim.x) { gy[i] += dP[((size_t)(pos - 1) * R + r) * C + i]; }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < C && lo <= 1; i += blockDim.x) { dP0[(size_t)r * C + i] += gy[i]; }
}

// floater_param_backward_kernel: one thread per (layer m of the MLP, a tile of 4 outputs o and 4
// columns k of [W | b]): the gradients of W_m[o][k] (k < C: the input, C: the time) and of
// b_m[o] (k = C + 1) of the intervals of positions hi down to lo, summed over the intervals, the
// rows and the stages (evaluations e of RK step 5 (pos - 1) + e / 4) in order
__global__ void floater_param_backward_kernel(float* dW1, float* db1, float* dW2, float* db2, const float* work, size_t row_work, int hi,
                                              int lo, int R, int C) {
    int tiles_o = CEIL_DIV(C, FLOATER_TILE), tiles_k = CEIL_DIV(C + 2, FLOATER_TILE);
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= 2 * tiles_o * tiles_k) { return; }
    int m = idx / (tiles_o * tiles_k), o0 = idx / tiles_k % tiles_o * FLOATER_TILE, k0 = idx % tiles_k * FLOATER_TILE;
    float4 acc[FLOATER_TILE] = {}; // acc[i]: output o0 + i, columns k0..k0 + 3
    for (int pos = hi; pos >= lo; pos--)
    for (int r = 0; r < R; r++) {
        const float* tape = work + r * row_work + (FLOATER_TAPE + (size_t)(hi - pos) * FLOATER_INTERVAL) * C;
        long n0 = (long)(pos - 1) * FLOATER_SUBSTEPS;
        for (int e = 0; e < FLOATER_EVALS; e++) {
            const float* ev = tape + (size_t)4 * e * C; // X, z, dk, dz
            float4 g = floater_load4(ev + (m == 0 ? 3 : 2) * C + o0), in;
            if (k0 < C) { // the inputs X, or the hidden activations relu(z)
                in = floater_load4(ev + (m == 0 ? 0 : C) + k0);
                if (m == 1) { in = make_float4(fmaxf(in.x, 0.0f), fmaxf(in.y, 0.0f), fmaxf(in.z, 0.0f), fmaxf(in.w, 0.0f)); }
            } else { // the time, the bias
                in = make_float4((float)floater_time(n0 + e / 4, e % 4), 1.0f, 0.0f, 0.0f);
            }
            floater_fma4(acc[0], g.x, in);
            floater_fma4(acc[1], g.y, in);
            floater_fma4(acc[2], g.z, in);
            floater_fma4(acc[3], g.w, in);
        }
    }
    float* dW = m == 0 ? dW1 : dW2;
    float* db = m == 0 ? db1 : db2;
    for (int i = 0; i < FLOATER_TILE; i++) {
        const float v[4] = {acc[i].x, acc[i].y, acc[i].z, acc[i].w};
        for (int j = 0; j < FLOATER_TILE && k0 + j < C + 2; j++) {
            if (k0 + j <= C) { dW[(size_t)(o0 + i) * (C + 1) + k0 + j] += v[j]; } else { db[o0 + i] += v[j]; }
        }
    }
}

// floater_weights_kernel: a solution's copies of W1, W2 (C, C + 1), a thread per element: transposed
// (wt: (C + 1, C) each), then without their time column ((C, C) each)
__global__ void floater_weights_kernel(floatX* wt, const floatX* W1, const floatX* W2, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x, n = (size_t)C * (C + 1);
    if (idx >= 2 * n) { return; }
    const floatX* W = idx < n ? W1 : W2;
    size_t e = idx % n, o = e / (C + 1), k = e % (C + 1), m = idx / n;
    wt[m * n + k * C + o] = W[e];
    if (k < (size_t)C) { wt[2 * n + m * C * C + o * C + k] = W[e]; }
}

// floater_qkv_forward_kernel: one thread per (token, channel of q, k, v): adds the vector of
// layer l at the token's position (pos (B, T); NULL: its index)
__global__ void floater_qkv_forward_kernel(floatX* qkv, const float* P, const int* pos, int N, int T, int R, int C, int l) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * 3 * C) { return; }
    size_t bt = idx / (3 * C);
    int c = (int)(idx % (3 * C)), t = pos != NULL ? pos[bt] : (int)(bt % T);
    qkv[idx] = (floatX)((float)qkv[idx] + P[((size_t)t * R + 3 * l) * C + c]);
}

// floater_qkv_backward_kernel: one thread per (position p < span, channel of q, k, v): dP of
// layer l at p = the sum of the tokens' dqkv at p, the rows in order and within a row the tokens
// at p (their positions never decrease along a row: a binary search), as the CPU path sums them
__global__ void floater_qkv_backward_kernel(float* dP, const floatX* dqkv, const int* pos, int B, int T, int span, int R, int C, int l) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)span * 3 * C) { return; }
    int p = (int)(idx / (3 * C)), c = (int)(idx % (3 * C));
    float acc = 0.0f;
    for (int b = 0; b < B; b++) {
        int lo = p, hi = p + 1; // the indices: the token at t = p
        if (pos != NULL) {
            const int* row = pos + (size_t)b * T;
            int a = 0, z = T;
            while (a < z) { int mid = (a + z) / 2; if (row[mid] < p) { a = mid + 1; } else { z = mid; } }
            lo = a;
            for (hi = lo; hi < T && row[hi] == p; hi++) {}
        }
        for (int t = lo; t < hi && t < T; t++) { acc += (float)dqkv[((size_t)b * T + t) * 3 * C + c]; }
    }
    dP[((size_t)p * R + 3 * l) * C + c] = acc;
}

// floater_differs_kernel: flag counts the bytes where two byte arrays differ
__global__ void floater_differs_kernel(int* flag, const unsigned char* a, const unsigned char* b, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && a[i] != b[i]) { atomicAdd(flag, 1); }
}

static struct PEState* floater_state(GPT2* model) {
    if (model->pe_state == NULL) {
        model->pe_state = (struct PEState*)calloc_check(1, sizeof(struct PEState));
        model->pe_state->flag = (int*)cuda_malloc((1 + 3 * (size_t)model->config.num_layers) * sizeof(int), "floater's flags");
    }
    return model->pe_state;
}

// the rows' workspaces, with a tape of `chunk` intervals at least
static float* floater_work(GPT2* model, int chunk) {
    struct PEState* st = model->pe_state;
    size_t len = 3 * (size_t)model->config.num_layers * floater_row_work(model->config.channels, chunk);
    if (st->work_len < len) {
        cudaCheck(cudaStreamSynchronize(ctx.stream));
        cuda_free(&st->work);
        st->work = (float*)cuda_malloc(len * sizeof(float), "floater's solver workspace");
        cudaCheck(cudaMemset(st->work, 0, len * sizeof(float)));
        st->work_len = len;
    }
    return st->work;
}

// is s the solution of the model's current parameters (their bits)?
static int floater_current(GPT2* model, const FloaterSolution* s) {
    if (!s->have) { return 0; }
    size_t bytes = floater_span_len(model) * sizeof(floatX);
    int* flag = model->pe_state->flag;
    cudaCheck(cudaMemsetAsync(flag, 0, sizeof(int), ctx.stream));
    floater_differs_kernel<<<CEIL_DIV(bytes, 256), 256, 0, ctx.stream>>>(flag, (const unsigned char*)s->theta,
        (const unsigned char*)model->params.floater_p0, bytes);
    cudaCheckLaunch("floater_differs_kernel");
    int differs;
    cudaCheck(cudaMemcpyAsync(&differs, flag, sizeof(int), cudaMemcpyDeviceToHost, ctx.stream));
    cudaCheck(cudaStreamSynchronize(ctx.stream));
    return !differs;
}

// makes s the solution of the parameters theta (device; NULL: the model's), no position yet
static void floater_resolve(GPT2* model, FloaterSolution* s, const floatX* theta) {
    size_t n = floater_span_len(model), C = model->config.channels;
    if (s->theta == NULL) {
        s->theta = (floatX*)cuda_malloc(n * sizeof(floatX), "floater's parameters of a solution");
        s->wt = (floatX*)cuda_malloc(2 * (2 * C + 1) * C * sizeof(floatX), "floater's copies of its weights");
    }
    cudaCheck(cudaMemcpyAsync(s->theta, theta != NULL ? theta : model->params.floater_p0, n * sizeof(floatX), cudaMemcpyDeviceToDevice,
                              ctx.stream));
    FloaterDevParams p = floater_dev_params(s, model);
    floater_weights_kernel<<<CEIL_DIV(2 * (C + 1) * C, 256), 256, 0, ctx.stream>>>(s->wt, p.W1, p.W2, (int)C);
    cudaCheckLaunch("floater_weights_kernel");
    s->have = 1;
    s->n = 0;
    s->range = INT32_MAX;
}

// s up to position upto (exclusive), integrating on from its last position with its own
// parameters, each row as far as its range (s->range: the first of any row's)
static void floater_extend(GPT2* model, FloaterSolution* s, int upto) {
    if (upto <= s->n || s->range < upto) { return; }
    int R = 3 * model->config.num_layers, C = model->config.channels;
    size_t row = (size_t)R * C;
    if (upto > s->cap) {
        int cap = upto > 2 * s->cap ? upto : 2 * s->cap;
        float* grown = (float*)cuda_malloc((size_t)cap * row * sizeof(float), "floater's positions");
        if (s->n > 0) { cudaCheck(cudaMemcpyAsync(grown, s->P, (size_t)s->n * row * sizeof(float), cudaMemcpyDeviceToDevice, ctx.stream)); }
        cudaCheck(cudaStreamSynchronize(ctx.stream));
        cuda_free(&s->P);
        s->P = grown;
        s->cap = cap;
    }
    int* range = model->pe_state->flag + 1;
    float* work = floater_work(model, 0);
    floater_extend_kernel<<<R, floater_threads(C), 0, ctx.stream>>>(s->P, range, work, floater_row_work(C, 0), floater_dev_params(s, model),
                                                                      s->n, upto, R, C);
    cudaCheckLaunch("floater_extend_kernel");
    int* rows = (int*)malloc_check(R * sizeof(int));
    cudaCheck(cudaMemcpyAsync(rows, range, R * sizeof(int), cudaMemcpyDeviceToHost, ctx.stream));
    cudaCheck(cudaStreamSynchronize(ctx.stream));
    for (int r = 0; r < R; r++) { s->range = rows[r] < s->range ? rows[r] : s->range; }
    free(rows);
    s->n = upto;
}

// the positions of a pass over [0, span) (the CPU path's floater_positions)
static void floater_positions(GPT2* model, int span) {
    struct PEState* st = floater_state(model);
    FloaterSolution* s = model->training ? &st->train : &st->eval;
    int current = floater_current(model, s);
    if (model->training ? floater_refresh_due(s->have, current, st->age, model->config.floater_refresh) : !current) {
        floater_resolve(model, s, NULL);
        if (model->training) { st->age = 0; }
        current = 1;
    }
    st->grad = model->training && current;
    st->use = s;
    floater_extend(model, s, span);
    if (span > s->range) {
        fatal("PE floater cannot take position %d: its positions' ODE leaves +-2^56 at position %d", span - 1, s->range);
    }
}

// the CPU path's pe_reach: an evaluation over T tokens within the current parameters' range
#define PE_REACH
static int pe_reach(GPT2* model, int T) {
    struct PEState* st = floater_state(model);
    int span = rp_active(model) && model->config.rp_len > T ? model->config.rp_len : T;
    if (!floater_current(model, &st->eval)) { floater_resolve(model, &st->eval, NULL); }
    floater_extend(model, &st->eval, span);
    return span <= st->eval.range;
}

#define PE_LAYER
static void pe_layer_forward(GPT2* model, int l, int B, int T) {
    int C = model->config.channels, R = 3 * model->config.num_layers;
    if (l == 0) { floater_positions(model, model->pos_span); }
    floatX* qkv = model->acts.qkv + layer_slot(model, l) * model->acts_N * 3 * C;
    size_t n = (size_t)B * T * 3 * C;
    floater_qkv_forward_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(qkv, model->pe_state->use->P, pe_positions(model, 0), B * T, T, R, C, l);
    cudaCheckLaunch("floater_qkv_forward_kernel");
}

// the gradients of q, k and v of layer l into the pass's positions; after layer 0, through the
// ODE into its parameters; a pass on stale positions has no gradient there
static void pe_layer_backward(GPT2* model, int l, int B, int T) {
    struct PEState* st = model->pe_state;
    if (!st->grad) { return; }
    int C = model->config.channels, R = 3 * model->config.num_layers, span = model->pos_span;
    size_t len = (size_t)span * R * C;
    if (st->dP_len < len) {
        cudaCheck(cudaStreamSynchronize(ctx.stream));
        cuda_free(&st->dP);
        st->dP = (float*)cuda_malloc(len * sizeof(float), "floater's position gradients");
        st->dP_len = len;
    }
    size_t n = (size_t)span * 3 * C;
    floater_qkv_backward_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(st->dP, model->gs.dbig, pe_positions(model, 0), B, T, span, R, C, l);
    cudaCheckLaunch("floater_qkv_backward_kernel");
    if (l != 0) { return; }
    const FloaterSolution* s = st->use;
    FloaterDevParams p = floater_dev_params(s, model);
    size_t per = (size_t)R * FLOATER_INTERVAL * C * sizeof(float); // an interval's tape of every row
    int chunk = (int)(FLOATER_TAPE_BYTES / per > 1 ? FLOATER_TAPE_BYTES / per : 1);
    chunk = chunk < span - 1 ? chunk : (span > 1 ? span - 1 : 1);
    float* work = floater_work(model, chunk);
    size_t row_work = floater_row_work(C, chunk);
    TensorSet<float> g = model->grads;
    size_t threads = 2 * (size_t)CEIL_DIV(C, FLOATER_TILE) * CEIL_DIV(C + 2, FLOATER_TILE);
    for (int hi = span - 1, lo; hi >= 0; hi = lo - 1) { // the intervals of positions hi down to lo, position 0's own at the end
        lo = hi - chunk + 1 > 1 ? hi - chunk + 1 : (hi > 0 ? 1 : 0);
        floater_backward_kernel<<<R, floater_threads(C), 0, ctx.stream>>>(g.floater_p0, work, row_work, s->P, st->dP, p, hi, lo,
                                                                            hi == span - 1, R, C);
        cudaCheckLaunch("floater_backward_kernel");
        if (hi >= 1) {
            floater_param_backward_kernel<<<CEIL_DIV(threads, 128), 128, 0, ctx.stream>>>(g.floater_w1, g.floater_b1, g.floater_w2,
                                                                                         g.floater_b2, work, row_work, hi, lo, R, C);
            cudaCheckLaunch("floater_param_backward_kernel");
        }
        if (lo <= 1) { break; }
    }
}

#define PE_AFTER_UPDATE
static void pe_after_update(GPT2* model) { floater_state(model)->age++; }

// the training state file's part (floater_resume_bytes): theta in checkpoint order, fp32
#define PE_RESUME
static size_t pe_resume_bytes(const GPT2* model) {
    size_t n = 0;
    for (int k = P_FLOATER_P0; k <= P_FLOATER_B2; k++) { n += model->param_sizes[k]; }
    return floater_resume_bytes(n);
}
static void pe_resume_save(const GPT2* model, void* out) {
    const struct PEState* st = model->pe_state;
    int32_t head[2] = {st != NULL ? st->age : 0, st != NULL && st->train.have};
    memcpy(out, head, sizeof(head));
    float* theta = (float*)((char*)out + sizeof(head));
    size_t span = floater_span_len(model), at = 0;
    floatX* host = (floatX*)calloc_check(span, sizeof(floatX));
    if (head[1]) { cudaCheck(cudaMemcpy(host, st->train.theta, span * sizeof(floatX), cudaMemcpyDeviceToHost)); }
    for (int k = P_FLOATER_P0; k <= P_FLOATER_B2; k++) {
        size_t off = model->param_offsets[k] - model->param_offsets[P_FLOATER_P0];
        for (size_t i = 0; i < model->param_sizes[k]; i++) { theta[at++] = (float)host[off + i]; }
    }
    free(host);
}
static void pe_resume_load(GPT2* model, const void* in) {
    struct PEState* st = floater_state(model);
    int32_t head[2];
    memcpy(head, in, sizeof(head));
    st->age = head[0];
    st->train.have = 0;
    st->train.n = 0;
    if (!head[1]) { return; }
    const float* saved = (const float*)((const char*)in + sizeof(head));
    size_t span = floater_span_len(model), at = 0;
    floatX* host = (floatX*)calloc_check(span, sizeof(floatX));
    for (int k = P_FLOATER_P0; k <= P_FLOATER_B2; k++) {
        size_t off = model->param_offsets[k] - model->param_offsets[P_FLOATER_P0];
        for (size_t i = 0; i < model->param_sizes[k]; i++) { host[off + i] = (floatX)saved[at++]; }
    }
    floatX* theta = (floatX*)cuda_malloc(span * sizeof(floatX), "floater's resumed parameters");
    cudaCheck(cudaMemcpy(theta, host, span * sizeof(floatX), cudaMemcpyHostToDevice));
    floater_resolve(model, &st->train, theta);
    cudaCheck(cudaStreamSynchronize(ctx.stream));
    cuda_free(&theta);
    free(host);
}

#define PE_FREE
static void pe_free(GPT2* model) {
    struct PEState* st = model->pe_state;
    if (st == NULL) { return; }
    cudaCheck(cudaStreamSynchronize(ctx.stream));
    FloaterSolution* s[2] = {&st->train, &st->eval};
    for (int k = 0; k < 2; k++) { cuda_free(&s[k]->theta); cuda_free(&s[k]->wt); cuda_free(&s[k]->P); }
    cuda_free(&st->dP);
    cuda_free(&st->work);
    cuda_free(&st->flag);
    free(st);
    model->pe_state = NULL;
}

#elif PE_PART == PE_PART_TEST

#include "sinusoidal.h" // PE_REF_EMBED: fairseq's table

// The definition written out again in double, independently of the solver: the rows of P at
// positions 0..n-1 (n, R, C) of the model's parameters, Kutta's 3/8 rule as its Butcher tableau
// (c = 0, 1/3, 2/3, 1; a = 1/3 | -1/3, 1 | 1, -1, 1; b = 1/8, 3/8, 3/8, 1/8), 5 steps of 0.002 a
// position, h(s, x) = W2 [relu(W1 [x; s] + b1); s] + b2
static double* ref_floater_solve(const GPT2* model, int n) {
    int C = model->config.channels, R = 3 * model->config.num_layers;
    const double c[4] = {0, 1.0 / 3, 2.0 / 3, 1}, b[4] = {1.0 / 8, 3.0 / 8, 3.0 / 8, 1.0 / 8};
    const double a[4][3] = {{0, 0, 0}, {1.0 / 3, 0, 0}, {-1.0 / 3, 1, 0}, {1, -1, 1}};
    const double step = 0.01 / 5;
    const real *P0 = model->params.floater_p0, *W1 = model->params.floater_w1, *b1 = model->params.floater_b1;
    const real *W2 = model->params.floater_w2, *b2 = model->params.floater_b2;
    double* P = (double*)malloc_check((size_t)n * R * C * sizeof(double));
    double* y = (double*)malloc_check((size_t)7 * C * sizeof(double));
    double *k = y + C, *x = k + 4 * C, *hid = x + C;
    for (int r = 0; r < R; r++) {
        for (int i = 0; i < C; i++) { y[i] = P0[(size_t)r * C + i]; P[(size_t)r * C + i] = y[i]; }
        for (long m = 0; m < (long)(n - 1) * 5; m++) {
            for (int st = 0; st < 4; st++) {
                double s = (m + c[st]) * step;
                for (int i = 0; i < C; i++) {
                    x[i] = y[i];
                    for (int j = 0; j < st; j++) { x[i] += step * a[st][j] * k[j * C + i]; }
                }
                for (int o = 0; o < C; o++) {
                    double z = b1[o] + W1[(size_t)o * (C + 1) + C] * s;
                    for (int i = 0; i < C; i++) { z += W1[(size_t)o * (C + 1) + i] * x[i]; }
                    hid[o] = z > 0 ? z : 0;
                }
                for (int o = 0; o < C; o++) {
                    double h = b2[o] + W2[(size_t)o * (C + 1) + C] * s;
                    for (int i = 0; i < C; i++) { h += W2[(size_t)o * (C + 1) + i] * hid[i]; }
                    k[st * C + o] = h;
                }
            }
            for (int i = 0; i < C; i++) { y[i] += step * (b[0] * k[i] + b[1] * k[C + i] + b[2] * k[2 * C + i] + b[3] * k[3 * C + i]); }
            if (m % 5 == 4) { for (int i = 0; i < C; i++) { P[((size_t)(m / 5 + 1) * R + r) * C + i] = y[i]; } }
        }
    }
    free(y);
    return P;
}

// q, k, v of layer l of a token at position pos plus its vectors P_{l,q}, P_{l,k}, P_{l,v}
// from the reference solution (computed again whenever the parameters or the range change)
#define PE_REF_ROTATE
static void pe_ref_rotate(GPT2* model, int l, double* qkv, int pos, int T) {
    static double* ref = NULL;
    static real* key = NULL;
    static int n = 0;
    size_t len = floater_theta_len(model);
    int C = model->config.channels, R = 3 * model->config.num_layers;
    if (key == NULL || n != model->pos_span || memcmp(key, model->params.floater_p0, len * sizeof(real)) != 0) {
        free(ref);
        free(key);
        n = model->pos_span;
        ref = ref_floater_solve(model, n);
        key = (real*)malloc_check(len * sizeof(real));
        memcpy(key, model->params.floater_p0, len * sizeof(real));
    }
    for (int c = 0; c < 3 * C; c++) { qkv[c] += ref[((size_t)pos * R + 3 * l) * C + c]; }
}

// the tests' models: a refresh of 3, so that the CUDA path's AdamW steps are compared both
// on fresh positions and on stale ones
#define PE_TEST_CONFIG
static void pe_test_config(GPT2Config* cfg) { cfg->floater_refresh = 3; }

// the hidden units away from the ReLU's kink, where a finite difference straddles it: b1 =
// +-(0.5..1) and W1 within +-0.1 / sqrt(C), so |W1 [x; s]| stays below 0.1 for |x|, s <= 1
#define PE_TEST_PARAMS
static void pe_test_params(GPT2* model, uint64_t* rng) {
    int C = model->config.channels;
    for (int o = 0; o < C; o++) {
        real v = 0.5 + 0.5 * random_f32(rng);
        model->params.floater_b1[o] = random_f32(rng) < 0.5f ? -v : v;
    }
    for (size_t i = 0; i < (size_t)C * (C + 1); i++) { model->params.floater_w1[i] = (2 * random_f32(rng) - 1) * 0.1 / sqrt((double)C); }
}

// the largest difference between the solution in use and a function of (position, row, column)
typedef double (*FloaterExact)(const GPT2* model, int p, int r, int c);
static double floater_vs(const GPT2* model, int n, FloaterExact f, int relative) {
    int C = model->config.channels, R = 3 * model->config.num_layers;
    const real* P = model->pe_state->use->P;
    double worst = 0;
    for (int p = 0; p < n; p++) {
        for (int r = 0; r < R; r++) {
            for (int c = 0; c < C; c++) {
                double want = f(model, p, r, c), got = P[((size_t)p * R + r) * C + c];
                worst = fmax(worst, fabs(got - want) / (relative ? fabs(want) : 1));
            }
        }
    }
    return worst;
}
// h(s, x) = b2 + w s (W1 = 0, b1 = 0): P(s) = P0 + b2 s + w s^2 / 2, which the 3/8 rule integrates exactly
static double floater_quadratic(const GPT2* model, int p, int r, int c) {
    int C = model->config.channels;
    double s = p * 0.01;
    return model->params.floater_p0[(size_t)r * C + c] + model->params.floater_b2[c] * s + model->params.floater_w2[(size_t)c * (C + 1) + C] * s * s / 2;
}
// h(s, x) = -relu(x) (W1 = I, W2 = -I), P0 > 0: P(s) = P0 e^(-s)
static double floater_decay(const GPT2* model, int p, int r, int c) {
    return model->params.floater_p0[(size_t)r * model->config.channels + c] * exp(-p * 0.01);
}

// the ODE's parameters of a model set to zero (the dynamics; also P0 with p0)
static void floater_zero(GPT2* model, int p0) {
    size_t from = p0 ? 0 : model->param_sizes[P_FLOATER_P0];
    memset(model->params.floater_p0 + from, 0, (floater_theta_len(model) - from) * sizeof(real));
}

// the ODE's gradients (theta's) all zero?
static int floater_grads_zero(const GPT2* model) {
    for (size_t i = 0; i < floater_theta_len(model); i++) { if (model->grads.floater_p0[i] != 0) { return 0; } }
    return 1;
}

// a training pass (with its backward) over x, y; returns the loss
static double floater_train_pass(GPT2* model, const int* x, const int* y, int B, int T) {
    gpt2_zero_grad(model);
    gpt2_forward(model, x, y, B, T, 1);
    gpt2_backward(model);
    return model->mean_loss;
}

// The solver against exact solutions over 200 positions: a quadratic in s (h = b2 + w s), which
// the 3/8 rule integrates exactly, and e^(-s); its bits on one thread and on two
static void floater_test_solver(void) {
    enum { B = 1, N = 200 };
    GPT2 model;
    int x[B * N], y[B * N];
    tiny_model_batch(&model, N, 3, 5, x, y, B, N);
    int C = model.config.channels, R = 3 * model.config.num_layers;
    size_t row = (size_t)R * C;
    uint64_t rng = random_seed(31);
    floater_zero(&model, 0);
    for (int c = 0; c < C; c++) { model.params.floater_b2[c] = random_normal(&rng); model.params.floater_w2[(size_t)c * (C + 1) + C] = random_normal(&rng); }
    gpt2_forward(&model, x, NULL, B, N, 0);
    double err = floater_vs(&model, N, floater_quadratic, 0);
    check(err < 1e-5, "h = b2 + w s: P0 + b2 s + w s^2 / 2 at positions 0..199, max abs error", err, 1e-5);
    floater_zero(&model, 0);
    for (int c = 0; c < C; c++) {
        model.params.floater_w1[(size_t)c * (C + 1) + c] = 1;
        model.params.floater_w2[(size_t)c * (C + 1) + c] = -1;
    }
    for (size_t i = 0; i < row; i++) { model.params.floater_p0[i] = 0.5 + 0.5 * random_f32(&rng); }
    gpt2_forward(&model, x, NULL, B, N, 0);
    err = floater_vs(&model, N, floater_decay, 1);
    check(err < 1e-5, "h = -relu(x), P0 > 0: P0 e^(-s) at positions 0..199, max relative error", err, 1e-5);
    real* two = (real*)malloc_check((size_t)N * row * sizeof(real));
    memcpy(two, model.pe_state->use->P, (size_t)N * row * sizeof(real));
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    FloaterSolution one = {0};
    floater_resolve(&one, &model);
    floater_extend(&one, &model, N);
    omp_set_num_threads(threads);
    int same = memcmp(one.P, two, (size_t)N * row * sizeof(real)) == 0;
    check(same, "the solution on one thread and on all of them, bit for bit", !same, 0);
    free(one.theta); free(one.P); free(two);
    gpt2_free(&model);
}

// Zero dynamics: P0 at every position, bit for bit, and the model that of P0 folded into the
// qkv bias; with P0 = 0 too, q, k, v are the projection's, bit for bit: the sinusoidal model
// (whose embedding the forward test holds to fairseq's table)
static void floater_test_identities(void) {
    enum { B = 2, T = 16 };
    GPT2 model;
    int x[B * T], y[B * T];
    tiny_model_batch(&model, T, 4, 6, x, y, B, T);
    int C = model.config.channels, L = model.config.num_layers;
    size_t row = (size_t)3 * L * C;
    floater_zero(&model, 0);
    gpt2_forward(&model, x, y, B, T, 0);
    int same = 1;
    for (int p = 0; p < T; p++) { same &= memcmp(model.pe_state->use->P + p * row, model.params.floater_p0, row * sizeof(real)) == 0; }
    check(same, "zero dynamics: P0 at every position, bit for bit", !same, 0);
    double with_p0 = model.mean_loss;
    for (size_t i = 0; i < row; i++) { model.params.qkvb[i] += model.params.floater_p0[i]; } // (L, 3C) both
    floater_zero(&model, 1);
    gpt2_forward(&model, x, y, B, T, 1);
    double err = fabs(model.mean_loss - with_p0);
    check(err < 1e-6, "zero dynamics: the loss of P0 folded into the qkv bias", err, 1e-6);
    real* plain = (real*)malloc_check((size_t)B * T * 3 * C * sizeof(real));
    same = 1;
    for (int l = 0; l < L; l++) {
        matmul_forward(plain, model.acts.t.ln1 + (size_t)l * model.acts_N * C, model.params.qkvw + (size_t)l * 3 * C * C,
                       model.params.qkvb + (size_t)l * 3 * C, B * T, C, 3 * C);
        same &= memcmp(plain, model.acts.t.qkv + (size_t)l * model.acts_N * 3 * C, (size_t)B * T * 3 * C * sizeof(real)) == 0;
    }
    check(same, "zero dynamics, P0 = 0: q, k, v the projection's, bit for bit (sinusoidal)", !same, 0);
    free(plain);
    gpt2_free(&model);
}

// The refresh R = 3 over 7 updates: a training pass solves at updates 0, 3, 6 (the positions of
// the parameters then, bit for bit, and a gradient into the ODE), the passes between take the
// last solution (no gradient), an evaluation the current parameters', and parameters set
// without an update are solved again
static void floater_test_refresh(void) {
    enum { B = 2, T = 16 };
    GPT2 model;
    int x[B * T], y[B * T];
    tiny_model_batch(&model, T, 5, 7, x, y, B, T);
    model.config.floater_refresh = 3;
    size_t n = (size_t)T * 3 * model.config.num_layers * model.config.channels;
    real* last = (real*)malloc_check(n * sizeof(real));
    int right = 1;
    for (int u = 0; u < 7; u++) {
        floater_train_pass(&model, x, y, B, T);
        const FloaterSolution* train = &model.pe_state->train;
        int fresh = u % 3 == 0, moved = memcmp(last, train->P, n * sizeof(real)) != 0;
        int grads = !floater_grads_zero(&model);
        memcpy(last, train->P, n * sizeof(real));
        gpt2_forward(&model, x, y, B, T, 0); // an evaluation: the current parameters' positions
        int current = memcmp(model.pe_state->eval.P, train->P, n * sizeof(real)) == 0;
        right &= fresh == moved && fresh == grads && fresh == current;
        gpt2_update(&model, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, u + 1);
    }
    check(right, "R = 3: solved with a gradient at updates 0, 3, 6, stale and without one between", !right, 0);
    model.params.floater_b2[0] += 0.5f; // set one update after a solve: still the stale positions
    floater_train_pass(&model, x, y, B, T);
    right = model.pe_state->age == 1 && floater_grads_zero(&model);
    gpt2_update(&model, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 8);
    gpt2_update(&model, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 9);
    floater_train_pass(&model, x, y, B, T); // three updates: solved
    model.params.floater_b2[1] += 0.5f;      // set with no update since: solved again
    floater_train_pass(&model, x, y, B, T);
    right &= model.pe_state->age == 0 && !floater_grads_zero(&model) && floater_current(&model.pe_state->train, &model);
    check(right, "parameters set: stale one update after a solve, solved again with none since", !right, 0);
    free(last);
    gpt2_free(&model);
}

// A model loaded from a checkpoint with the training state's part (pe_resume_save, _load)
// continues with the same positions (the loss and gradients of its next training pass, bit
// for bit); one without it solves them from its parameters (another loss, a gradient into the ODE)
static void floater_test_resume(void) {
    enum { B = 2, T = 16 };
    GPT2 a, b, c;
    int x[B * T], y[B * T];
    tiny_model_batch(&a, T, 6, 8, x, y, B, T);
    a.config.floater_refresh = 3;
    for (int u = 0; u < 4; u++) { // solved at update 3, one update since
        floater_train_pass(&a, x, y, B, T);
        gpt2_update(&a, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, u + 1);
    }
    char path[300];
    snprintf(path, sizeof(path), "%s/floater_resume.bin", tmpdir);
    gpt2_save_checkpoint(&a, path);
    char* bytes = (char*)malloc_check(pe_resume_bytes(&a));
    pe_resume_save(&a, bytes);
    gpt2_build_from_checkpoint(&b, path);
    gpt2_build_from_checkpoint(&c, path);
    pe_resume_load(&b, bytes);
    double la = floater_train_pass(&a, x, y, B, T), lb = floater_train_pass(&b, x, y, B, T), lc = floater_train_pass(&c, x, y, B, T);
    int same = la == lb && memcmp(a.grads_memory, b.grads_memory, a.num_parameters * sizeof(real)) == 0 && floater_grads_zero(&b);
    check(same, "resumed with its state: the stale positions' loss and gradients, bit for bit", !same, 0);
    check(lc != la && !floater_grads_zero(&c), "loaded without it: its own parameters' positions", lc == la, 0);
    free(bytes);
    gpt2_free(&a); gpt2_free(&b); gpt2_free(&c);
}

// a forward pass of 100 tokens of the fast-growing model of floater_test_range (in the test's
// child process: on one thread, as OpenMP's threads do not survive a fork)
static void floater_fail_range(const void* arg) {
    GPT2* model = (GPT2*)arg;
    int x[100] = {0};
    omp_set_num_threads(1);
    gpt2_forward(model, x, NULL, 1, 100, 0);
}

// The range: dynamics h = 50 relu(x), P0 in [0.5, 1), whose solution P0 e^(50 s) leaves 2^56
// between s = 0.77 and 0.79: T = 77 is within it, T = 100 is not (gpt2_reaches), and a pass
// over 100 tokens is refused with one line
static void floater_test_range(void) {
    GPT2 model;
    int x[8], y[8];
    tiny_model_batch(&model, 8, 7, 9, x, y, 1, 8);
    int C = model.config.channels, R = 3 * model.config.num_layers;
    uint64_t rng = random_seed(33);
    floater_zero(&model, 0);
    for (int c = 0; c < C; c++) {
        model.params.floater_w1[(size_t)c * (C + 1) + c] = 1;
        model.params.floater_w2[(size_t)c * (C + 1) + c] = 50;
    }
    for (int i = 0; i < R * C; i++) { model.params.floater_p0[i] = 0.5 + 0.5 * random_f32(&rng); }
    int within = gpt2_reaches(&model, 77), beyond = gpt2_reaches(&model, 100);
    check(within && !beyond, "P0 e^(50 s): 77 tokens within the range, 100 beyond it", within + !beyond, 2);
    expect_failure("a pass beyond the positions' range", floater_fail_range, &model, "its positions' ODE leaves +-2^56 at position 7");
    gpt2_free(&model);
}

#define PE_TESTS
static void pe_tests(void) {
    printf("floater: the solver, its identities, the refresh, the resume, the range\n");
    floater_test_solver();
    floater_test_identities();
    floater_test_refresh();
    floater_test_resume();
    floater_test_range();
}

#endif
