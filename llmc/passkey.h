/*
Passkey retrieval (Mohtashami and Jaggi 2023, landmark attention; used by the Position
Interpolation and YaRN papers): a pass key is stated once inside a long filler text, and
the model must give it back at the end. Perplexity can stay flat while a model ignores
everything beyond a short window; this test cannot.

The prompt is the landmark-attention code's, built from tokens (gpt2_passkey.bin, written
by `./tokenizer write-passkey`):
  task \n filler \n "The pass key is" key ". Remember it." key " is the pass key." \n filler \n question
with task "There is an important info hidden inside a lot of irrelevant text. Find it and
memorize them. I will quiz you about the important information there.", filler "The grass
is green. The sky is blue. The sun is yellow. Here we go. There and back again." repeated
(both fillers start at its beginning, as there) and question "What is the pass key? The
pass key is"; the answer is the key's tokens, " 12345". A part that is empty is left out
with its newline. Where the code measures the filler in characters, here everything is in
tokens: a window of exactly L tokens holds the prompt and the answer's tokens but the last
(the teacher-forced input), so the answer is scored at positions L - A .. L - 1; the filler
takes what the fixed parts leave, and the key line goes after round(depth x filler) of it
(depth 0: right after the task, 1: right before the question).

Keys are 5-digit numbers (the code draws 1..50000), trial t's key a function of the seed and
t alone, so every cell of the grid (length x depth) sees the same keys. Scoring, in one
forward pass per prompt, teacher-forced:
  correct      greedy decoding gives the key's A tokens: the model's most likely token at
               each answer position is the key's token there (if it first differs at one,
               greedy decoding differs there too). The code compares the first number in
               the generated text instead; the two differ only for a model that writes the
               key in another tokenization or goes on with more digits.
  log-prob     log P(key tokens | prompt), the sum over the A tokens, informative for models
               too small to get the key exactly.

The trainer includes this file (through llmc/driver.h) after defining GPT2, gpt2_forward,
gpt2_token_losses, gpt2_logits_row and gpt2_reaches.
*/
#ifndef LLMC_PASSKEY_H
#define LLMC_PASSKEY_H

#include <math.h>
#include <stdint.h>
#include "utils.h"
#include "rand.h"
#include "model.h"
#include "dataloader.h"
#include "multiprocess.h"

#define PASSKEY_MAGIC 20240610
#define PASSKEY_VERSION 1
// the texts of gpt2_passkey.bin, in its order
enum { PK_TASK, PK_NEWLINE, PK_FILLER_FIRST, PK_FILLER_NEXT, PK_KEY_BEFORE, PK_KEY_BETWEEN, PK_KEY_AFTER, PK_QUESTION, PK_NUM_TEXTS };
#define PASSKEY_MAX_KEY_TOKENS 8

typedef struct {
    uint16_t* values;            // the file after its header
    const uint16_t* text[PK_NUM_TEXTS];
    int text_len[PK_NUM_TEXTS];
    int first_key, num_keys;     // the keys first_key .. first_key + num_keys - 1
    int64_t* key_start;          // where each key's tokens start in values
    int* key_len;
    int longest_key;             // tokens of the longest key
} PasskeyTokens;

// one prompt of the grid: where its parts went in the window
typedef struct {
    int key;                     // the pass key
    int key_line;                // position of the key line's first token
    int answer_len;              // A: the key's tokens, scored at positions L - A .. L - 1
    int filler;                  // filler tokens in the window
} PasskeyPrompt;

// reads and checks gpt2_passkey.bin for a model of this vocabulary
static void passkey_load(PasskeyTokens* pk, const char* path, int vocab_size) {
    int header[SHARD_HEADER_INTS];
    int64_t n;
    if (!file_exists(path)) { fatal("%s not found: the passkey test needs it (make gpt2_passkey.bin)", path); }
    pk->values = read_u16_file(path, PASSKEY_MAGIC, PASSKEY_VERSION, "the passkey test's tokens", header, &n);
    if (header[2] != PK_NUM_TEXTS || header[3] < 1 || header[4] < 1) {
        fatal("%s: %d texts and %d keys from %d, expected %d texts (rebuild it: make gpt2_passkey.bin)", path, header[2], header[4], header[3], PK_NUM_TEXTS);
    }
    pk->longest_key = 0;
    pk->first_key = header[3];
    pk->num_keys = header[4];
    pk->key_start = (int64_t*)malloc_check((size_t)pk->num_keys * sizeof(int64_t));
    pk->key_len = (int*)malloc_check((size_t)pk->num_keys * sizeof(int));
    int64_t p = 0;
    for (int k = 0; k < PK_NUM_TEXTS + pk->num_keys; k++) {
        int len = p < n ? pk->values[p] : -1;
        int max_len = k < PK_NUM_TEXTS ? 1024 : PASSKEY_MAX_KEY_TOKENS;
        if (len < 1 || len > max_len || p + 1 + len > n) { fatal("%s is truncated or corrupt at entry %d", path, k); }
        for (int t = 1; t <= len; t++) {
            if (pk->values[p + t] >= vocab_size) { fatal("%s: token %d is outside the vocabulary of %d", path, pk->values[p + t], vocab_size); }
        }
        if (k < PK_NUM_TEXTS) { pk->text[k] = pk->values + p + 1; pk->text_len[k] = len; }
        else {
            pk->key_start[k - PK_NUM_TEXTS] = p + 1;
            pk->key_len[k - PK_NUM_TEXTS] = len;
            if (len > pk->longest_key) { pk->longest_key = len; }
        }
        p += 1 + len;
    }
    if (p != n) { fatal("%s: %lld bytes after its last key", path, (long long)(2 * (n - p))); }
}

static void passkey_free(PasskeyTokens* pk) {
    free(pk->values);
    free(pk->key_start);
    free(pk->key_len);
}

// the key of trial t: depends on the seed and t only
static int passkey_key(const PasskeyTokens* pk, uint64_t seed, int trial) {
    uint64_t rng = random_seed(random_seed(seed) + (uint64_t)trial);
    return pk->first_key + (int)(random_u32(&rng) % (uint32_t)pk->num_keys);
}

// appends n tokens to x at *pos
static void passkey_put(int* x, int* pos, const uint16_t* tokens, int n) {
    for (int i = 0; i < n; i++) { x[(*pos)++] = tokens[i]; }
}

// appends the first n tokens of the endless filler (its first sentence block, then the
// block with a leading space, again and again)
static void passkey_put_filler(const PasskeyTokens* pk, int* x, int* pos, int n) {
    const uint16_t* block = pk->text[PK_FILLER_FIRST];
    int len = pk->text_len[PK_FILLER_FIRST];
    while (n > 0) {
        int take = n < len ? n : len;
        passkey_put(x, pos, block, take);
        n -= take;
        block = pk->text[PK_FILLER_NEXT];
        len = pk->text_len[PK_FILLER_NEXT];
    }
}

// tokens of the prompt's fixed parts (all but the filler and the newlines around it) and
// the answer's teacher-forced inputs, for a key of A tokens
static int passkey_fixed_tokens(const PasskeyTokens* pk, int A) {
    return pk->text_len[PK_TASK] + pk->text_len[PK_KEY_BEFORE] + pk->text_len[PK_KEY_BETWEEN] + pk->text_len[PK_KEY_AFTER]
         + 2 * A + pk->text_len[PK_QUESTION] + A - 1;
}

// the shortest window that holds every key's prompt (with at least one filler token)
static int passkey_min_length(const PasskeyTokens* pk) {
    return passkey_fixed_tokens(pk, pk->longest_key) + 3 * pk->text_len[PK_NEWLINE] + 1;
}

// Builds the window of L tokens for `key` at `depth` (0..1): inputs x and targets y (the
// next tokens; the last is the key's last token). Returns 0 if L is too short to hold the
// fixed parts of the prompt (never from passkey_min_length(pk) on).
static int passkey_build(const PasskeyTokens* pk, int L, double depth, int key, int* x, int* y, PasskeyPrompt* pp) {
    const uint16_t* ktok = pk->values + pk->key_start[key - pk->first_key];
    int A = pk->key_len[key - pk->first_key];
    int fixed = passkey_fixed_tokens(pk, A);
    int nl = pk->text_len[PK_NEWLINE];
    int room = L - fixed - 2 * nl; // the filler and the newlines after its parts
    int filler = room - 2 * nl, before = (int)floor(depth * filler + 0.5);
    if (filler < 2 || before == 0 || before == filler) { // one part only: the key line at an end
        filler = room - nl;
        before = depth < 0.5 ? 0 : filler;
    }
    if (filler < 1) { return 0; }
    int after = filler - before;
    int pos = 0;
    passkey_put(x, &pos, pk->text[PK_TASK], pk->text_len[PK_TASK]);
    passkey_put(x, &pos, pk->text[PK_NEWLINE], nl);
    if (before > 0) {
        passkey_put_filler(pk, x, &pos, before);
        passkey_put(x, &pos, pk->text[PK_NEWLINE], nl);
    }
    pp->key_line = pos;
    passkey_put(x, &pos, pk->text[PK_KEY_BEFORE], pk->text_len[PK_KEY_BEFORE]);
    passkey_put(x, &pos, ktok, A);
    passkey_put(x, &pos, pk->text[PK_KEY_BETWEEN], pk->text_len[PK_KEY_BETWEEN]);
    passkey_put(x, &pos, ktok, A);
    passkey_put(x, &pos, pk->text[PK_KEY_AFTER], pk->text_len[PK_KEY_AFTER]);
    passkey_put(x, &pos, pk->text[PK_NEWLINE], nl);
    if (after > 0) {
        passkey_put_filler(pk, x, &pos, after);
        passkey_put(x, &pos, pk->text[PK_NEWLINE], nl);
    }
    passkey_put(x, &pos, pk->text[PK_QUESTION], pk->text_len[PK_QUESTION]);
    passkey_put(x, &pos, ktok, A - 1);
    if (pos != L) { fatal("passkey prompt of %d tokens for a window of %d (a bug)", pos, L); }
    for (int t = 0; t + 1 < L; t++) { y[t] = x[t + 1]; }
    y[L - 1] = ktok[A - 1];
    pp->key = key;
    pp->answer_len = A;
    pp->filler = filler;
    return 1;
}

// Scores the prompts of one window length L: the rows of the last forward pass hold them
// (row r: prompt pp[r]); adds each row's correctness and the log-probability of its key
// to correct[r] and logprob[r]
static void passkey_score_rows(GPT2* model, int rows, int L, const PasskeyPrompt* pp, const int* y,
                               const float* losses, float* logits, double* correct, double* logprob) {
    int V = model->config.vocab_size;
    for (int r = 0; r < rows; r++) {
        int A = pp[r].answer_len, ok = 1;
        for (int t = L - A; t < L; t++) {
            logprob[r] -= losses[(size_t)r * L + t];
            if (!ok) { continue; } // greedy decoding has left the key already
            gpt2_logits_row(model, r, t, logits);
            int best = 0;
            for (int v = 1; v < V; v++) { if (logits[v] > logits[best]) { best = v; } }
            ok = best == y[(size_t)r * L + t];
        }
        correct[r] += ok;
    }
}

// one cell of the grid: a window length and a depth, over `trials` keys
typedef struct {
    int eval_len;
    double depth;
    int trials;                  // 0: not evaluated (see note)
    double correct;              // prompts whose key greedy decoding gives back
    double logprob;              // the sum over the prompts of log P(key tokens | prompt)
    const char* note;
} PasskeyCell;

// Runs the grid: every length of `lengths` at `depths` depths evenly spaced from 0 to 1, each
// with `trials` keys; prompts of one length are batched about batch_tokens tokens at a time
// and spread over the ranks. Fills num_lengths x depths cells, length-major.
static void passkey_grid(GPT2* model, const PasskeyTokens* pk, const int* lengths, int num_lengths, int depths, int trials,
                         uint64_t seed, int64_t batch_tokens, const MultiProcess* mp, PasskeyCell* cells) {
    float* logits = (float*)malloc_check((size_t)model->config.padded_vocab_size * sizeof(float));
    double* sums = (double*)malloc_check((size_t)2 * depths * sizeof(double)); // per depth: correct, log-prob
    for (int k = 0; k < num_lengths; k++) {
        int L = lengths[k];
        PasskeyCell* row = cells + (size_t)k * depths;
        for (int d = 0; d < depths; d++) {
            memset(&row[d], 0, sizeof(PasskeyCell));
            row[d].eval_len = L;
            row[d].depth = depths > 1 ? (double)d / (depths - 1) : 0.5;
            if (!gpt2_reaches(model, L)) {
                row[d].note = "n/a: " PE_LIMIT_NOTE;
            } else if (L < passkey_min_length(pk)) {
                row[d].note = "n/a: shorter than the prompt";
            }
        }
        if (row[0].note != NULL) { continue; }
        int total = depths * trials;
        int batch = batch_tokens / L > 1 ? (int)(batch_tokens / L) : 1;
        if (batch > total) { batch = total; }
        int* x = (int*)malloc_check((size_t)batch * L * sizeof(int));
        int* y = (int*)malloc_check((size_t)batch * L * sizeof(int));
        float* losses = (float*)malloc_check((size_t)batch * L * sizeof(float));
        PasskeyPrompt* pp = (PasskeyPrompt*)malloc_check((size_t)batch * sizeof(PasskeyPrompt));
        double* score = (double*)malloc_check((size_t)2 * batch * sizeof(double));
        memset(sums, 0, (size_t)2 * depths * sizeof(double));
        for (int i0 = mp->rank * batch; i0 < total; i0 += mp->world * batch) {
            int rows = total - i0 < batch ? total - i0 : batch;
            for (int r = 0; r < rows; r++) { // prompt i: depth i / trials, trial i % trials
                int d = (i0 + r) / trials, t = (i0 + r) % trials;
                passkey_build(pk, L, row[d].depth, passkey_key(pk, seed, t), x + (size_t)r * L, y + (size_t)r * L, &pp[r]);
            }
            model->rp_key = rp_key(RP_STREAM_PASSKEY, (uint64_t)L, (uint64_t)i0); // randomized positions: the batch's draw
            gpt2_forward(model, x, y, rows, L, 0);
            gpt2_token_losses(model, losses);
            memset(score, 0, (size_t)2 * batch * sizeof(double));
            passkey_score_rows(model, rows, L, pp, y, losses, logits, score, score + batch);
            for (int r = 0; r < rows; r++) {
                int d = (i0 + r) / trials;
                sums[2 * d] += score[r];
                sums[2 * d + 1] += score[batch + r];
            }
        }
        mp_allreduce_sum_f64(sums, 2 * depths);
        for (int d = 0; d < depths; d++) {
            row[d].trials = trials;
            row[d].correct = sums[2 * d];
            row[d].logprob = sums[2 * d + 1];
            if (!isfinite(row[d].logprob)) { fatal("passkey test at length %d: the log-probability is not finite (the model has diverged)", L); }
        }
        free(x);
        free(y);
        free(losses);
        free(pp);
        free(score);
    }
    free(logits);
    free(sums);
}

// the table of the grid in the output directory (llmc/utils.h: each evaluation appends its rows)
#define PASSKEY_CSV "passkey.csv"
#define PASSKEY_CSV_HEADER "pe,train_len,eval_len,depth,trials,correct,accuracy,key_logprob,step\n"

// prints the grid (rows: lengths, columns: depths; accuracy and the mean log-probability of
// the key) and appends its cells to passkey.csv in dir, if given
static void passkey_report(const PasskeyCell* cells, int num_lengths, int depths, int trials, uint64_t seed, const char* label,
                           int train_len, int step, const char* dir) {
    printf("passkey retrieval: pe %s, trained at T=%d, step %d (%d keys per cell, seed %llu): accuracy, mean log P(key)\n",
           label, train_len, step, trials, (unsigned long long)seed);
    printf("| length |");
    for (int d = 0; d < depths; d++) { printf(" depth %3.0f%%     |", 100 * cells[d].depth); }
    printf("\n|-------:|");
    for (int d = 0; d < depths; d++) { printf("----------------:|"); }
    printf("\n");
    for (int k = 0; k < num_lengths; k++) {
        const PasskeyCell* row = cells + (size_t)k * depths;
        printf("| %6d |", row[0].eval_len);
        for (int d = 0; d < depths; d++) {
            if (row[d].trials == 0) { printf(" %15s |", "n/a"); }
            else { printf(" %5.2f %9.3f |", row[d].correct / row[d].trials, row[d].logprob / row[d].trials); }
        }
        if (row[0].trials == 0) { printf(" %s", row[0].note); }
        printf("\n");
    }
    if (dir == NULL) { return; }
    AtomicFile af;
    csv_open(&af, dir, PASSKEY_CSV, PASSKEY_CSV_HEADER, INT_MAX);
    for (int i = 0; i < num_lengths * depths; i++) {
        const PasskeyCell* c = &cells[i];
        if (c->trials == 0) { csv_row(&af, "%s,%d,%d,%.4f,0,0,n/a,n/a,%d\n", label, train_len, c->eval_len, c->depth, step); }
        else {
            csv_row(&af, "%s,%d,%d,%.4f,%d,%.0f,%.6f,%.6f,%d\n", label, train_len, c->eval_len, c->depth, c->trials,
                    c->correct, c->correct / c->trials, c->logprob / c->trials, step);
        }
    }
    atomic_commit(&af);
}

#endif // LLMC_PASSKEY_H
