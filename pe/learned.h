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

// maxT is the table's length, not the training length (llmc/model.h): a new model gets a row
// for every position it may be given, and a checkpoint that does not record its training length
// (llm.c's) is evaluated as trained at maxT, with a note
#define PE_POSITION_TABLE
static void pe_config_positions(GPT2Config* c, int positions) {
    if (positions > c->max_seq_len) { c->max_seq_len = positions; }
}

#elif PE_PART == PE_PART_CPU

#define PE_EMBED
static void pe_embed_forward(GPT2* model, floatX* out, int B, int T) {
    position_embed_forward(out, model->params.wpe, pe_positions(model, 0), B * T, model->config.channels);
}
static void pe_embed_backward(GPT2* model, floatX* dout, int B, int T) {
    encoder_backward(model->grads.wpe, dout, pe_positions(model, 0), B, T, model->config.channels);
}

#elif PE_PART == PE_PART_CUDA

#define PE_EMBED
// learned_embed_backward_kernel: one thread per (t, c) sums over the batch, so no two threads
// write the same element: the rows share their positions (the indices, or a draw's distinct ones)
__global__ void learned_embed_backward_kernel(float* dwpe, const floatX* dout, const int* pos, int B, int T, int C) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * C) { return; }
    float s = 0.0f;
    for (int b = 0; b < B; b++) { s += (float)dout[(size_t)b * T * C + idx]; }
    int t = idx / C;
    dwpe[(size_t)(pos != NULL ? pos[t] : t) * C + idx % C] += s;
}
static void pe_embed_forward(GPT2* model, floatX* out, int B, int T) {
    position_embed_forward(out, model->params.wpe, pe_positions(model, 0), B * T, T, model->config.channels);
}
static void pe_embed_backward(GPT2* model, floatX* dout, int B, int T) {
    int C = model->config.channels;
    if (model->pos_kind == POS_GIVEN) {
        position_embed_backward(model->grads.wpe, dout, pe_positions(model, 0), B * T, C);
        return;
    }
    size_t n = (size_t)T * C;
    learned_embed_backward_kernel<<<CEIL_DIV(n, 256), 256, 0, ctx.stream>>>(model->grads.wpe, dout, pe_positions(model, 0), B, T, C);
    cudaCheckLaunch("learned_embed_backward_kernel");
}

#elif PE_PART == PE_PART_TEST

// the position embedding added to the value in column c of token bt of the last forward pass
// (an independent reading of the definition, in double)
#define PE_REF_EMBED
static double pe_ref_embed(GPT2* model, double token, size_t bt, int c) {
    return token + model->params.wpe[(size_t)pe_positions(model, 0)[bt] * model->config.channels + c];
}

// a table of the randomized positions' range
#define PE_TEST_CONFIG
static void pe_test_config(GPT2Config* cfg) {
    if (cfg->rp_len > cfg->max_seq_len) { cfg->max_seq_len = cfg->rp_len; }
}

#define PE_TESTS
static void pe_tests(void) {
    printf("learned: a checkpoint is llm.c's file, and a model at randomized positions is a plain one with the drawn rows\n");
    char path[512];
    snprintf(path, sizeof(path), "%s/learned_llmc.bin", tmpdir);
    GPT2Config cfg = tiny_config(16);
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 1);
    gpt2_save_checkpoint(&model, path);
    FILE* f = fopen_check(path, "rb");
    int64_t size = file_size_check(f, path);
    int h[256];
    fread_check(h, sizeof(int), 256, f, path);
    fclose(f);
    // llm.c's file exactly: its header words and its 16 tensors, nothing after them
    int64_t Vp = 256, C = 12, L = 2, maxT = 16;
    int64_t llmc_params = Vp * C + maxT * C + L * (C + C + 3 * C * C + 3 * C + C * C + C + C + C + 4 * C * C + 4 * C + 4 * C * C + C) + C + C;
    int hdr = h[2] == 16 && h[3] == 250 && h[4] == 2 && h[5] == 3 && h[6] == 12 && h[7] == 256 && h[8] == 0;
    check(hdr && size == 256 * 4 + llmc_params * 4, "learned checkpoint is llm.c's layout (header, size)", (double)size, (double)(256 * 4 + llmc_params * 4));
    gpt2_free(&model);
    // the drawn rows of wpe moved to rows 0..T-1 of a plain model give the same logits
    int B = 2, T = 12;
    cfg.rp_len = 3 * T; cfg.rp_seed = 5; cfg.max_seq_len = cfg.rp_len;
    GPT2 drawn, plain;
    gpt2_build_from_config(&drawn, &cfg, 4);
    GPT2Config pc = cfg;
    pc.rp_len = 0; pc.rp_seed = 0;
    gpt2_build_from_config(&plain, &pc, 4);
    uint64_t rng = random_seed(8);
    perturb_parameters(&drawn, 0.1f, &rng);
    memcpy(plain.params_memory, drawn.params_memory, drawn.num_parameters * sizeof(real));
    int x[24];
    random_tokens(x, B * T, cfg.vocab_size, &rng);
    drawn.rp_key = rp_key(RP_STREAM_TEST, 2, 0);
    gpt2_forward(&drawn, x, NULL, B, T, 0);
    const int* pos = pe_positions(&drawn, 0);
    for (int t = 0; t < T; t++) { memcpy(plain.params.wpe + (size_t)t * C, drawn.params.wpe + (size_t)pos[t] * C, C * sizeof(real)); }
    gpt2_forward(&plain, x, NULL, B, T, 0);
    double d = 0;
    for (size_t i = 0; i < (size_t)B * T * cfg.channels; i++) { d = fmax(d, fabs(drawn.acts.t.lnf[i] - plain.acts.t.lnf[i])); }
    check(d == 0, "learned at randomized positions = a plain model with wpe rows pi_t", d, 0);
    gpt2_free(&drawn);
    gpt2_free(&plain);
}

#endif
