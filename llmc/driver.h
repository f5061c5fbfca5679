/*
The training program around the model, shared by both trainers so that they take the
same flags, read the same files, print the same lines and evaluate the same way:
command line, data, the training loop with gradient accumulation and data-parallel
averaging, validation, sampling, checkpoints and exact resume, training health
(non-finite and outlier steps), and the length-extrapolation evaluation.

The trainer that includes this file provides the model (type GPT2, real) and:
  gpt2_build_from_config, gpt2_build_from_checkpoint, gpt2_save_checkpoint,
  gpt2_forward, gpt2_backward, gpt2_zero_grad, gpt2_allreduce_grads,
  gpt2_grad_norm_squared, gpt2_update, gpt2_logits_row, gpt2_token_losses,
  gpt2_max_length, gpt2_opt_state_size, gpt2_opt_state_get, gpt2_opt_state_set,
  gpt2_peak_memory_mib, gpt2_step_info (text appended to the step line, e.g. MFU),
  gpt2_free, and the string TRAINER_NAME.
*/
#ifndef LLMC_DRIVER_H
#define LLMC_DRIVER_H

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "utils.h"
#include "pe.h"
#include "rand.h"
#include "model.h"
#include "dataloader.h"
#include "tokenizer.h"
#include "multiprocess.h"

#define MAX_EVAL_LENGTHS 32

typedef struct {
    const char* train_pattern;   // -i
    const char* val_pattern;     // -j
    const char* model;           // -e checkpoint file or preset name
    const char* output_dir;      // -o
    int B;                       // -b micro batch size per process
    int T;                       // -t sequence length
    int total_batch;             // -d total batch size in tokens (-1: B * T * processes)
    int max_steps;               // -x (-1: one epoch)
    float lr;                    // -l
    int warmup;                  // -u
    float final_lr_frac;         // -q
    float weight_decay;          // -c
    int val_every;               // -v
    int val_batches;             // -m
    int sample_every;            // -s
    int gen_tokens;              // -g
    int checkpoint_every;        // -n
    int resume;                  // -y
    int zero_stage;              // -z
    int overfit;                 // -a overfit a single batch
    float skip_loss_z;           // -sl skip the update when the loss z-score exceeds this (0: off)
    float skip_grad_z;           // -sg same for the gradient norm
    uint64_t seed;               // -R
    int eval_lengths[MAX_EVAL_LENGTHS]; // -E comma list (empty: no extrapolation evaluation)
    int num_eval_lengths;
    int eval_tokens;             // -K scored tokens per length
    int eval_stride;             // -W sliding-window stride (0: T/2; -1: non-overlapping only)
    int eval_every;              // -V extrapolation evaluation every this many steps (0: at the end only)
} TrainArgs;

static void usage(void) {
    printf(
        "usage: ./" TRAINER_NAME " [flags], each flag followed by a value\n"
        "  -i <glob>   train data shards (default data/starter/starter_train_*.bin)\n"
        "  -j <glob>   val data shards (default data/starter/starter_val_*.bin)\n"
        "  -e <model>  checkpoint .bin, or preset: nano (2L 4H 128), cpu (4L 8H 256), tiny (6L 8H 512),\n"
        "              small (12L 12H 768), medium (24L 16H 1024), d6/d12/d24/d36/d48 as llm.c (default cpu)\n"
        "  -o <dir>    output directory: main.log, checkpoints, extrapolation.csv (default none)\n"
        "  -b <int>    micro batch size per process (default 8)\n"
        "  -t <int>    sequence length (default 128)\n"
        "  -d <int>    total batch size in tokens, a multiple of B*T*processes (default B*T*processes)\n"
        "  -x <int>    optimizer steps (default 200; -1: one epoch; 0: evaluation only)\n"
        "  -l <float>  learning rate (default 1e-3)\n"
        "  -u <int>    warmup steps (default 20)\n"
        "  -q <float>  final learning rate as a fraction of -l, after cosine decay (default 0.1)\n"
        "  -c <float>  weight decay of the matrices (default 0.1)\n"
        "  -v <int>    validation loss every N steps (default 50)\n"
        "  -m <int>    validation batches (default 20; -1: all)\n"
        "  -s <int>    sample every N steps (default 100; 0: never)\n"
        "  -g <int>    tokens to sample (default 64)\n"
        "  -n <int>    checkpoint every N steps (default 0: only at the end)\n"
        "  -y <int>    resume from the latest checkpoint in -o (default 0)\n"
        "  -z <int>    ZeRO stage (0, or 1 on the CUDA trainer) (default 0)\n"
        "  -a <int>    overfit a single batch, for debugging (default 0)\n"
        "  -sl <float> skip updates whose loss z-score exceeds this (default 0: off)\n"
        "  -sg <float> skip updates whose gradient-norm z-score exceeds this (default 0: off)\n"
        "  -R <int>    random seed for initialization and sampling (default 42)\n"
        "  -E <list>   extrapolation evaluation lengths, e.g. 128,256,512 (default 1x..16x T; 'none': off)\n"
        "  -K <int>    scored tokens per evaluation length (default 4096)\n"
        "  -W <int>    sliding-window stride (default T/2; -1: non-overlapping windows only)\n"
        "  -V <int>    extrapolation evaluation every N steps (default 0: at the end only)\n");
    exit(0);
}

static void parse_eval_lengths(TrainArgs* a, const char* s) {
    a->num_eval_lengths = 0;
    if (strcmp(s, "none") == 0) { return; }
    char buf[1024];
    if (strlen(s) >= sizeof(buf)) { fatal("flag -E: list too long"); }
    strcpy(buf, s);
    for (char* tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
        if (a->num_eval_lengths == MAX_EVAL_LENGTHS) { fatal("flag -E: at most %d lengths", MAX_EVAL_LENGTHS); }
        a->eval_lengths[a->num_eval_lengths++] = (int)parse_long("-E", tok, 1, 1 << 24);
    }
}

static void parse_args(TrainArgs* a, int argc, char** argv) {
    a->train_pattern = "data/starter/starter_train_*.bin";
    a->val_pattern = "data/starter/starter_val_*.bin";
    a->model = "cpu";
    a->output_dir = NULL;
    a->B = 8; a->T = 128; a->total_batch = -1; a->max_steps = 200;
    a->lr = 1e-3f; a->warmup = 20; a->final_lr_frac = 0.1f; a->weight_decay = 0.1f;
    a->val_every = 50; a->val_batches = 20; a->sample_every = 100; a->gen_tokens = 64;
    a->checkpoint_every = 0; a->resume = 0; a->zero_stage = 0; a->overfit = 0;
    a->skip_loss_z = 0; a->skip_grad_z = 0; a->seed = 42;
    a->num_eval_lengths = -1; a->eval_tokens = 4096; a->eval_stride = 0; a->eval_every = 0;
    for (int i = 1; i < argc; i += 2) {
        const char* f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) { usage(); }
        if (f[0] != '-' || f[1] == '\0' || strlen(f) > 3) { fatal("unexpected argument '%s' (./%s -h lists the flags)", f, TRAINER_NAME); }
        if (i + 1 >= argc) { fatal("flag %s needs a value (./%s -h lists the flags)", f, TRAINER_NAME); }
        const char* v = argv[i + 1];
        if (!strcmp(f, "-i")) { a->train_pattern = v; }
        else if (!strcmp(f, "-j")) { a->val_pattern = v; }
        else if (!strcmp(f, "-e")) { a->model = v; }
        else if (!strcmp(f, "-o")) { a->output_dir = v; }
        else if (!strcmp(f, "-b")) { a->B = (int)parse_long(f, v, 1, 1 << 20); }
        else if (!strcmp(f, "-t")) { a->T = (int)parse_long(f, v, 1, 1 << 24); }
        else if (!strcmp(f, "-d")) { a->total_batch = (int)parse_long(f, v, -1, INT32_MAX); }
        else if (!strcmp(f, "-x")) { a->max_steps = (int)parse_long(f, v, -1, INT32_MAX); }
        else if (!strcmp(f, "-l")) { a->lr = parse_float(f, v, 0.0f, 10.0f); }
        else if (!strcmp(f, "-u")) { a->warmup = (int)parse_long(f, v, 0, INT32_MAX); }
        else if (!strcmp(f, "-q")) { a->final_lr_frac = parse_float(f, v, 0.0f, 1.0f); }
        else if (!strcmp(f, "-c")) { a->weight_decay = parse_float(f, v, 0.0f, 10.0f); }
        else if (!strcmp(f, "-v")) { a->val_every = (int)parse_long(f, v, 0, INT32_MAX); }
        else if (!strcmp(f, "-m")) { a->val_batches = (int)parse_long(f, v, -1, INT32_MAX); }
        else if (!strcmp(f, "-s")) { a->sample_every = (int)parse_long(f, v, 0, INT32_MAX); }
        else if (!strcmp(f, "-g")) { a->gen_tokens = (int)parse_long(f, v, 1, 1 << 20); }
        else if (!strcmp(f, "-n")) { a->checkpoint_every = (int)parse_long(f, v, 0, INT32_MAX); }
        else if (!strcmp(f, "-y")) { a->resume = (int)parse_long(f, v, 0, 1); }
        else if (!strcmp(f, "-z")) { a->zero_stage = (int)parse_long(f, v, 0, 1); }
        else if (!strcmp(f, "-a")) { a->overfit = (int)parse_long(f, v, 0, 1); }
        else if (!strcmp(f, "-sl")) { a->skip_loss_z = parse_float(f, v, 0.0f, 1e9f); }
        else if (!strcmp(f, "-sg")) { a->skip_grad_z = parse_float(f, v, 0.0f, 1e9f); }
        else if (!strcmp(f, "-R")) { a->seed = (uint64_t)parse_long(f, v, 0, INT32_MAX); }
        else if (!strcmp(f, "-E")) { parse_eval_lengths(a, v); }
        else if (!strcmp(f, "-K")) { a->eval_tokens = (int)parse_long(f, v, 1, INT32_MAX); }
        else if (!strcmp(f, "-W")) { a->eval_stride = (int)parse_long(f, v, -1, 1 << 24); }
        else if (!strcmp(f, "-V")) { a->eval_every = (int)parse_long(f, v, 0, INT32_MAX); }
        else { fatal("unknown flag %s (./%s -h lists the flags)", f, TRAINER_NAME); }
    }
    if (a->resume && a->output_dir == NULL) { fatal("-y 1 (resume) needs an output directory (-o)"); }
    if (a->num_eval_lengths < 0) { // default: 1x, 2x, 4x, 8x, 16x the training length
        a->num_eval_lengths = 5;
        for (int k = 0; k < 5; k++) { a->eval_lengths[k] = a->T << k; }
    }
}

// ----------------------------------------------------------------------------
// learning rate: linear warmup, then cosine decay to final_lr_frac * lr at the last step

static float learning_rate(const TrainArgs* a, int step, int total_steps) {
    if (step < a->warmup) { return a->lr * (step + 1) / a->warmup; }
    if (total_steps <= a->warmup) { return a->lr; }
    float progress = (float)(step - a->warmup) / (float)(total_steps - a->warmup);
    if (progress > 1) { progress = 1; }
    float min_lr = a->lr * a->final_lr_frac;
    return min_lr + 0.5f * (1.0f + cosf((float)M_PI * progress)) * (a->lr - min_lr);
}

// ----------------------------------------------------------------------------
// training health: z-score of a value against a window of the recent ones (llm.c's
// outlier detector), used to skip updates on loss or gradient-norm spikes

#define OUTLIER_WINDOW 128
typedef struct {
    double buffer[OUTLIER_WINDOW];
    int count;
    int index;
    double sum, sum_sq;
} OutlierDetector;

static void outlier_init(OutlierDetector* d) { memset(d, 0, sizeof(*d)); }

// z-score of x against the window (nan until the window is full), then adds x; a
// non-finite x is left out of the window (it would poison the sums for good)
static double outlier_update(OutlierDetector* d, double x) {
    double z = NAN;
    if (!isfinite(x)) { return z; }
    if (d->count == OUTLIER_WINDOW) {
        double mean = d->sum / OUTLIER_WINDOW;
        double var = d->sum_sq / OUTLIER_WINDOW - mean * mean;
        double sd = var > 0 ? sqrt(var) : 0;
        z = sd > 0 ? (x - mean) / sd : 0;
        double old = d->buffer[d->index];
        d->sum -= old;
        d->sum_sq -= old * old;
    } else {
        d->count++;
    }
    d->buffer[d->index] = x;
    d->sum += x;
    d->sum_sq += x * x;
    d->index = (d->index + 1) % OUTLIER_WINDOW;
    return z;
}

// the detectors go into the state file, so a resumed run skips the same steps
#define OUTLIER_STATE_BYTES (2 * 4 + (2 + OUTLIER_WINDOW) * 8)
static void outlier_save(AtomicFile* af, const OutlierDetector* d) {
    atomic_write(af, &d->count, sizeof(int), 1);
    atomic_write(af, &d->index, sizeof(int), 1);
    atomic_write(af, &d->sum, sizeof(double), 1);
    atomic_write(af, &d->sum_sq, sizeof(double), 1);
    atomic_write(af, d->buffer, sizeof(double), OUTLIER_WINDOW);
}
static void outlier_load(FILE* f, OutlierDetector* d, const char* path) {
    fread_check(&d->count, sizeof(int), 1, f, path);
    fread_check(&d->index, sizeof(int), 1, f, path);
    fread_check(&d->sum, sizeof(double), 1, f, path);
    fread_check(&d->sum_sq, sizeof(double), 1, f, path);
    fread_check(d->buffer, sizeof(double), OUTLIER_WINDOW, f, path);
    if (d->count < 0 || d->count > OUTLIER_WINDOW || d->index < 0 || d->index >= OUTLIER_WINDOW) {
        fatal("%s: corrupt training-health window", path);
    }
}

// ----------------------------------------------------------------------------
// main.log (llm.c's format: "s:<step> trl:<loss> lr:<lr> norm:<norm>" and
// "s:<step> tel:<val loss>"): appended, flushed and fsynced line by line; on resume the
// lines after the resumed step (and a line torn by a crash) are dropped, atomically

typedef struct {
    int active;
    char path[PATH_MAX];
} Logger;

static void logger_init(Logger* lg, const char* dir, int rank, int resume_step) {
    lg->active = dir != NULL && rank == 0;
    if (!lg->active) { return; }
    snprintf(lg->path, sizeof(lg->path), "%s/main.log", dir);
    AtomicFile af;
    atomic_open(&af, lg->path);
    FILE* old = resume_step > 0 ? fopen(lg->path, "r") : NULL;
    if (old != NULL) { // keep complete lines of steps up to the one we resume from
        char line[512];
        while (fgets(line, sizeof(line), old) != NULL) {
            int s;
            if (line[strlen(line) - 1] == '\n' && sscanf(line, "s:%d", &s) == 1 && s <= resume_step) {
                atomic_write(&af, line, 1, strlen(line));
            }
        }
        fclose(old);
    }
    atomic_commit(&af);
}

static void logger_line(Logger* lg, const char* fmt, ...) {
    if (!lg->active) { return; }
    FILE* f = fopen_check(lg->path, "a");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0 || ferror(f)) { fatal("cannot write %s (%s)", lg->path, strerror(errno)); }
    fclose(f);
}

// ----------------------------------------------------------------------------
// checkpoints and resume: model_<step>.bin, state_<step>_<rank>.bin, then DONE_<step>
// once every rank has written its files; resume picks the largest DONE step

static int find_max_done_step(const char* dir) {
    DIR* d = opendir(dir);
    if (d == NULL) { return -1; }
    int best = -1;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        int s;
        char tail;
        if (sscanf(e->d_name, "DONE_%d%c", &s, &tail) == 1 && s > best) { best = s; }
    }
    closedir(d);
    return best;
}

static void save_training(GPT2* model, const TrainArgs* a, const MultiProcess* mp, int step,
                          uint64_t rng, const DataLoader* train, int updates, int bad_steps, const OutlierDetector* health) {
    char path[PATH_MAX];
    if (mp->rank == 0) {
        snprintf(path, sizeof(path), "%s/model_%08d.bin", a->output_dir, step);
        gpt2_save_checkpoint(model, path);
    }
    TrainState s;
    memset(&s, 0, sizeof(s));
    s.step = step; s.world = mp->world; s.rank = mp->rank; s.pe = PE_ID; s.rng = rng;
    s.shard_idx = train->shard_idx; s.shard_pos = (uint64_t)train->pos;
    s.updates = updates; s.bad_steps = bad_steps;
    s.num_params = gpt2_opt_state_size(model);
    float* m = (float*)malloc_check(s.num_params * sizeof(float));
    float* v = (float*)malloc_check(s.num_params * sizeof(float));
    gpt2_opt_state_get(model, m, v);
    int header[256];
    state_header_fill(header, &s);
    snprintf(path, sizeof(path), "%s/state_%08d_%05d.bin", a->output_dir, step, mp->rank);
    AtomicFile af;
    atomic_open(&af, path);
    atomic_write(&af, header, sizeof(int), 256);
    atomic_write(&af, m, sizeof(float), s.num_params);
    atomic_write(&af, v, sizeof(float), s.num_params);
    outlier_save(&af, &health[0]);
    outlier_save(&af, &health[1]);
    atomic_commit(&af);
    free(m);
    free(v);
    mp_barrier();
    if (mp->rank == 0) {
        snprintf(path, sizeof(path), "%s/DONE_%08d", a->output_dir, step);
        atomic_open(&af, path);
        atomic_commit(&af);
        printf("wrote checkpoint %s/model_%08d.bin\n", a->output_dir, step);
    }
}

static void load_training_state(GPT2* model, const char* dir, int step, const MultiProcess* mp, int* out_step,
                                uint64_t* rng, DataLoader* train, int* updates, int* bad_steps, OutlierDetector* health) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/state_%08d_%05d.bin", dir, step, mp->rank);
    TrainState s;
    FILE* f = state_open(path, &s, 2 * OUTLIER_STATE_BYTES);
    if (s.world != mp->world) { fatal("%s was written by %d processes, this run has %d", path, s.world, mp->world); }
    if (s.pe != PE_ID) { fatal("%s belongs to PE '%s', this binary is PE '%s'", path, pe_name(s.pe), pe_name(PE_ID)); }
    if (s.num_params != gpt2_opt_state_size(model)) { fatal("%s does not match the model's parameter count", path); }
    float* m = (float*)malloc_check(s.num_params * sizeof(float));
    float* v = (float*)malloc_check(s.num_params * sizeof(float));
    fread_check(m, sizeof(float), s.num_params, f, path);
    fread_check(v, sizeof(float), s.num_params, f, path);
    outlier_load(f, &health[0], path);
    outlier_load(f, &health[1], path);
    fclose(f);
    gpt2_opt_state_set(model, m, v);
    free(m);
    free(v);
    *out_step = s.step;
    *rng = s.rng;
    *updates = s.updates;
    *bad_steps = s.bad_steps;
    dataloader_seek(train, (size_t)s.shard_idx, (int64_t)s.shard_pos);
}

// ----------------------------------------------------------------------------
// sampling: generate from the end-of-text token with the model's own distribution

static int sample_mult(const float* logits, int n, float coin) {
    float maxv = -INFINITY;
    for (int i = 0; i < n; i++) { if (logits[i] > maxv) { maxv = logits[i]; } }
    double sum = 0;
    for (int i = 0; i < n; i++) { sum += exp(logits[i] - maxv); }
    double cdf = 0;
    for (int i = 0; i < n; i++) {
        cdf += exp(logits[i] - maxv) / sum;
        if (coin < cdf) { return i; }
    }
    return n - 1;
}

static void generate_sample(GPT2* model, Tokenizer* tok, int gen_tokens, uint64_t* rng) {
    int maxlen = gen_tokens + 1;
    if (maxlen > gpt2_max_length(model)) { maxlen = gpt2_max_length(model); }
    int* seq = (int*)malloc_check(maxlen * sizeof(int));
    float* logits = (float*)malloc_check(model->config.padded_vocab_size * sizeof(float));
    for (int t = 0; t < maxlen; t++) { seq[t] = GPT2_EOT < model->config.vocab_size ? GPT2_EOT : 0; }
    gpt2_forward(model, seq, NULL, 1, maxlen - 1, 0); // sizes the buffers once for the longest prefix
    printf("generating:\n---\n");
    for (int t = 1; t < maxlen; t++) {
        gpt2_forward(model, seq, NULL, 1, t, 0);
        gpt2_logits_row(model, 0, t - 1, logits);
        int next = sample_mult(logits, model->config.vocab_size, random_f32(rng));
        seq[t] = next;
        if (tok->init_ok && (uint32_t)next < tok->vocab_size) { safe_printf(tokenizer_decode(tok, next)); }
        else { printf("%d ", next); }
        fflush(stdout);
    }
    printf("\n---\n");
    free(seq);
    free(logits);
}

// ----------------------------------------------------------------------------
// validation loss: the first `batches` batches of the val split (all ranks, averaged)

static float validation_loss(GPT2* model, DataLoader* val, int batches, const MultiProcess* mp) {
    dataloader_reset(val);
    int64_t per_batch = (int64_t)val->world * val->B * val->T;
    int available = 0; // whole batches in the val split (a batch never spans two shards)
    for (size_t s = 0; s < val->num_shards; s++) { available += (int)((val->shard_ntok[s] - 1) / per_batch); }
    if (batches < 0 || batches > available) { batches = available; }
    if (batches < 1) { batches = 1; }
    double sum[1] = {0};
    for (int i = 0; i < batches; i++) {
        dataloader_next_batch(val);
        gpt2_forward(model, val->inputs, val->targets, val->B, val->T, 0);
        sum[0] += model->mean_loss;
    }
    mp_allreduce_sum_f64(sum, 1);
    return (float)(sum[0] / batches / mp->world);
}

// ----------------------------------------------------------------------------
// length extrapolation: perplexity on the val tokens at each length, in two modes
//   nonoverlap  windows of L tokens side by side, every token scored (CABLE/ALiBi papers)
//   sliding     windows of L tokens every `stride` tokens, only the last `stride` scored
// The same number of tokens is scored at every length where the data allows.

// the sliding-window stride: -W, or half the training length by default (0: no sliding mode)
static int eval_stride(const TrainArgs* a, int train_len) {
    if (a->eval_stride != 0) { return a->eval_stride > 0 ? a->eval_stride : 0; }
    return train_len / 2 > 0 ? train_len / 2 : 1;
}

typedef struct {
    int eval_len;
    const char* mode;
    int64_t tokens;     // scored tokens (0: not evaluated)
    double loss;
    double mem_mib;
    const char* note;   // why a row has no number
} EvalRow;

// mean loss of `num_windows` windows of L tokens: window k scores the `scored` tokens
// starting at first + k * scored, with the L - scored tokens before them as context.
// Windows are spread over the ranks and batched `batch_rows` at a time.
static double eval_windows(GPT2* model, const uint16_t* tokens, int64_t first, int64_t num_windows,
                           int L, int scored, int batch_rows, const MultiProcess* mp) {
    int* inp = (int*)malloc_check((size_t)batch_rows * L * sizeof(int));
    int* tgt = (int*)malloc_check((size_t)batch_rows * L * sizeof(int));
    float* losses = (float*)malloc_check((size_t)batch_rows * L * sizeof(float));
    double sum[1] = {0};
    for (int64_t w0 = (int64_t)mp->rank * batch_rows; w0 < num_windows; w0 += (int64_t)mp->world * batch_rows) {
        int rows = num_windows - w0 < batch_rows ? (int)(num_windows - w0) : batch_rows;
        for (int r = 0; r < rows; r++) {
            const uint16_t* src = tokens + first + (w0 + r) * scored - (L - scored);
            for (int t = 0; t < L; t++) { inp[r * L + t] = src[t]; tgt[r * L + t] = src[t + 1]; }
        }
        gpt2_forward(model, inp, tgt, rows, L, 0);
        gpt2_token_losses(model, losses);
        for (int r = 0; r < rows; r++) {
            for (int t = L - scored; t < L; t++) { sum[0] += losses[r * L + t]; }
        }
    }
    mp_allreduce_sum_f64(sum, 1);
    free(inp);
    free(tgt);
    free(losses);
    return sum[0] / ((double)num_windows * scored);
}

// Every length and mode scores the same tokens: non-overlapping windows tile tokens
// [0, K); sliding windows score [maxL - S, maxL - S + K) S at a time, so that even
// the first scored token has the full L - S tokens of context at every length.
static int run_extrapolation(GPT2* model, const TrainArgs* a, const MultiProcess* mp, int train_len, EvalRow* rows) {
    DataLoader val;
    dataloader_init(&val, a->val_pattern, 1, 1, 0, 1, model->config.vocab_size);
    int maxL = 0;
    for (int k = 0; k < a->num_eval_lengths; k++) { if (a->eval_lengths[k] > maxL) { maxL = a->eval_lengths[k]; } }
    int stride = eval_stride(a, train_len);
    int64_t ntok;
    uint16_t* tokens = dataloader_read_all(&val, (int64_t)a->eval_tokens + maxL + 1, &ntok);
    dataloader_free(&val);
    int nrows = 0;
    for (int k = 0; k < a->num_eval_lengths; k++) {
        int L = a->eval_lengths[k];
        for (int mode = 0; mode < 2; mode++) {
            if (mode == 1 && stride == 0) { continue; }
            EvalRow* r = &rows[nrows++];
            memset(r, 0, sizeof(*r));
            r->eval_len = L;
            r->mode = mode == 0 ? "nonoverlap" : "sliding";
            if (L > gpt2_max_length(model)) { r->note = "n/a: beyond the learned positions"; continue; }
            int scored = mode == 0 ? L : (stride < L ? stride : L);
            int64_t first = mode == 0 ? 0 : maxL - (stride < maxL ? stride : maxL);
            // the target number of scored tokens, cut to what the data holds
            int64_t want = ((int64_t)a->eval_tokens + scored - 1) / scored;
            int64_t fit = (ntok - 1 - first) / scored;
            int64_t windows = want < fit ? want : fit;
            if (windows < 1) { r->note = "n/a: not enough validation tokens"; continue; }
            int batch_rows = (a->B * a->T) / L;
            if (batch_rows < 1) { batch_rows = 1; }
            if (batch_rows > windows) { batch_rows = (int)windows; }
            r->loss = eval_windows(model, tokens, first, windows, L, scored, batch_rows, mp);
            r->tokens = windows * scored;
            r->mem_mib = gpt2_peak_memory_mib(model);
        }
    }
    free(tokens);
    return nrows;
}

static void report_extrapolation(const EvalRow* rows, int n, const TrainArgs* a, int train_len, int step, int stride) {
    char modes[64] = "non-overlapping windows only";
    if (stride > 0) { snprintf(modes, sizeof(modes), "sliding stride %d", stride); }
    printf("extrapolation: pe %s, trained at T=%d, step %d (%s)\n", model_label(PE_ID, DAPE_ID), train_len, step, modes);
    printf("| eval_len | mode       | tokens   | loss     | ppl        | peak mem MiB |\n");
    printf("|---------:|------------|---------:|---------:|-----------:|-------------:|\n");
    for (int i = 0; i < n; i++) {
        const EvalRow* r = &rows[i];
        if (r->tokens == 0) { printf("| %8d | %-10s | %8s | %8s | %10s | %12s | %s\n", r->eval_len, r->mode, "-", "n/a", "n/a", "-", r->note); }
        else { printf("| %8d | %-10s | %8lld | %8.4f | %10.3f | %12.1f |\n", r->eval_len, r->mode, (long long)r->tokens, r->loss, exp(r->loss), r->mem_mib); }
    }
    if (a->output_dir == NULL) { return; }
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/extrapolation.csv", a->output_dir);
    AtomicFile af;
    atomic_open(&af, path);
    char line[256];
    int len = snprintf(line, sizeof(line), "pe,train_len,eval_len,mode,tokens,loss,ppl\n");
    atomic_write(&af, line, 1, len);
    for (int i = 0; i < n; i++) {
        const EvalRow* r = &rows[i];
        if (r->tokens == 0) { len = snprintf(line, sizeof(line), "%s,%d,%d,%s,0,n/a,n/a\n", model_label(PE_ID, DAPE_ID), train_len, r->eval_len, r->mode); }
        else { len = snprintf(line, sizeof(line), "%s,%d,%d,%s,%lld,%.6f,%.6f\n", model_label(PE_ID, DAPE_ID), train_len, r->eval_len, r->mode, (long long)r->tokens, r->loss, exp(r->loss)); }
        atomic_write(&af, line, 1, len);
    }
    atomic_commit(&af);
}

static void extrapolation(GPT2* model, const TrainArgs* a, const MultiProcess* mp, int train_len, int step) {
    if (a->num_eval_lengths == 0) { return; }
    EvalRow rows[2 * MAX_EVAL_LENGTHS];
    int n = run_extrapolation(model, a, mp, train_len, rows);
    if (mp->rank == 0) { report_extrapolation(rows, n, a, train_len, step, eval_stride(a, train_len)); }
}

// ----------------------------------------------------------------------------

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int train_main(int argc, char** argv) {
    MultiProcess mp;
    mp_init(&mp, &argc, &argv);
    TrainArgs a;
    parse_args(&a, argc, argv);
    char desc[4096]; // every flag, so that ranks started differently are caught at once
    snprintf(desc, sizeof(desc), "%s|%s|%s|%s|%d %d %d %d %g %d %g %g %d %d %d %d %d %d %d %d %g %g %llu %d %d %d %d",
             a.train_pattern, a.val_pattern, a.model, a.output_dir ? a.output_dir : "", a.B, a.T, a.total_batch,
             a.max_steps, a.lr, a.warmup, a.final_lr_frac, a.weight_decay, a.val_every, a.val_batches, a.sample_every,
             a.gen_tokens, a.checkpoint_every, a.resume, a.zero_stage, a.overfit, a.skip_loss_z, a.skip_grad_z,
             (unsigned long long)a.seed, a.num_eval_lengths, a.eval_tokens, a.eval_stride, a.eval_every);
    mp_check_same(desc, strlen(desc), "configuration (flags)");
    if (a.output_dir != NULL && mp.rank == 0) { ensure_dir_writable(a.output_dir); }
    mp_barrier();

    // the model: resume, checkpoint, or a preset
    GPT2 model;
    int resume_step = a.resume ? find_max_done_step(a.output_dir) : -1;
    char path[PATH_MAX];
    if (resume_step >= 0) {
        snprintf(path, sizeof(path), "%s/model_%08d.bin", a.output_dir, resume_step);
        gpt2_build_from_checkpoint(&model, path);
    } else if (strlen(a.model) > 4 && strcmp(a.model + strlen(a.model) - 4, ".bin") == 0) {
        gpt2_build_from_checkpoint(&model, a.model);
    } else {
        GPT2Config cfg;
        if (!gpt2_config_from_preset(&cfg, a.model, a.T, PE_ID)) {
            fatal("-e %s is neither a .bin checkpoint nor a preset (nano, cpu, tiny, small, medium, d6..d48)", a.model);
        }
        gpt2_build_from_config(&model, &cfg, a.seed);
    }
    GPT2Config* cfg = &model.config;
    int training = a.max_steps != 0;
    if (training && a.T > gpt2_max_length(&model)) {
        fatal("-t %d is beyond maxT = %d of this learned-PE model", a.T, gpt2_max_length(&model));
    }
    int tokens_per_micro = a.B * a.T * mp.world;
    if (a.total_batch == -1) { a.total_batch = tokens_per_micro; }
    if (a.total_batch % tokens_per_micro != 0) {
        fatal("total batch -d %d is not a multiple of B*T*processes = %d*%d*%d", a.total_batch, a.B, a.T, mp.world);
    }
    int grad_accum = a.total_batch / tokens_per_micro;

    // data: the val split is required (validation, extrapolation); train only when training
    DataLoader train, val;
    dataloader_init(&val, a.val_pattern, a.B, a.T, mp.rank, mp.world, cfg->vocab_size);
    if (training) { dataloader_init(&train, a.overfit ? a.val_pattern : a.train_pattern, a.B, a.T, mp.rank, mp.world, cfg->vocab_size); }
    int total_steps = a.max_steps;
    if (training && total_steps < 0) { total_steps = (int)(train.num_tokens / a.total_batch); }
    if (training && total_steps < 1) { fatal("the training data holds fewer tokens than one step's %d", a.total_batch); }

    if (mp.rank == 0) {
        printf("+-----------------------+----------------------------------------------------+\n");
        printf("| %-21s | %-50s |\n", "trainer", TRAINER_NAME);
        printf("| %-21s | %-50s |\n", "positional encoding", model_label(PE_ID, DAPE_ID));
        if (cfg->dape != 0) {
            char dape[64];
            snprintf(dape, 64, "kernel 1x%d, width D=%d, edge exact %d", cfg->dape, cfg->dape_width, DAPE_EDGE_EXACT);
            printf("| %-21s | %-50s |\n", "DAPE", dape);
        }
        printf("| %-21s | %-50s |\n", "model", resume_step >= 0 ? path : a.model);
        char cell[3][64]; // the rows made of several numbers, padded like the others
        snprintf(cell[0], 64, "L=%d NH=%d C=%d maxT=%d V=%d Vp=%d", cfg->num_layers, cfg->num_heads, cfg->channels, cfg->max_seq_len, cfg->vocab_size, cfg->padded_vocab_size);
        snprintf(cell[1], 64, "B=%d T=%d processes=%d total=%d accum=%d", a.B, a.T, mp.world, a.total_batch, grad_accum);
        snprintf(cell[2], 64, "lr %.2e warmup %d final %.2f wd %.2f", a.lr, a.warmup, a.final_lr_frac, a.weight_decay);
        printf("| %-21s | %-50s |\n", "config", cell[0]);
        printf("| %-21s | %-50zu |\n", "parameters", count_parameters(cfg));
        printf("| %-21s | %-50s |\n", "train data", training ? (a.overfit ? a.val_pattern : a.train_pattern) : "(evaluation only)");
        printf("| %-21s | %-50s |\n", "val data", a.val_pattern);
        printf("| %-21s | %-50s |\n", "batch", cell[1]);
        printf("| %-21s | %-50d |\n", "steps", training ? total_steps : 0);
        printf("| %-21s | %-50s |\n", "optimizer", cell[2]);
        printf("| %-21s | %-50s |\n", "output dir", a.output_dir ? a.output_dir : "(none)");
        printf("+-----------------------+----------------------------------------------------+\n");
        fflush(stdout);
    }

    Tokenizer tokenizer; // only to print samples as text
    memset(&tokenizer, 0, sizeof(tokenizer));
    if (training && a.sample_every > 0 && mp.rank == 0) { tokenizer_init(&tokenizer, "gpt2_tokenizer.bin"); }
    uint64_t rng = random_seed(a.seed + 1000003ull * (uint64_t)mp.rank);
    int start_step = 0, updates = 0, bad_steps = 0;
    OutlierDetector health[2]; // z-scores of the loss and of the gradient norm
    outlier_init(&health[0]);
    outlier_init(&health[1]);
    if (resume_step >= 0 && training) {
        load_training_state(&model, a.output_dir, resume_step, &mp, &start_step, &rng, &train, &updates, &bad_steps, health);
        if (mp.rank == 0) { printf("resumed from step %d of %s\n", start_step, a.output_dir); }
    }
    Logger logger;
    logger_init(&logger, a.output_dir, mp.rank, resume_step >= 0 ? resume_step : 0);
    if (training && a.overfit) { dataloader_next_batch(&train); }

    double total_time = 0;
    int timed_steps = 0;
    for (int step = start_step; training; step++) {
        int last = step == total_steps;
        // the step a run resumes at already had its validation, sample and checkpoint
        int fresh = !(resume_step >= 0 && step == start_step);
        if (fresh && ((a.val_every > 0 && step % a.val_every == 0) || last)) {
            float vl = validation_loss(&model, &val, a.val_batches, &mp);
            if (mp.rank == 0) { printf("val loss %.6f\n", vl); }
            logger_line(&logger, "s:%d tel:%.4f\n", step, vl);
        }
        if (fresh && a.eval_every > 0 && step % a.eval_every == 0 && step > 0 && !last) { extrapolation(&model, &a, &mp, a.T, step); }
        if (fresh && mp.rank == 0 && a.sample_every > 0 && (step % a.sample_every == 0 || last) && step > 0) {
            generate_sample(&model, &tokenizer, a.gen_tokens, &rng);
        }
        if (fresh && a.output_dir != NULL && ((a.checkpoint_every > 0 && step % a.checkpoint_every == 0 && step > 0) || last)) {
            save_training(&model, &a, &mp, step, rng, &train, updates, bad_steps, health);
        }
        if (last) { break; }

        // one optimizer step: grad_accum micro-batches, averaged over processes
        double t0 = now_seconds();
        gpt2_zero_grad(&model);
        double loss[1] = {0};
        for (int micro = 0; micro < grad_accum; micro++) {
            if (!a.overfit) { dataloader_next_batch(&train); }
            gpt2_forward(&model, train.inputs, train.targets, a.B, a.T, 1.0f / grad_accum);
            gpt2_backward(&model);
            loss[0] += model.mean_loss / grad_accum;
        }
        gpt2_allreduce_grads(&model, &mp);
        mp_allreduce_sum_f64(loss, 1);
        loss[0] /= mp.world;
        double norm = sqrt(gpt2_grad_norm_squared(&model));
        float lr = learning_rate(&a, step, total_steps);
        double zl = outlier_update(&health[0], loss[0]);
        double zn = outlier_update(&health[1], norm);
        int finite = isfinite(loss[0]) && isfinite(norm);
        int outlier = (a.skip_loss_z > 0 && zl > a.skip_loss_z) || (a.skip_grad_z > 0 && zn > a.skip_grad_z);
        if (finite && !outlier) {
            float clip = norm > 1.0 ? (float)(1.0 / norm) : 1.0f;
            gpt2_update(&model, lr, 0.9f, 0.95f, 1e-8f, a.weight_decay, clip, ++updates);
            bad_steps = 0;
        } else {
            bad_steps++;
            if (mp.rank == 0) {
                printf("step %d: update skipped (%s: loss %g, grad norm %g)\n", step + 1,
                       finite ? "outlier" : "non-finite", loss[0], norm);
            }
            if (!finite && bad_steps >= 5) {
                fatal("%d consecutive steps with a non-finite loss or gradient: stopping (last good checkpoint kept)", bad_steps);
            }
        }
        double dt = now_seconds() - t0;
        if (step > start_step) { total_time += dt; timed_steps++; }
        if (mp.rank == 0) {
            char info[128];
            gpt2_step_info(&model, dt, a.total_batch, info, sizeof(info));
            printf("step %4d/%d | loss %.6f (%+.2fz) | norm %.4f (%+.2fz) | lr %.2e | %.2f ms | %.0f tok/s%s\n",
                   step + 1, total_steps, loss[0], isnan(zl) ? 0.0 : zl, norm, isnan(zn) ? 0.0 : zn, lr, dt * 1000,
                   a.total_batch / dt, info);
            fflush(stdout);
        }
        logger_line(&logger, "s:%d trl:%.4f lr:%.6f norm:%.2f\n", step + 1, loss[0], lr, norm);
    }
    if (mp.rank == 0 && timed_steps > 0) {
        printf("total average iteration time: %.2f ms (%.0f tok/s)\n", total_time / timed_steps * 1000,
               a.total_batch * timed_steps / total_time);
    }
    extrapolation(&model, &a, &mp, training ? a.T : cfg->max_seq_len, training ? total_steps : 0);

    if (training) { dataloader_free(&train); }
    dataloader_free(&val);
    tokenizer_free(&tokenizer);
    gpt2_free(&model);
    mp_finalize();
    return 0;
}

#endif // LLMC_DRIVER_H
