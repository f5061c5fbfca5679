/*
sinusoidal (Vaswani et al. 2017), as fairseq computes it, the ALiBi paper's baseline: the
token embeddings times sqrt(C) (fairseq's embed_scale) plus fixed sinusoids of the position

    x_t = sqrt(C) wte[token_t] + p[pos],   pos = t + 2 (fairseq counts positions from its
                                           padding_idx + 1)
    p[pos, k] = sin(pos w_k),  p[pos, C/2 + k] = cos(pos w_k),  w_k = 10000^(-k / (C/2 - 1))

for k < C/2 (tensor2tensor's layout; an odd C leaves the last column 0). No parameters:
the backward only scales the tokens' gradient by sqrt(C). Revision 1 (revision 0 added
interleaved sinusoids to unscaled embeddings).
*/
#if PE_PART == PE_PART_DEFINITION

#define SINUSOIDAL_FIRST_POS 2

#define PE_CONFIG_CHECK
static void pe_config_check(const GPT2Config* c, const char* what) {
    if (c->channels < 4) { fatal("%s: sinusoidal needs at least 4 channels, got %d", what, c->channels); } // w_k divides by C/2 - 1
}

// the sinusoid of column k < 2 (C/2) at position pos (angles in double in both paths)
PE_FN double sinusoidal_angle(double pos, int k, int half) { return pos * exp(-k * log(10000.0) / (half - 1)); }

#elif PE_PART == PE_PART_CPU

#define PE_EMBED
static void pe_embed_forward(GPT2* model, floatX* out, int B, int T) {
    int C = model->config.channels, half = C / 2;
    real scale = sqrt((real)C);
    const int* positions = pe_positions(model, 0);
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        double pos = positions[bt] + SINUSOIDAL_FIRST_POS;
        real* o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) { o[c] *= scale; }
        for (int k = 0; k < half; k++) {
            double angle = sinusoidal_angle(pos, k, half);
            o[k] += (real)sin(angle);
            o[half + k] += (real)cos(angle);
        }
    }
}
static void pe_embed_backward(GPT2* model, floatX* dout, int B, int T) {
    int C = model->config.channels;
    real scale = sqrt((real)C);
    #pragma omp parallel for
    for (size_t i = 0; i < (size_t)B * T * C; i++) { dout[i] *= scale; }
}

#elif PE_PART == PE_PART_CUDA

#define PE_EMBED
// sinusoidal_embed_forward_kernel: one thread per (token, column) scales the token's
// embedding and adds its sinusoid, the angle in double as the CPU path (positions (B, T);
// NULL: the token's index t)
__global__ void sinusoidal_embed_forward_kernel(floatX* out, const int* positions, int N, int T, int C) {
    int half = C / 2;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * C) { return; }
    size_t bt = idx / C;
    int c = idx % C;
    double pos = (positions != NULL ? positions[bt] : (int)(bt % T)) + SINUSOIDAL_FIRST_POS;
    float p = 0.0f; // an odd C's last column gets none
    if (c < 2 * half) {
        int k = c % half;
        double angle = sinusoidal_angle(pos, k, half);
        p = (float)(c < half ? sin(angle) : cos(angle));
    }
    out[idx] = (floatX)((float)out[idx] * sqrtf((float)C) + p);
}
// scale_kernel: x *= a (the tokens' gradient times sqrt(C))
__global__ void scale_kernel(floatX* x, size_t n, float a) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { x[i] = (floatX)((float)x[i] * a); }
}
static void pe_embed_forward(GPT2* model, floatX* out, int B, int T) {
    int C = model->config.channels;
    size_t n = (size_t)B * T * C;
    sinusoidal_embed_forward_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(out, pe_positions(model, 0), B * T, T, C);
    cudaCheckLaunch("sinusoidal_embed_forward_kernel");
}
static void pe_embed_backward(GPT2* model, floatX* dout, int B, int T) {
    int C = model->config.channels;
    size_t n = (size_t)B * T * C;
    scale_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(dout, n, sqrtf((float)C));
    cudaCheckLaunch("scale_kernel");
}

#elif PE_PART == PE_PART_TEST

// fairseq: embed_scale sqrt(C), positions from padding_idx + 1 = 2, [sin | cos] halves of
// frequencies exp(-k log(10000) / (C/2 - 1)) (an independent reading, in double)
#define PE_REF_EMBED
static double pe_ref_embed(GPT2* model, double token, int pos, int c) {
    int C = model->config.channels, half = C / 2, k = c % half;
    double angle = (pos + 2) * exp(-k * log(10000.0) / (half - 1));
    return token * sqrt((double)C) + (c >= 2 * half ? 0 : c < half ? sin(angle) : cos(angle));
}

#endif
