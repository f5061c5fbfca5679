/*
Accuracy on the algorithmic tasks, by length (-A; llmc/tasks.h, docs/tasks.md). Every file
of the pattern is a task file of data/tasks.c (the examples of one task, at one length or at
the training lengths); each is read and checked when the run starts and scored at every
evaluation, each example's row in one forward pass, teacher-forced: the model's most likely
token at each scored position (the answer's tokens and EOS).
  exact match     every scored position right. This is greedy decoding's exact match: the
                  answer is a function of the prompt, and where greedy decoding first leaves
                  the answer, the teacher-forced most likely token differs from it at that
                  same position (both saw the same tokens before it); EOS is scored, so the
                  model must also stop (Kazemnejad et al.'s metric).
  token accuracy  the fraction of the answer's tokens right, each given the right tokens
                  before it (Ruoss et al.'s per-token accuracy, there of a non-causal model);
                  EOS does not count here (it would be half the score of a one-token answer).
A file whose rows are longer than the model can run (learned beyond maxT, randomized
positions beyond their range) is n/a. The table goes to stdout, with one example of each
file and its greedy answer up to its first wrong token; the rows go to tasks.csv in the
output directory (pe,train_len,step,task,min_len,max_len,examples,correct,accuracy,tokens,
tokens_correct,token_accuracy), appended: each evaluation adds its rows under its step.

The trainer includes this file (through llmc/driver.h) after defining GPT2, gpt2_forward,
gpt2_logits_row and gpt2_reaches.
*/
#ifndef LLMC_TASK_EVAL_H
#define LLMC_TASK_EVAL_H

#include <glob.h>
#include <stdint.h>
#include "utils.h"
#include "pe.h"
#include "dataloader.h"
#include "multiprocess.h"
#include "tasks.h"

typedef struct {
    int task, min_len, max_len;
    int R, rows;        // rows of R tokens, one example each
    uint16_t* tokens;   // rows * R + 1
    uint8_t* mask;      // 1 where a token is a scored target
} TaskSet;

typedef struct {
    TaskSet* sets;
    int num;
} TaskSets;

// reads and checks every task file of a pattern: masked shards (llmc/dataloader.h) whose
// header names a task, every token below the model's vocabulary V, one example or more, each
// with an answer and EOS scored
static void task_sets_load(TaskSets* ts, const char* pattern, int V) {
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) { fatal("-A: no file matches '%s'", pattern); }
    ts->num = (int)g.gl_pathc;
    ts->sets = (TaskSet*)calloc_check(g.gl_pathc, sizeof(TaskSet));
    for (int k = 0; k < ts->num; k++) {
        TaskSet* s = &ts->sets[k];
        const char* path = g.gl_pathv[k];
        int h[SHARD_HEADER_INTS];
        FILE* f = fopen_read_regular(path);
        int64_t ntok = shard_read_header(path, f, h);
        if (h[1] != SHARD_VERSION_MASKED) { fatal("-A: %s is a plain token shard, not a task file (./tasks write makes them)", path); }
        s->task = h[TASK_WORD_TASK];
        s->min_len = h[TASK_WORD_MIN_LEN];
        s->max_len = h[TASK_WORD_MAX_LEN];
        if (s->task <= TASK_NONE || s->task >= TASK_NUM || s->min_len < 1 || s->max_len < s->min_len) {
            fatal("-A: %s is a masked shard but no task file (task %d, lengths %d..%d)", path, s->task, s->min_len, s->max_len);
        }
        s->R = h[3];
        s->rows = (int)((ntok - 1) / s->R);
        s->tokens = (uint16_t*)malloc_check((size_t)ntok * sizeof(uint16_t));
        s->mask = (uint8_t*)malloc_check((size_t)ntok);
        fread_check(s->tokens, sizeof(uint16_t), (size_t)ntok, f, path);
        fread_check(s->mask, 1, (size_t)ntok, f, path);
        fclose(f);
        for (int64_t i = 0; i < ntok; i++) {
            if (s->tokens[i] >= V) { fatal("-A: %s: token %d at position %lld is out of range (vocab size %d)", path, s->tokens[i], (long long)i, V); }
        }
        mask_check_rows(s->mask, s->rows, s->R, path, 0);
        // an example scores its answer, of one token or more, and EOS: exact match and token
        // accuracy are fractions of examples and of answer tokens, none of which may be 0
        if (s->rows == 0) { fatal("-A: %s holds no example (one row each): nothing to score", path); }
        for (int r = 0; r < s->rows; r++) {
            int scored = 0;
            for (int t = 1; t < s->R; t++) { scored += s->mask[(int64_t)r * s->R + t]; }
            if (scored < 2) {
                fatal("-A: %s: example %d scores %d token(s); a task's example scores its answer (one token or more) and EOS", path, r, scored);
            }
        }
    }
    globfree(&g);
}

static void task_sets_free(TaskSets* ts) {
    for (int k = 0; k < ts->num; k++) { free(ts->sets[k].tokens); free(ts->sets[k].mask); }
    free(ts->sets);
    ts->sets = NULL;
    ts->num = 0;
}

typedef struct {
    double examples, correct;    // examples, and those exactly right
    double tokens, tokens_right; // the answers' tokens (EOS not counted), and those right
    const char* note;            // why a file has no score (n/a)
} TaskScore;

// a file's lengths as text: "20", or "1-20" for a file of the training lengths
static void task_lengths_text(const TaskSet* s, char* out, size_t n) {
    if (s->min_len == s->max_len) { snprintf(out, n, "%d", s->max_len); } else { snprintf(out, n, "%d-%d", s->min_len, s->max_len); }
}

// the most likely token of the V real ones (the first of equals, as greedy decoding)
static int task_argmax(const float* logits, int V) {
    int best = 0;
    for (int v = 1; v < V; v++) { if (logits[v] > logits[best]) { best = v; } }
    return best;
}

// Scores a task file's examples, batched about batch_tokens tokens at a time and spread
// over the ranks; rank 0 prints its first example with the greedy answer
static void task_set_score(GPT2* model, const TaskSet* s, int64_t batch_tokens, const MultiProcess* mp, TaskScore* out) {
    memset(out, 0, sizeof(*out));
    int R = s->R, V = model->config.vocab_size;
    if (!gpt2_reaches(model, R)) {
        out->note = "n/a: " PE_LIMIT_NOTE;
        return;
    }
    int batch = batch_tokens / R > 1 ? (int)(batch_tokens / R) : 1;
    if (batch > s->rows) { batch = s->rows; }
    int* x = (int*)malloc_check((size_t)batch * R * sizeof(int));
    float* logits = (float*)malloc_check((size_t)model->config.padded_vocab_size * sizeof(float));
    char* shown = (char*)malloc_check((size_t)R + 8); // the greedy answer of the first example
    int shown_len = 0, shown_right = 0;
    double sums[4] = {0};
    for (int i0 = mp->rank * batch; i0 < s->rows; i0 += mp->world * batch) {
        int rows = s->rows - i0 < batch ? s->rows - i0 : batch;
        for (int64_t i = 0; i < (int64_t)rows * R; i++) { x[i] = s->tokens[(int64_t)i0 * R + i]; }
        model->rp_key = rp_key(RP_STREAM_TASKS, (uint64_t)R, (uint64_t)i0); // randomized positions: the batch's draw
        gpt2_forward(model, x, NULL, rows, R, 0);
        for (int r = 0; r < rows; r++) {
            const uint16_t* row = s->tokens + (int64_t)(i0 + r) * R;
            const uint8_t* m = s->mask + (int64_t)(i0 + r) * R;
            int all = 1, eos = R - 1; // the last scored target, EOS
            while (!m[eos]) { eos--; }
            for (int t = 0; t + 1 < R; t++) { // position t predicts token t + 1 (the row's last predicts none)
                if (!m[t + 1]) { continue; }
                gpt2_logits_row(model, r, t, logits);
                int best = task_argmax(logits, V);
                if (i0 + r == 0 && all) { shown[shown_len++] = task_token_char(best); }
                all &= best == row[t + 1];
                if (t + 1 < eos) { sums[2] += 1; sums[3] += best == row[t + 1]; }
            }
            sums[0] += 1;
            sums[1] += all;
            if (i0 + r == 0) { shown_right = all; }
        }
    }
    mp_allreduce_sum_f64(sums, 4);
    out->examples = sums[0];
    out->correct = sums[1];
    out->tokens = sums[2];
    out->tokens_right = sums[3];
    if (mp->rank == 0) {
        char lengths[32];
        task_lengths_text(s, lengths, sizeof(lengths));
        printf("  %s %s: ", TASK_NAMES[s->task], lengths);
        for (int t = 0; t < R && s->tokens[t] != TOK_PAD; t++) { putchar(task_token_char(s->tokens[t])); }
        printf("  greedy: %.*s%s\n", shown_len, shown, shown_right ? "" : " (wrong)");
    }
    free(x);
    free(logits);
    free(shown);
}

// Scores every task file (-A), prints the table and appends its rows to tasks.csv in dir
// (if given; llmc/utils.h: every evaluation's rows stay, each with its step)
#define TASKS_CSV "tasks.csv"
#define TASKS_CSV_HEADER "pe,train_len,step,task,min_len,max_len,examples,correct,accuracy,tokens,tokens_correct,token_accuracy\n"
static void task_eval(GPT2* model, const TaskSets* ts, int64_t batch_tokens, const MultiProcess* mp, const char* label,
                      int train_len, int step, const char* dir) {
    if (mp->rank == 0) { printf("tasks: pe %s, trained at T=%d, step %d: one example of each file, greedy\n", label, train_len, step); }
    TaskScore* sc = (TaskScore*)malloc_check((size_t)ts->num * sizeof(TaskScore));
    for (int k = 0; k < ts->num; k++) { task_set_score(model, &ts->sets[k], batch_tokens, mp, &sc[k]); }
    if (mp->rank == 0) {
        printf("| task     | lengths   | examples | exact match | token accuracy |\n");
        printf("|----------|----------:|---------:|------------:|---------------:|\n");
        AtomicFile af;
        if (dir != NULL) { csv_open(&af, dir, TASKS_CSV, TASKS_CSV_HEADER, INT_MAX); }
        for (int k = 0; k < ts->num; k++) {
            const TaskSet* s = &ts->sets[k];
            char lengths[32];
            task_lengths_text(s, lengths, sizeof(lengths));
            if (sc[k].note != NULL) {
                printf("| %-8s | %9s | %8d | %11s | %14s | %s\n", TASK_NAMES[s->task], lengths, s->rows, "n/a", "n/a", sc[k].note);
                if (dir != NULL) {
                    csv_row(&af, "%s,%d,%d,%s,%d,%d,%d,0,n/a,0,0,n/a\n", label, train_len, step, TASK_NAMES[s->task], s->min_len,
                            s->max_len, s->rows);
                }
                continue;
            }
            double acc = sc[k].correct / sc[k].examples, tok = sc[k].tokens_right / sc[k].tokens;
            printf("| %-8s | %9s | %8.0f | %11.4f | %14.4f |\n", TASK_NAMES[s->task], lengths, sc[k].examples, acc, tok);
            if (dir != NULL) {
                csv_row(&af, "%s,%d,%d,%s,%d,%d,%.0f,%.0f,%.6f,%.0f,%.0f,%.6f\n", label, train_len, step, TASK_NAMES[s->task],
                        s->min_len, s->max_len, sc[k].examples, sc[k].correct, acc, sc[k].tokens, sc[k].tokens_right, tok);
            }
        }
        if (dir != NULL) { atomic_commit(&af); }
        fflush(stdout);
    }
    free(sc);
}

#endif // LLMC_TASK_EVAL_H
