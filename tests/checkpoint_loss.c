/*
Checkpoints written by an earlier build must give the same numbers, bit for bit, after
any change of the code that does not mean to change the model (tests/checkpoints.sh).

  checkpoint_loss write DIR      a tiny model of the encoding this binary is built for
                                 (and one trained at randomized positions, where the
                                 encoding takes them), trained a few steps so that every
                                 parameter has moved, into DIR/<stem>.bin and
                                 DIR/<stem>_rp.bin; the tokens into DIR/tokens.bin (a
                                 tokens.bin already there must hold the same tokens: it is
                                 checked, never written over)
  checkpoint_loss loss CKPT TOKENS
                                 one line: the mean loss of the first 2 x 32 tokens at
                                 the training length, of 2 x 64 tokens beyond it (n/a
                                 where the model cannot run that long), and of the same
                                 32-token batch after one AdamW step from the checkpoint,
                                 each as C's %a (every bit)

The fixtures in tests/checkpoints/ were written by `write` at the commit their README
names; `loss` of every fixture is compared there with the line recorded at that commit.
*/
#define TESTING
#include "train_gpt2.c" // the tree given by -I

#define FIX_TRAIN_T 32
#define FIX_LONG_T 64
#define FIX_B 2
#define FIX_V 64
#define FIX_TOKENS 4096

// 2 layers, 2 heads of 8, a vocabulary of 64: a few thousand parameters
static GPT2Config fixture_config(int rp) {
    GPT2Config c = {0};
    c.num_layers = 2; c.num_heads = 2; c.channels = 16;
    c.vocab_size = FIX_V; c.padded_vocab_size = FIX_V; c.pe = PE_ID;
    gpt2_config_set_build(&c);
    c.max_seq_len = FIX_TRAIN_T;
    c.shape_k = PE_ID == PE_ID_SHAPE ? SHAPE_DEFAULT_K : 0; // shape's offsets as a new model has them
    if (rp) { // positions drawn from [0, 64) (learned: as many rows)
        c.rp_len = FIX_LONG_T;
        c.rp_seed = 7;
        pe_config_positions(&c, c.rp_len);
    }
    return c;
}

// the batch at `offset` tokens into the fixture's tokens: inputs and next-token targets
static void fixture_batch(const uint16_t* toks, int offset, int T, int* x, int* y) {
    for (int i = 0; i < FIX_B * T; i++) { x[i] = toks[offset + i]; y[i] = toks[offset + i + 1]; }
}

static float fixture_loss(GPT2* model, const uint16_t* toks, int T, uint64_t key) {
    int x[FIX_B * FIX_LONG_T], y[FIX_B * FIX_LONG_T];
    fixture_batch(toks, 0, T, x, y);
    model->rp_key = key;
    gpt2_forward(model, x, y, FIX_B, T, 0);
    return (float)model->mean_loss;
}

static void fixture_step(GPT2* model, const uint16_t* toks, int offset, int step) {
    int x[FIX_B * FIX_TRAIN_T], y[FIX_B * FIX_TRAIN_T];
    fixture_batch(toks, offset, FIX_TRAIN_T, x, y);
    model->rp_key = rp_key(RP_STREAM_TRAIN, (uint64_t)step, 0);
    gpt2_zero_grad(model);
    gpt2_forward(model, x, y, FIX_B, FIX_TRAIN_T, 1);
    gpt2_backward(model);
    gpt2_update(model, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, step + 1);
}

static uint16_t* read_tokens(const char* path) {
    FILE* f = fopen_check(path, "rb");
    uint16_t* toks = (uint16_t*)malloc_check(FIX_TOKENS * sizeof(uint16_t));
    fread_check(toks, sizeof(uint16_t), FIX_TOKENS, f, path);
    fclose(f);
    for (int i = 0; i < FIX_TOKENS; i++) { if (toks[i] >= FIX_V) { fatal("%s: token %d out of range", path, toks[i]); } }
    return toks;
}

int main(int argc, char** argv) {
    if (argc == 3 && strcmp(argv[1], "write") == 0) {
        char path[1024];
        uint16_t toks[FIX_TOKENS];
        uint64_t rng = random_seed(20240326);
        for (int i = 0; i < FIX_TOKENS; i++) { toks[i] = (uint16_t)(random_u32(&rng) % FIX_V); }
        snprintf(path, sizeof(path), "%s/tokens.bin", argv[2]);
        if (access(path, F_OK) == 0) {
            uint16_t* there = read_tokens(path);
            if (memcmp(there, toks, sizeof(toks)) != 0) { fatal("%s holds other tokens than the fixtures' (left as it is)", path); }
            free(there);
        } else {
            FILE* f = fopen_check(path, "wb");
            fwrite(toks, sizeof(uint16_t), FIX_TOKENS, f);
            fclose(f);
        }
        for (int rp = 0; rp <= rp_supported(PE_ID); rp++) {
            GPT2Config cfg = fixture_config(rp);
            GPT2 model;
            gpt2_build_from_config(&model, &cfg, 42);
            for (int step = 0; step < 8; step++) { fixture_step(&model, toks, 256 * (step + 1), step); }
            snprintf(path, sizeof(path), "%s/%s%s.bin", argv[2], model_label(PE_ID, DAPE_ID), rp ? "_rp" : "");
            gpt2_save_checkpoint(&model, path);
            gpt2_free(&model);
        }
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "loss") == 0) {
        uint16_t* toks = read_tokens(argv[3]);
        GPT2 model;
        gpt2_build_from_checkpoint(&model, argv[2]);
        float at_train = fixture_loss(&model, toks, FIX_TRAIN_T, rp_key(RP_STREAM_TEST, 1, 0));
        char beyond[64] = "n/a";
        if (gpt2_max_length(&model) >= FIX_LONG_T) {
            snprintf(beyond, sizeof(beyond), "%a", fixture_loss(&model, toks, FIX_LONG_T, rp_key(RP_STREAM_TEST, 2, 0)));
        }
        fixture_step(&model, toks, 0, 0);
        float after_step = fixture_loss(&model, toks, FIX_TRAIN_T, rp_key(RP_STREAM_TEST, 1, 0));
        printf("%a %s %a\n", at_train, beyond, after_step);
        gpt2_free(&model);
        free(toks);
        return 0;
    }
    fprintf(stderr, "usage: %s write DIR | loss CHECKPOINT TOKENS\n", argv[0]);
    return 1;
}
