/*
HellaSwag, and any multiple-choice completion task in llm.c's eval file format, scored
completion style as llm.c scores it: every completion follows the shared context in a row
of its own, and the model's loss over the completion's tokens decides. Two predictions, as
llm.c's dev/data/hellaswag.py makes them:
  acc       the completion with the lowest summed loss
  acc_norm  the completion with the lowest mean loss per token (the number llm.c's trainer
            prints as "HellaSwag: correct/total = fraction")
(lm-evaluation-harness's acc_norm divides by the completion's length in bytes, not tokens,
and scores the choices as a multiple-choice prompt: its numbers are not these.)

Eval file (llm.c's dev/data/data_common.py write_evalfile; `./tokenizer eval` writes it):
int32 header[256] = {20240522, 1, examples, longest example in bytes, 0...}, then per
example the uint16 values 65535 (delimiter), the example's size in bytes (these values
included), its index, its label, the number of completions, the context's length and
tokens, then each completion's length and tokens. The whole file is checked when it is
loaded: a malformed one is one error naming the example, before any evaluation.

A context is never cut for a model that can run beyond its training length; a `learned`
model sees at most maxT tokens, so a row longer than that loses context tokens from the
left, each completion's row as many as it needs (as lm-evaluation-harness truncates;
examples with a cut are counted and reported). A completion longer than the model's window
cannot be scored and is an error.

The trainer includes this file (through llmc/driver.h) after defining GPT2, gpt2_forward,
gpt2_token_losses and gpt2_max_length.
*/
#ifndef LLMC_HELLASWAG_H
#define LLMC_HELLASWAG_H

#include <math.h>
#include <stdint.h>
#include "utils.h"
#include "model.h"
#include "dataloader.h"
#include "multiprocess.h"

#define EVAL_MAGIC 20240522
#define EVAL_VERSION 1
#define EVAL_DELIMITER 65535
#define EVAL_MAX_COMPLETIONS 16

typedef struct {
    uint16_t* values;      // the file after its header
    int64_t* start;        // where each example starts in values
    int num_examples;
    int longest_row;       // longest row (context + completion - 1 tokens), cut to the window
} EvalFile;

typedef struct {
    int label, completions;
    const uint16_t* context;
    int context_len;
    const uint16_t* completion[EVAL_MAX_COMPLETIONS];
    int completion_len[EVAL_MAX_COMPLETIONS];
    int cut[EVAL_MAX_COMPLETIONS]; // context tokens dropped from the left of each row to fit the window
    int row_len;           // tokens of its longest row
} EvalExample;

typedef struct {
    int examples;
    int correct;           // acc: lowest summed loss
    int correct_norm;      // acc_norm: lowest mean loss per token
    int cut;               // examples whose context was cut to fit the window
} EvalResult;

// decodes example i of a checked file for a model whose window is `window` tokens
static void evalfile_example(const EvalFile* ef, int i, int window, EvalExample* ex) {
    const uint16_t* v = ef->values + ef->start[i];
    ex->label = v[3];
    ex->completions = v[4];
    ex->context_len = v[5];
    ex->context = v + 6;
    const uint16_t* q = ex->context + ex->context_len;
    ex->row_len = 0;
    for (int c = 0; c < ex->completions; c++) {
        ex->completion_len[c] = q[0];
        ex->completion[c] = q + 1;
        q += 1 + q[0];
        int full = ex->context_len + ex->completion_len[c] - 1; // the last context token predicts the first completion token
        ex->cut[c] = full > window ? full - window : 0;
        if (full - ex->cut[c] > ex->row_len) { ex->row_len = full - ex->cut[c]; }
    }
}

// reads and checks an eval file for a model of this vocabulary and window; any malformed
// part (header, delimiter, size, index, label, lengths, token ids, trailing bytes) is one
// error naming the example
static void evalfile_load(EvalFile* ef, const char* path, int vocab_size, int window) {
    int header[SHARD_HEADER_INTS];
    int64_t n;
    ef->values = read_u16_file(path, EVAL_MAGIC, EVAL_VERSION, "an eval file (llm.c's format)", header, &n);
    int count = header[2], longest = header[3];
    if (count < 1 || count > 65535) { fatal("%s: the header says %d examples (1 to 65535)", path, count); }
    if (longest < 16 || longest > 65535) { fatal("%s: the header says the longest example has %d bytes", path, longest); }
    ef->num_examples = count;
    ef->start = (int64_t*)malloc_check((size_t)count * sizeof(int64_t));
    ef->longest_row = 0;
    int64_t p = 0;
    for (int i = 0; i < count; i++) {
        const uint16_t* v = ef->values + p;
        if (n - p < 6) { fatal("%s: example %d of %d is truncated (the file ends)", path, i, count); }
        if (v[0] != EVAL_DELIMITER) { fatal("%s: example %d does not start with the delimiter %d (found %d)", path, i, EVAL_DELIMITER, v[0]); }
        int size = v[1] / 2;
        if (v[1] % 2 != 0 || v[1] > longest) {
            fatal("%s: example %d claims %d bytes (an even number, at most the header's longest, %d)", path, i, v[1], longest);
        }
        if (p + size > n) { fatal("%s: example %d is truncated: it claims %d bytes, the file holds %lld more", path, i, v[1], (long long)(2 * (n - p))); }
        if (v[2] != i) { fatal("%s: example %d is numbered %d", path, i, v[2]); }
        int completions = v[4];
        if (completions < 1 || completions > EVAL_MAX_COMPLETIONS) { fatal("%s: example %d has %d completions (1 to %d)", path, i, completions, EVAL_MAX_COMPLETIONS); }
        if (v[3] >= completions) { fatal("%s: example %d has label %d, outside [0, %d)", path, i, v[3], completions); }
        int q = 5; // walk the lengths and tokens: context, then each completion
        for (int part = 0; part <= completions; part++) {
            int len = q < size ? v[q] : 0;
            if (q >= size || len < 1 || q + 1 + len > size) {
                fatal("%s: example %d: its %s %d does not fit in the example's %d bytes (or is empty)", path, i,
                      part == 0 ? "context" : "completion", part == 0 ? 0 : part - 1, v[1]);
            }
            for (int t = q + 1; t <= q + len; t++) {
                if (v[t] >= vocab_size) { fatal("%s: example %d holds token %d, outside the vocabulary of %d", path, i, v[t], vocab_size); }
            }
            if (part > 0 && len > window) {
                fatal("%s: example %d: completion %d has %d tokens, longer than the model's window of %d tokens", path, i, part - 1, len, window);
            }
            q += 1 + len;
        }
        if (q != size) { fatal("%s: example %d: its parts fill %d bytes, its size field says %d", path, i, 2 * q, v[1]); }
        ef->start[i] = p;
        EvalExample ex;
        evalfile_example(ef, i, window, &ex);
        if (ex.row_len > ef->longest_row) { ef->longest_row = ex.row_len; }
        p += size;
    }
    if (p != n) { fatal("%s: %lld bytes follow the header's %d examples", path, (long long)(2 * (n - p)), count); }
}

static void evalfile_free(EvalFile* ef) {
    free(ef->values);
    free(ef->start);
}

// Scores every example (spread over the ranks in contiguous ranges, as llm.c does), packing
// the rows of consecutive examples into batches of up to batch_rows rows (one example at
// least), each batch as long as its longest row. Returns the counts over all ranks.
static EvalResult evalfile_score(GPT2* model, const EvalFile* ef, int batch_rows, const MultiProcess* mp) {
    int window = gpt2_max_length(model);
    int pad = GPT2_EOT < model->config.vocab_size ? GPT2_EOT : 0; // fills the rows shorter than their batch
    if (batch_rows < EVAL_MAX_COMPLETIONS) { batch_rows = EVAL_MAX_COMPLETIONS; }
    size_t cells = (size_t)batch_rows * ef->longest_row;
    int* inp = (int*)malloc_check(cells * sizeof(int));
    int* tgt = (int*)malloc_check(cells * sizeof(int));
    float* losses = (float*)malloc_check(cells * sizeof(float));
    EvalExample* batch = (EvalExample*)malloc_check((size_t)batch_rows * sizeof(EvalExample));
    double counts[4] = {0}; // examples, correct, correct_norm, cut
    int lo = (int)((int64_t)ef->num_examples * mp->rank / mp->world);
    int hi = (int)((int64_t)ef->num_examples * (mp->rank + 1) / mp->world);
    for (int i = lo; i < hi;) {
        int n = 0, rows = 0, T = 0; // the examples i .. i + n - 1 make this batch
        while (i + n < hi) {
            EvalExample* ex = &batch[n];
            evalfile_example(ef, i + n, window, ex);
            if (rows > 0 && rows + ex->completions > batch_rows) { break; }
            rows += ex->completions;
            if (ex->row_len > T) { T = ex->row_len; }
            n++;
        }
        // row of completion c: the context (cut from the left to fit), then the completion;
        // the targets are the next tokens, so the completion is scored from the last context token on
        for (int k = 0, r = 0; k < n; k++) {
            const EvalExample* ex = &batch[k];
            for (int c = 0; c < ex->completions; c++, r++) {
                int* x = inp + (size_t)r * T;
                int* y = tgt + (size_t)r * T;
                const uint16_t* context = ex->context + ex->cut[c];
                int ctx = ex->context_len - ex->cut[c], len = ctx + ex->completion_len[c];
                for (int t = 0; t < T; t++) {
                    x[t] = t < ctx ? context[t] : t < len ? ex->completion[c][t - ctx] : pad;
                    y[t] = t + 1 < ctx ? context[t + 1] : t + 1 < len ? ex->completion[c][t + 1 - ctx] : pad;
                }
            }
        }
        model->rp_key = rp_key(RP_STREAM_HELLASWAG, (uint64_t)i, (uint64_t)T); // randomized positions: the batch's draw
        gpt2_forward(model, inp, tgt, rows, T, 0);
        gpt2_token_losses(model, losses);
        for (int k = 0, r = 0; k < n; k++) {
            const EvalExample* ex = &batch[k];
            double best_sum = 0, best_mean = 0;
            int pred = 0, pred_norm = 0, cut = 0;
            for (int c = 0; c < ex->completions; c++, r++) {
                int ctx = ex->context_len - ex->cut[c];
                cut |= ex->cut[c] > 0;
                double sum = 0;
                for (int t = ctx - 1; t < ctx - 1 + ex->completion_len[c]; t++) { sum += losses[(size_t)r * T + t]; }
                if (!isfinite(sum)) { fatal("HellaSwag: example %d: the loss is not finite (the model has diverged)", i + k); }
                double mean = sum / ex->completion_len[c];
                if (c == 0 || sum < best_sum) { best_sum = sum; pred = c; }
                if (c == 0 || mean < best_mean) { best_mean = mean; pred_norm = c; }
            }
            counts[0] += 1;
            counts[1] += pred == ex->label;
            counts[2] += pred_norm == ex->label;
            counts[3] += cut;
        }
        i += n;
    }
    mp_allreduce_sum_f64(counts, 4);
    free(inp);
    free(tgt);
    free(losses);
    free(batch);
    EvalResult res = {(int)counts[0], (int)counts[1], (int)counts[2], (int)counts[3]};
    return res;
}

#endif // LLMC_HELLASWAG_H
