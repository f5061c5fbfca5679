/*
learned: GPT-2's absolute position embeddings (llm.c's model). A table wpe [maxT, C], one
of GPT-2's own tensors (llmc/model.h), is added to the token embeddings:

    x_t = wte[token_t] + wpe[t]

It cannot run beyond maxT: evaluation there is reported as n/a, never a crash. With
randomized positions (-rp L) token t takes row pos_t of a draw from [0, L), so the table
has L >= maxT rows.
*/
#if PE_PART == PE_PART_DEFINITION

#define PE_CONFIG_CHECK
static void pe_config_check(const GPT2Config* c, const char* what) {
    if (c->rp_len > c->max_seq_len) {
        fatal("%s: randomized positions from [0, %d) need as many rows of wpe, it has maxT = %d", what, c->rp_len, c->max_seq_len);
    }
}

// the longest sequence: the table's rows
#define PE_MAX_LENGTH
static int pe_max_length(const GPT2Config* c) { return c->max_seq_len; }
#define PE_LIMIT_REASON "its position table ends at maxT ="
#define PE_LIMIT_NOTE "beyond the learned positions"

#elif PE_PART == PE_PART_CPU

#define PE_EMBED
static void pe_embed_forward(GPT2* model, floatX* out, int B, int T) {
    int C = model->config.channels;
    const real* wpe = model->params.wpe;
    const int* pos = pe_positions(model, 0);
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        const real* p = wpe + (size_t)pos[bt % T] * C;
        real* o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) { o[c] += p[c]; }
    }
}
static void pe_embed_backward(GPT2* model, floatX* dout, int B, int T) {
    int C = model->config.channels;
    real* dwpe = model->grads.wpe;
    const int* pos = pe_positions(model, 0);
    for (int bt = 0; bt < B * T; bt++) {
        real* d = dwpe + (size_t)pos[bt % T] * C;
        const real* g = dout + (size_t)bt * C;
        for (int c = 0; c < C; c++) { d[c] += g[c]; }
    }
}

#endif
