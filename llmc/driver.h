/*
The training program around the model, shared by both trainers so that they take the
same flags, read the same files, print the same lines and evaluate the same way:
command line, data, the training loop with gradient accumulation and data-parallel
averaging, validation, sampling, checkpoints and exact resume, training health
(non-finite and outlier steps), and the evaluations: length extrapolation on each test set,
HellaSwag (llmc/hellaswag.h), passkey retrieval (llmc/passkey.h) and the algorithmic tasks'
accuracy by length (llmc/task_eval.h).

The trainer that includes this file provides the model (type GPT2, real) and:
  gpt2_build_from_config, gpt2_build_from_checkpoint, gpt2_save_checkpoint,
  gpt2_forward, gpt2_backward, gpt2_zero_grad, gpt2_allreduce_grads,
  gpt2_grad_norm_squared, gpt2_update, gpt2_logits_row, gpt2_token_losses,
  gpt2_max_length, gpt2_reaches, gpt2_opt_state_size, gpt2_opt_state_get, gpt2_opt_state_set,
  gpt2_peak_memory_mib, gpt2_step_info (text appended to the step line, e.g. MFU),
  gpt2_free, pe_resume_bytes, pe_resume_save, pe_resume_load (the encoding's own state in the
  training state file: FLOATER's positions in use), the string TRAINER_NAME, TRAINER_COMPUTE (the table's "compute" row, optional) and
  TRAINER_PASS_TOKENS (a training pass's fixed cost in tokens, for the length buckets of
  masked rows); the model's fields pe_eval (the evaluation variant), rp_key (the key of the
  next forward pass's randomized positions) and rp_draw_len (how many a draw takes) are set here.
*/
#ifndef LLMC_DRIVER_H
#define LLMC_DRIVER_H

#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include "utils.h"
#include "pe.h"
#include "rand.h"
#include "model.h"
#include "dataloader.h"
#include "tokenizer.h"
#include "multiprocess.h"
#ifdef _OPENMP
#include <omp.h>
#endif
#include "hellaswag.h"
#include "passkey.h"
#include "task_eval.h"

#define MAX_EVAL_LENGTHS 32
#define MAX_EVAL_SETS 8
// sampling recomputes the whole prefix for every token (there is no key/value cache), so
// its time grows with the square of -g: this bounds it
#define MAX_GEN_TOKENS 1024
// ZeRO stage 1 (the optimizer state sharded over the processes) exists in the CUDA trainer only
#ifdef __CUDACC__
#define MAX_ZERO_STAGE 1
#else
#define MAX_ZERO_STAGE 0
#endif

typedef struct {
    const char* train_pattern;   // -i
    const char* val_pattern;     // the first set of -j: validation, and -a's batch
    const char* val_sets;        // -j as given: one pattern, or name=pattern items
    const char* set_names[MAX_EVAL_SETS]; // each set of -j, evaluated at every -E length
    const char* set_patterns[MAX_EVAL_SETS];
    int num_sets;
    char sets_buf[4096];         // holds the names and patterns of name=pattern items
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
    int pass_tokens;             // -lb masked rows in length buckets, a pass costing this many tokens (-1: off)
    float skip_loss_z;           // -sl skip the update when the loss z-score exceeds this (0: off)
    float skip_grad_z;           // -sg same for the gradient norm
    uint64_t seed;               // -R
    int eval_lengths[MAX_EVAL_LENGTHS]; // -E comma list (empty: no extrapolation evaluation)
    int num_eval_lengths;        // -1: the default (default_eval_lengths)
    int eval_tokens;             // -K scored tokens per length
    int eval_stride;             // -W sliding-window stride (0: half the training length; -1: non-overlapping only)
    int eval_every;              // -V extrapolation evaluation every this many steps (0: at the end only)
    int argc;                    // the command line, to tell the flags given from the defaults
    char** argv;
    int eval_variants[PE_EVAL_NUM]; // -rs (RoPE scaling methods), -xb 1 (xPos's BCA): extra row sets
    int num_eval_variants;
    float rope_factor;           // -rf static RoPE scaling factor (0: longest -E length / training length)
    RopeTable rope_table;        // -rb, -rt, -rr rope's frequency table (llmc/pe.h; -1: not given, the model's)
    int shape_k;                 // -sk shape's offset K (pe/sinusoidal.h; -1: not given, the model's)
    CapeAugment cape;            // -cg, -cs, -cl cape's augmentation in training (llmc/pe.h; -1: not given, the default)
    int shaw_k;                  // -ak shaw's clipping distance k of a new model (pe/shaw.h; -1: not given, the default)
    int shaw_values;             // -av shaw's value table a^V in a new model, 1, or 0 keys only (-1: not given, 1)
    int floater_refresh;         // -fr floater's refresh R (pe/floater.h; -1: not given, the model's)
    int rand_pos;                // -rp randomized positions from [0, L) (llmc/pe.h; -1: not given, 0: off)
    int pose_len;                // -po PoSE's target length L: rows in two chunks at positions up to L - 1 (0: off)
    int eval_last;               // -L also score only the last N tokens of each window (DAPE's protocol; 0: off)
    const char* hellaswag;       // -H HellaSwag in llm.c's eval file format (NULL: none)
    int passkey_trials;          // -P keys per cell of the passkey test's grid (0: off)
    int passkey_depths;          // -Pd depths of the key, evenly spaced from 0% to 100%
    int passkey_seed;            // -Ps seed of the keys
    const char* tasks;           // -A task files of data/tasks.c, scored by length (NULL: none)
} TrainArgs;

// the length buckets' pass cost in effect (-lb; -1: whole rows): whole rows where a row cut
// short would compute otherwise (llmc/model.h: PE_WHOLE_ROWS)
static int bucket_pass_tokens(int flag) { return PE_WHOLE_ROWS ? -1 : flag; }

static void usage(void) {
    printf(
        "usage: ./" TRAINER_NAME " [flags], each flag followed by a value\n"
        "  -i <glob>   train data shards (default data/starter/starter_train_*.bin)\n"
        "  -j <glob>   val data shards (default data/starter/starter_val_*.bin), or named test sets\n"
        "              name=glob,name=glob,... each evaluated at every -E length (validation: the first)\n"
        "  -e <model>  checkpoint .bin, or preset: nano (2L 4H 128), cpu (4L 8H 256), tiny (6L 8H 512),\n"
        "              small (12L 12H 768), medium (24L 16H 1024), d6/d12/d24/d36/d48 as llm.c, task (2L 2H 64)\n"
        "              (default cpu)\n"
        "  -o <dir>    output directory: main.log, checkpoints, extrapolation.csv, positions.csv, the run's flags\n"
        "              (cmdline) (default none); one trainer at a time (a lock); a new run only into a directory\n"
        "              without one (-y 1)\n"
        "  -b <int>    micro batch size per process (default 8)\n"
        "  -t <int>    sequence length (default 128)\n"
        "  -d <int>    total batch size in tokens, a positive multiple of B*T*processes (default -1: B*T*processes)\n"
        "  -x <int>    optimizer steps (default 200; -1: one epoch; 0: evaluation only)\n"
        "  -l <float>  learning rate (default 1e-3)\n"
        "  -u <int>    warmup steps (default 20)\n"
        "  -q <float>  final learning rate as a fraction of -l, after cosine decay (default 0.1)\n"
        "  -c <float>  weight decay of the matrices (default 0.1)\n"
        "  -v <int>    validation loss every N steps (default 50)\n"
        "  -m <int>    validation batches (default 20; -1: all; 0: no validation)\n"
        "  -s <int>    sample every N steps (default 100; 0: never)\n"
        "  -g <int>    tokens to sample, 1 to %d (default 64; learned: cut at maxT - 1)\n"
        "  -n <int>    checkpoint every N steps (default 0: only at the end)\n"
        "  -y <int>    resume from the latest checkpoint in -o (default 0); flags not given are the run's own;\n"
        "              without a checkpoint, the run starts again with its flags; with -x 0, evaluate that checkpoint\n"
        "  -z <int>    ZeRO stage (0, or 1 on the CUDA trainer) (default 0)\n"
        "  -a <int>    overfit a single batch, for debugging (default 0)\n"
        "  -lb <int>   masked (task) data: compute each row only up to its last scored target, the rows in\n"
        "              buckets by that length, as many as pay for a pass's fixed cost of this many tokens (the same\n"
        "              losses and gradients, to rounding; DAPE_1xk keeps whole rows) (default %d; -1: whole rows)\n"
        "  -sl <float> skip updates whose loss z-score exceeds this (default 0: off)\n"
        "  -sg <float> skip updates whose gradient-norm z-score exceeds this (default 0: off)\n"
        "  -R <int>    random seed for initialization and sampling (default 42)\n"
        "  -E <list>   extrapolation evaluation lengths, e.g. 128,256,512 (default 1x..16x the training length:\n"
        "              -t, or the checkpoint's maxT with -x 0; 'none': off)\n"
        "  -K <int>    scored tokens per evaluation length (default 4096)\n"
        "  -W <int>    sliding-window stride, >= 1 (default half the training length; -1: non-overlapping only)\n"
        "  -V <int>    extrapolation evaluation every N steps (default 0: at the end only)\n"
        "  -rs <list>  rope: also evaluate with RoPE scaling, any of pi,ntk,yarn (static factor -rf),\n"
        "              dynamic-pi,dynamic-ntk,dynamic-yarn (factor = length / training length) (default none)\n"
        "  -rf <float> static RoPE scaling factor of -rs pi, ntk, yarn, >= 1 (default: longest -E length /\n"
        "              training length)\n"
        "  -rb <int>   rope: the base of the frequencies theta_k = base^(-2k/hs), >= 2 (ABF; default: the\n"
        "              checkpoint's, 10000 for a preset); a run from a checkpoint may change it (fine-tuning)\n"
        "  -rt <int>   rope: truncated basis at length L (Giraffe): frequencies below 2 pi / L become 2 pi / (16 L),\n"
        "              below 2 pi / (8 L) 0 (default: the checkpoint's, 0 for a preset: off)\n"
        "  -rr <int>   rope: integer wavelengths round(2 pi / theta_k) (Resonance RoPE) (default: the checkpoint's,\n"
        "              0 for a preset: off); -rb, -rt, -rr apply in training and at evaluation, -rs scalings too\n"
        "  -xb <int>   xpos: also evaluate with blockwise causal attention beyond the training length (default 0)\n"
        "  -sk <int>   shape: each training row shifted by an offset from [0, K), evaluation by K (default: the\n"
        "              checkpoint's, %d for a new model)\n"
        "  -cg <num>   cape: each training row's positions shifted by u G - G/2, u uniform in [0, 1) (default %g)\n"
        "  -cs <num>   cape: each training row's positions scaled by S^(2u - 1), u uniform in [0, 1) (default %g: off)\n"
        "  -cl <int>   cape: each training token's position shifted by u - 1/2, u uniform in [0, 1) (default %d: on);\n"
        "              -cg, -cs, -cl are the run's, not the checkpoint's; an evaluation takes positions 0..T-1\n"
        "  -ak <int>   shaw: the clipping distance k, 1..%d: rows 0..k of a^K and a^V, every distance >= k row k\n"
        "              (default %d, the paper's; tensor2tensor's transformer_relative: 20)\n"
        "  -av <int>   shaw: 1 with the value table a^V (the paper's), 0 the key table alone (default 1); -ak, -av\n"
        "              make a new model's tables, a checkpoint holds its own\n"
        "  -fr <int>   floater: solve the positions' ODE again every R updates, between them the last solution without\n"
        "              a gradient to the ODE (default: the checkpoint's, %d for a new model, the official's; 1: every step)\n"
        "  -rp <int>   randomized positions: each step draws T sorted positions from [0, L), L >= T, for\n"
        "              %s\n"
        "              (default: the checkpoint's, 0 for a preset: off); evaluation draws them too, as the official code\n"
        "  -ra <int>   randomized positions: also evaluate with plain positions 0..T-1 (rows +plainpos) (default 0)\n"
        "  -po <int>   PoSE: train on rows of two chunks of a window of 5 (T + 1) tokens, the second at positions\n"
        "              skipped on by up to L - T - 1, so that T tokens reach positions up to L - 1 (default 0: off)\n"
        "  -L <int>    also score only the last N tokens of each window, DAPE's protocol (default 0: off)\n"
        "  -H <file>   HellaSwag in llm.c's eval file format (make hellaswag) (default none)\n"
        "  -P <int>    passkey retrieval: keys per (length, depth) cell at the -E lengths (default 0: off;\n"
        "              needs gpt2_passkey.bin: make gpt2_passkey.bin)\n"
        "  -Pd <int>   passkey depths, evenly spaced from 0%% to 100%% (default 5)\n"
        "  -Ps <int>   passkey seed (default 1)\n"
        "  -A <glob>   algorithmic tasks: task files of ./tasks, each scored by exact match (greedy) and token\n"
        "              accuracy at every evaluation, into tasks.csv (default none)\n",
        MAX_GEN_TOKENS, TRAINER_PASS_TOKENS, SHAPE_DEFAULT_K, CAPE_DEFAULT_GLOBAL, CAPE_DEFAULT_SCALE, CAPE_DEFAULT_LOCAL, SHAW_MAX_K,
        SHAW_DEFAULT_K, FLOATER_DEFAULT_REFRESH, pe_names_rp());
    exit(0);
}

// -E: "none", or lengths separated by commas
static void parse_eval_lengths(TrainArgs* a, const char* s) {
    a->num_eval_lengths = 0;
    if (strcmp(s, "none") == 0) { return; }
    char buf[1024];
    char* items[MAX_EVAL_LENGTHS];
    if (strlen(s) >= sizeof(buf)) { fatal("flag -E: list too long"); }
    strcpy(buf, s);
    a->num_eval_lengths = split_list(buf, items, MAX_EVAL_LENGTHS, "-E", "lengths separated by commas, e.g. 128,256, or 'none'");
    for (int k = 0; k < a->num_eval_lengths; k++) {
        a->eval_lengths[k] = (int)parse_long("-E", items[k], 1, 1 << 24);
        for (int j = 0; j < k; j++) {
            if (a->eval_lengths[j] == a->eval_lengths[k]) { fatal("flag -E: %d is given twice", a->eval_lengths[k]); }
        }
    }
}

// -j: one pattern (the set "val"), or named sets name=pattern,... (names of letters, digits,
// '_', '.', '-', at most MAX_SET_NAME of them); validation uses the first. The value is named
// sets only if the text before its first '=' is such a name (a path holds a '/' or another
// character: a plain pattern may hold '=').
#define MAX_SET_NAME 64
static int is_set_name(const char* s, size_t n) {
    return n > 0 && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") >= n;
}

static void parse_val_sets(TrainArgs* a, const char* s) {
    a->val_sets = s;
    const char* first_eq = strchr(s, '=');
    if (first_eq == NULL || !is_set_name(s, (size_t)(first_eq - s))) {
        a->num_sets = 1;
        a->set_names[0] = "val";
        a->set_patterns[0] = a->val_pattern = s;
        return;
    }
    char* items[MAX_EVAL_SETS];
    if (strlen(s) >= sizeof(a->sets_buf)) { fatal("flag -j: list too long"); }
    strcpy(a->sets_buf, s);
    a->num_sets = split_list(a->sets_buf, items, MAX_EVAL_SETS, "-j", "a pattern, or name=pattern items separated by commas");
    for (int k = 0; k < a->num_sets; k++) {
        char* eq = strchr(items[k], '=');
        if (eq == NULL || eq == items[k] || eq[1] == '\0') { fatal("flag -j: '%s' is not name=pattern", items[k]); }
        *eq = '\0';
        if (!is_set_name(items[k], strlen(items[k]))) {
            fatal("flag -j: the set name '%s' may hold letters, digits, '_', '.' and '-' only", items[k]);
        }
        if (strlen(items[k]) > MAX_SET_NAME) { fatal("flag -j: the set name '%.20s...' is longer than %d characters", items[k], MAX_SET_NAME); }
        for (int j = 0; j < k; j++) { if (strcmp(a->set_names[j], items[k]) == 0) { fatal("flag -j: the set '%s' is given twice", items[k]); } }
        a->set_names[k] = items[k];
        a->set_patterns[k] = eq + 1;
    }
    a->val_pattern = a->set_patterns[0];
}

// was flag f given on the command line (rather than left at its default)?
static int flag_given(const TrainArgs* a, const char* f) {
    for (int i = 1; i + 1 < a->argc; i += 2) { if (strcmp(a->argv[i], f) == 0) { return 1; } }
    return 0;
}

// an evaluation variant (llmc/pe.h) whose rows the extrapolation evaluation adds
static void add_eval_variant(TrainArgs* a, int v, const char* flag) {
    for (int k = 0; k < a->num_eval_variants; k++) {
        if (a->eval_variants[k] == v) { fatal("flag %s: '%s' is given twice", flag, PE_EVAL_NAMES[v]); }
    }
    a->eval_variants[a->num_eval_variants++] = v;
}

// -rs: RoPE scaling methods, each an extra set of extrapolation rows (the evaluation variants
// of an encoding that has them: rope)
static void parse_rope_scaling(TrainArgs* a, const char* s) {
    if (!pe_has_eval_variant(PE_EVAL_PI)) { fatal("flag -rs: RoPE scaling is no evaluation variant of this binary's PE '%s'", pe_name(PE_ID)); }
    char buf[256];
    char* items[PE_EVAL_NUM];
    if (strlen(s) >= sizeof(buf)) { fatal("flag -rs: list too long"); }
    strcpy(buf, s);
    int n = split_list(buf, items, PE_EVAL_NUM, "-rs", "methods separated by commas, e.g. yarn,dynamic-ntk");
    for (int k = 0; k < n; k++) {
        const char* tok = items[k];
        int v = PE_EVAL_PI;
        while (v <= PE_EVAL_DYN_YARN && strcmp(tok, PE_EVAL_NAMES[v]) != 0) { v++; }
        if (v > PE_EVAL_DYN_YARN) { fatal("flag -rs: unknown method '%s' (pi, ntk, yarn, dynamic-pi, dynamic-ntk, dynamic-yarn)", tok); }
        add_eval_variant(a, v, "-rs");
    }
}

// -rb, -rt, -rr: rope's frequency table (llmc/pe.h), of this binary's encoding only; the base
// 10000 is the default's one word, 0
static void parse_rope_table(TrainArgs* a, const char* f, const char* v) {
    if (!rope_table_supported(PE_ID)) {
        fatal("flag %s: RoPE's frequency table options (-rb, -rt, -rr) exist for rope; this binary is PE '%s'", f, model_label(PE_ID, DAPE_ID));
    }
    if (!strcmp(f, "-rb")) {
        int base = (int)parse_long(f, v, 2, INT32_MAX);
        a->rope_table.base = base == ROPE_BASE ? 0 : base;
    }
    else if (!strcmp(f, "-rt")) { a->rope_table.truncate = (int)parse_long(f, v, 0, 1 << 24); }
    else { a->rope_table.resonance = (int)parse_long(f, v, 0, 1); }
}

static void parse_args(TrainArgs* a, int argc, char** argv) {
    a->train_pattern = "data/starter/starter_train_*.bin";
    parse_val_sets(a, "data/starter/starter_val_*.bin");
    a->model = "cpu";
    a->output_dir = NULL;
    a->B = 8; a->T = 128; a->total_batch = -1; a->max_steps = 200;
    a->lr = 1e-3f; a->warmup = 20; a->final_lr_frac = 0.1f; a->weight_decay = 0.1f;
    a->val_every = 50; a->val_batches = 20; a->sample_every = 100; a->gen_tokens = 64;
    a->checkpoint_every = 0; a->resume = 0; a->zero_stage = 0; a->overfit = 0; a->pass_tokens = TRAINER_PASS_TOKENS;
    a->skip_loss_z = 0; a->skip_grad_z = 0; a->seed = 42;
    a->num_eval_lengths = -1; a->eval_tokens = 4096; a->eval_stride = 0; a->eval_every = 0;
    a->argc = argc; a->argv = argv;
    a->num_eval_variants = 0; a->rope_factor = 0; a->rand_pos = -1; a->pose_len = 0;
    a->rope_table = (RopeTable){-1, -1, -1};
    a->shape_k = -1;
    a->cape = (CapeAugment){-1, -1, -1};
    a->shaw_k = -1; a->shaw_values = -1;
    a->floater_refresh = -1;
    a->eval_last = 0; a->hellaswag = NULL; a->passkey_trials = 0; a->passkey_depths = 5; a->passkey_seed = 1;
    a->tasks = NULL;
    for (int i = 1; i < argc; i += 2) {
        const char* f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) { usage(); }
        if (f[0] != '-' || f[1] == '\0' || strlen(f) > 3) { fatal("unexpected argument '%s' (./%s -h lists the flags)", f, TRAINER_NAME); }
        if (i + 1 >= argc) { fatal("flag %s needs a value (./%s -h lists the flags)", f, TRAINER_NAME); }
        const char* v = argv[i + 1];
        if (!strcmp(f, "-i")) { a->train_pattern = v; }
        else if (!strcmp(f, "-j")) { parse_val_sets(a, v); }
        else if (!strcmp(f, "-e")) { a->model = v; }
        else if (!strcmp(f, "-o")) { a->output_dir = v; }
        else if (!strcmp(f, "-b")) { a->B = (int)parse_long(f, v, 1, 1 << 20); }
        else if (!strcmp(f, "-t")) { a->T = (int)parse_long(f, v, 1, 1 << 24); }
        else if (!strcmp(f, "-d")) {
            a->total_batch = (int)parse_long(f, v, -1, INT32_MAX);
            if (a->total_batch == 0) { fatal("flag -d: a total batch of 0 tokens; give a positive number, or -1 for B*T*processes"); }
        }
        else if (!strcmp(f, "-x")) { a->max_steps = (int)parse_long(f, v, -1, INT32_MAX); }
        else if (!strcmp(f, "-l")) { a->lr = parse_float(f, v, 0.0f, 10.0f); }
        else if (!strcmp(f, "-u")) { a->warmup = (int)parse_long(f, v, 0, INT32_MAX); }
        else if (!strcmp(f, "-q")) { a->final_lr_frac = parse_float(f, v, 0.0f, 1.0f); }
        else if (!strcmp(f, "-c")) { a->weight_decay = parse_float(f, v, 0.0f, 10.0f); }
        else if (!strcmp(f, "-v")) { a->val_every = (int)parse_long(f, v, 0, INT32_MAX); }
        else if (!strcmp(f, "-m")) { a->val_batches = (int)parse_long(f, v, -1, INT32_MAX); }
        else if (!strcmp(f, "-s")) { a->sample_every = (int)parse_long(f, v, 0, INT32_MAX); }
        else if (!strcmp(f, "-g")) {
            long g = parse_long(f, v, LONG_MIN, LONG_MAX);
            if (g < 1 || g > MAX_GEN_TOKENS) {
                fatal("flag -g must be in [1, %d] (each sampled token recomputes the whole prefix, so the time grows with the square of -g), got %ld",
                      MAX_GEN_TOKENS, g);
            }
            a->gen_tokens = (int)g;
        }
        else if (!strcmp(f, "-n")) { a->checkpoint_every = (int)parse_long(f, v, 0, INT32_MAX); }
        else if (!strcmp(f, "-y")) { a->resume = (int)parse_long(f, v, 0, 1); }
        else if (!strcmp(f, "-z")) {
            a->zero_stage = (int)parse_long(f, v, 0, 1);
            if (a->zero_stage > MAX_ZERO_STAGE) { fatal("flag -z 1: ZeRO stage 1 (sharded optimizer state) exists only in the CUDA trainer, train_gpt2cu"); }
        }
        else if (!strcmp(f, "-a")) { a->overfit = (int)parse_long(f, v, 0, 1); }
        else if (!strcmp(f, "-lb")) { a->pass_tokens = (int)parse_long(f, v, -1, INT32_MAX); }
        else if (!strcmp(f, "-sl")) { a->skip_loss_z = parse_float(f, v, 0.0f, 1e9f); }
        else if (!strcmp(f, "-sg")) { a->skip_grad_z = parse_float(f, v, 0.0f, 1e9f); }
        else if (!strcmp(f, "-R")) { a->seed = (uint64_t)parse_long(f, v, 0, INT32_MAX); }
        else if (!strcmp(f, "-E")) { parse_eval_lengths(a, v); }
        else if (!strcmp(f, "-K")) { a->eval_tokens = (int)parse_long(f, v, 1, INT32_MAX); }
        else if (!strcmp(f, "-W")) {
            a->eval_stride = (int)parse_long(f, v, -1, 1 << 24);
            if (a->eval_stride == 0) { fatal("flag -W: a stride of 0; give a stride >= 1, or -1 for non-overlapping windows only"); }
        }
        else if (!strcmp(f, "-V")) { a->eval_every = (int)parse_long(f, v, 0, INT32_MAX); }
        else if (!strcmp(f, "-rs")) { parse_rope_scaling(a, v); }
        else if (!strcmp(f, "-rf")) { a->rope_factor = parse_float(f, v, 1.0f, 1e6f); }
        else if (!strcmp(f, "-rb") || !strcmp(f, "-rt") || !strcmp(f, "-rr")) { parse_rope_table(a, f, v); }
        else if (!strcmp(f, "-sk")) { a->shape_k = (int)parse_long(f, v, 0, 1 << 24); }
        else if (!strcmp(f, "-cg")) { a->cape.global = parse_float(f, v, 0.0f, (float)(1 << 24)); }
        else if (!strcmp(f, "-cs")) { a->cape.scale = parse_float(f, v, 1.0f, 1000.0f); }
        else if (!strcmp(f, "-cl")) { a->cape.local = (int)parse_long(f, v, 0, 1); }
        else if (!strcmp(f, "-ak")) { a->shaw_k = (int)parse_long(f, v, 1, SHAW_MAX_K); }
        else if (!strcmp(f, "-av")) { a->shaw_values = (int)parse_long(f, v, 0, 1); }
        else if (!strcmp(f, "-fr")) { a->floater_refresh = (int)parse_long(f, v, 1, 1 << 24); }
        else if (!strcmp(f, "-xb")) {
            if (parse_long(f, v, 0, 1) == 0) { continue; }
            if (!pe_has_eval_variant(PE_EVAL_BCA)) {
                fatal("flag -xb: blockwise causal attention (xPos's) is no evaluation variant of this binary's PE '%s'", pe_name(PE_ID));
            }
            add_eval_variant(a, PE_EVAL_BCA, "-xb");
        }
        else if (!strcmp(f, "-rp")) {
            a->rand_pos = (int)parse_long(f, v, 0, 1 << 24);
            if (a->rand_pos > 0 && !rp_supported(PE_ID)) {
                fatal("flag -rp: randomized positions exist for %s; this binary is PE '%s'", pe_names_rp(),
                      model_label(PE_ID, DAPE_ID));
            }
        }
        else if (!strcmp(f, "-po")) { a->pose_len = (int)parse_long(f, v, 0, 1 << 24); }
        else if (!strcmp(f, "-ra")) {
            if (parse_long(f, v, 0, 1) == 0) { continue; }
            add_eval_variant(a, PE_EVAL_PLAINPOS, "-ra");
        }
        else if (!strcmp(f, "-L")) { a->eval_last = (int)parse_long(f, v, 0, 1 << 24); }
        else if (!strcmp(f, "-H")) { a->hellaswag = v; }
        else if (!strcmp(f, "-P")) { a->passkey_trials = (int)parse_long(f, v, 0, 1 << 20); }
        else if (!strcmp(f, "-Pd")) { a->passkey_depths = (int)parse_long(f, v, 2, 101); }
        else if (!strcmp(f, "-Ps")) { a->passkey_seed = (int)parse_long(f, v, 0, INT32_MAX); }
        else if (!strcmp(f, "-A")) { a->tasks = v; }
        else { fatal("unknown flag %s (./%s -h lists the flags)", f, TRAINER_NAME); }
    }
    if (a->resume && a->output_dir == NULL) { fatal("-y 1 (resume) needs an output directory (-o)"); }
    int static_scaling = 0; // -rf is the factor of these methods only
    for (int k = 0; k < a->num_eval_variants; k++) {
        int v = a->eval_variants[k];
        static_scaling |= v == PE_EVAL_PI || v == PE_EVAL_NTK || v == PE_EVAL_YARN;
    }
    if (a->rope_factor > 0 && !static_scaling) {
        fatal("flag -rf: the static RoPE scaling factor is used only by -rs pi, ntk or yarn, and none of them is given");
    }
}

// the default -E, once the training length is known (-t when training, the checkpoint's maxT
// when evaluating only): 1x, 2x, 4x, 8x, 16x it, the length the default -W stride follows too
static void default_eval_lengths(TrainArgs* a, int train_len) {
    if (a->num_eval_lengths >= 0) { return; }
    a->num_eval_lengths = 0;
    for (int k = 0; k < 5 && ((int64_t)train_len << k) <= (1 << 24); k++) { a->eval_lengths[a->num_eval_lengths++] = train_len << k; }
}

// the flags that only the perplexity windows (-E) read: given where there are none (-E none,
// or answer-only data, where that is the default), a note says they do nothing
static void note_flags_without_windows(const TrainArgs* a) {
    static const char* const flags[] = {"-K", "-W", "-L"};
    if (a->num_eval_lengths != 0) { return; }
    char given[16] = "";
    for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++) {
        if (flag_given(a, flags[k])) { append_format(given, sizeof(given), " %s", flags[k]); }
    }
    if (given[0] != '\0') { printf("note:%s: no perplexity windows to score (-E none): ignored\n", given); }
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
    int finite = isfinite(d->sum) && isfinite(d->sum_sq);
    for (int i = 0; i < OUTLIER_WINDOW; i++) { finite &= isfinite(d->buffer[i]); }
    if (!finite || d->count < 0 || d->count > OUTLIER_WINDOW || d->index < 0 || d->index >= OUTLIER_WINDOW) {
        fatal("%s: corrupt training-health window", path);
    }
}

// ----------------------------------------------------------------------------
// the output directory: one trainer at a time, and a new run never over an old one

// the flags a training run was started with (llm.c's argv without -o and -y, each one
// NUL-terminated as /proc/<pid>/cmdline), written when it starts: every resume (-y 1) takes
// them (run_flags_resume), also that of a run killed before its first checkpoint
#define RUN_FLAGS_FILE "cmdline"

// Opens a file of the output directory that the trainer writes in place rather than by a
// rename (.lock, main.log): a regular file or none (created). A symbolic link there would
// make it write wherever the link points, outside -o, and a FIFO or a device is not the
// run's: both are refused (llmc/utils.h: refuse_special_file), also one made since the
// check (O_NOFOLLOW; O_NONBLOCK, so that a FIFO cannot block the open before the check).
static int open_in_place(const char* path, int flags) {
    refuse_special_file(path, 0);
    int fd = open(path, flags | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0 && errno == ELOOP) { refuse_special_file(path, 0); }
    if (fd < 0) { fatal("cannot open %s (%s)", path, strerror(errno)); }
    struct stat st;
    if (fstat(fd, &st) != 0) { fatal("cannot open %s (%s)", path, strerror(errno)); }
    if (!S_ISREG(st.st_mode)) { fatal("%s is %s, not a regular file: it is not written", path, file_kind(st.st_mode)); }
    return fd;
}

// Takes an exclusive lock on <dir>/.lock for the life of the process (the system releases
// it when the process ends, however it ends), so that a second trainer into the same
// directory stops at once instead of overwriting the first one's checkpoints and log. A
// filesystem without locks gets a warning, not an error.
static void output_dir_lock(const char* dir) {
    char path[PATH_MAX + 8];
    snprintf(path, sizeof(path), "%s/.lock", dir);
    int fd = open_in_place(path, O_RDWR);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) {
            fprintf(stderr, "warning: cannot lock %s (%s): a second trainer into %s would not be stopped\n", path, strerror(errno), dir);
            close(fd);
            return;
        }
        char holder[32] = {0}; // the holder's process id, which it wrote below
        ssize_t n = read(fd, holder, sizeof(holder) - 1);
        if (n > 0 && holder[n - 1] == '\n') { holder[n - 1] = '\0'; }
        fatal("%s is in use by another trainer (process %s holds %s)", dir, n > 0 ? holder : "?", path);
    }
    char pid[32];
    int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, n, 0) != n) { fatal("cannot write %s (%s)", path, strerror(errno)); }
    // the descriptor stays open: the lock lasts as long as the process
}

// the step of a checkpoint marker's name "DONE_<step>", -1 if the name is no marker; a step
// that does not fit an int is an error (it would be read as another step)
static int done_marker_step(const char* dir, const char* name) {
    if (strncmp(name, "DONE_", 5) != 0 || name[5] == '\0') { return -1; }
    int64_t step = 0;
    for (const char* c = name + 5; *c != '\0'; c++) {
        if (*c < '0' || *c > '9') { return -1; }
        if (step <= INT32_MAX) { step = step * 10 + (*c - '0'); }
    }
    if (step > INT32_MAX) { fatal("%s/%s: a checkpoint marker whose step is beyond %d", dir, name, INT32_MAX); }
    return (int)step;
}

// Looks at an output directory: returns the step of its latest complete checkpoint (the
// largest DONE_<step>; -1: none) and names in `run` a file that shows that a run was there
// (a checkpoint marker, a checkpoint, a state file, a run's flags or a non-empty main.log;
// "" if none). With `clean` (only under the lock), removes the temporary files of writes
// whose process is gone (llmc/utils.h: temporary_is_orphan), and nothing else.
static int output_dir_scan(const char* dir, char* run, size_t run_size, int clean) {
    DIR* d = opendir(dir);
    if (d == NULL) { fatal("cannot list %s (%s)", dir, strerror(errno)); }
    int best = -1;
    run[0] = '\0';
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        const char* name = e->d_name;
        char path[2 * PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        size_t n = strlen(name);
        int step = done_marker_step(dir, name);
        if (step > best) { best = step; }
        struct stat st;
        int shows_run = step >= 0 || (n > 4 && strcmp(name + n - 4, ".bin") == 0 && (!strncmp(name, "model_", 6) || !strncmp(name, "state_", 6)))
                     || strcmp(name, RUN_FLAGS_FILE) == 0 || (strcmp(name, "main.log") == 0 && stat(path, &st) == 0 && st.st_size > 0);
        if (shows_run && run[0] == '\0') { snprintf(run, run_size, "%s", name); }
        if (clean && temporary_is_orphan(name, NULL) && unlink(path) != 0 && errno != ENOENT) {
            fatal("cannot remove %s (%s)", path, strerror(errno));
        }
    }
    closedir(d);
    return best;
}

// names the latest complete checkpoint, for the message of a run that stops
static const char* last_checkpoint_note(const char* dir) {
    static char note[PATH_MAX + 64];
    if (dir == NULL) { return "no output directory: nothing was saved"; }
    char run[256];
    int step = output_dir_scan(dir, run, sizeof(run), 0);
    if (step < 0) { return "no complete checkpoint exists"; }
    snprintf(note, sizeof(note), "the last complete checkpoint is %s/model_%08d.bin", dir, step);
    return note;
}

// ----------------------------------------------------------------------------
// main.log (llm.c's format: "s:<step> trl:<loss> lr:<lr> norm:<norm>" and
// "s:<step> tel:<val loss>"): appended, flushed and fsynced line by line. A training run
// keeps the complete lines of the steps up to the one it resumes from (none for a new run)
// and drops the rest (and a line torn by a crash), atomically; an evaluation-only run
// leaves the log as it is and appends to it.

typedef struct {
    int active;
    char path[PATH_MAX];
} Logger;

static void logger_init(Logger* lg, const char* dir, int rank, int training, int resume_step) {
    lg->active = dir != NULL && rank == 0;
    if (!lg->active) { return; }
    snprintf(lg->path, sizeof(lg->path), "%s/main.log", dir);
    refuse_special_file(lg->path, 0);
    if (!training) { return; }
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
    FILE* f = fdopen(open_in_place(lg->path, O_WRONLY | O_APPEND), "a");
    if (f == NULL) { fatal("cannot open %s (%s)", lg->path, strerror(errno)); }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0 || ferror(f)) { fatal("cannot write %s (%s)", lg->path, strerror(errno)); }
    if (fclose(f) != 0) { fatal("cannot close %s (%s)", lg->path, strerror(errno)); }
}

// ----------------------------------------------------------------------------
// resume: a run's state files record the flags it is defined by. A resumed run takes the
// ones it is not given from there, so that `-o DIR -y 1` continues the run as it was. A
// given one that differs is refused where it would make another run (other batches,
// another model: must_match), and said where its meaning is clear (the schedule and the
// skipping thresholds, which then apply from the resumed step on).

typedef struct { const char* flag; int must_match; int is_float; size_t offset; } ResumeFlag;
static const ResumeFlag RESUME_FLAGS[] = { // at most STATE_NUM_FLAGS; -b and -t before -d
    {"-b", 1, 0, offsetof(TrainArgs, B)}, {"-t", 1, 0, offsetof(TrainArgs, T)},
    {"-d", 1, 0, offsetof(TrainArgs, total_batch)}, {"-a", 1, 0, offsetof(TrainArgs, overfit)},
    {"-x", 0, 0, offsetof(TrainArgs, max_steps)}, {"-u", 0, 0, offsetof(TrainArgs, warmup)},
    {"-l", 0, 1, offsetof(TrainArgs, lr)}, {"-q", 0, 1, offsetof(TrainArgs, final_lr_frac)},
    {"-c", 0, 1, offsetof(TrainArgs, weight_decay)}, {"-sl", 0, 1, offsetof(TrainArgs, skip_loss_z)},
    {"-sg", 0, 1, offsetof(TrainArgs, skip_grad_z)}, {"-lb", 0, 0, offsetof(TrainArgs, pass_tokens)},
    {"-po", 1, 0, offsetof(TrainArgs, pose_len)}, {"-cg", 0, 1, offsetof(TrainArgs, cape.global)},
    {"-cs", 0, 1, offsetof(TrainArgs, cape.scale)}, {"-cl", 0, 0, offsetof(TrainArgs, cape.local)},
};
#define NUM_RESUME_FLAGS ((int)(sizeof(RESUME_FLAGS) / sizeof(RESUME_FLAGS[0])))
// the flags a state file records where it does not say how many (its word 14 is 0): those
// before -lb, which resumes as the run's flags (cmdline) and the defaults give it
#define RESUME_FLAGS_UNCOUNTED 11

// a recorded flag's value as text
static void resume_flag_text(const ResumeFlag* f, int word, char* out, size_t n) {
    float x;
    memcpy(&x, &word, 4);
    if (f->is_float) { snprintf(out, n, "%g", x); } else { snprintf(out, n, "%d", word); }
}

// what a state file records of the run: its flags, the -e it started from, its training data
static void resume_record(TrainState* s, const TrainArgs* a, const DataLoader* train) {
    for (int k = 0; k < NUM_RESUME_FLAGS; k++) { memcpy(&s->flags[k], (const char*)a + RESUME_FLAGS[k].offset, 4); }
    s->num_flags = NUM_RESUME_FLAGS;
    snprintf(s->model, sizeof(s->model), "%s", a->model);
    snprintf(s->train_pattern, sizeof(s->train_pattern), "%s", a->train_pattern);
    s->data_shards = (int)train->num_shards;
    s->data_tokens = train->num_tokens;
    s->data_hash = dataloader_fingerprint(train);
}

// Applies the flags recorded in `s` (this rank's state file at `path`) to the resumed run:
// takes those not given, refuses or reports given ones that differ (see above).
static void resume_flags_apply(TrainArgs* a, TrainState* s, const char* path, const MultiProcess* mp) {
    if (s->world != mp->world) { fatal("%s was written by %d processes, this run has %d", path, s->world, mp->world); }
    if (s->pe != PE_ID) { fatal("%s belongs to PE '%s', this binary is PE '%s'", path, pe_name(s->pe), pe_name(PE_ID)); }
    if (!flag_given(a, "-e")) { a->model = s->model; }
    else if (strcmp(a->model, s->model) != 0) {
        fatal("resume: -e %s is not the model this run started from (-e %s); leave -e out, the model comes from the checkpoint", a->model, s->model);
    }
    if (!flag_given(a, "-i")) { a->train_pattern = s->train_pattern; }
    char taken[512] = "";
    int recorded = s->num_flags > 0 ? s->num_flags : RESUME_FLAGS_UNCOUNTED;
    for (int k = 0; k < NUM_RESUME_FLAGS && k < recorded; k++) {
        const ResumeFlag* f = &RESUME_FLAGS[k];
        char* field = (char*)a + f->offset;
        int now;
        memcpy(&now, field, 4);
        int64_t value = strcmp(f->flag, "-d") == 0 && now == -1 ? (int64_t)a->B * a->T * mp->world : now; // -d -1 resolved
        char was_text[32], now_text[32];
        resume_flag_text(f, s->flags[k], was_text, sizeof(was_text));
        if (!flag_given(a, f->flag)) {
            if (value != s->flags[k]) { append_format(taken, sizeof(taken), " %s %s", f->flag, was_text); }
            memcpy(field, &s->flags[k], 4);
            continue;
        }
        if (value == s->flags[k]) { continue; }
        resume_flag_text(f, now, now_text, sizeof(now_text));
        if (f->must_match) {
            fatal("resume: %s %s differs from this run's %s %s (%s); leave %s out to continue the run as it was",
                  f->flag, now_text, f->flag, was_text, path, f->flag);
        }
        if (mp->rank == 0) { printf("resume: %s %s replaces this run's %s %s from step %d on\n", f->flag, now_text, f->flag, was_text, s->step); }
    }
    if (mp->rank == 0 && taken[0] != '\0') { printf("resume: flags of the run, from its state file:%s\n", taken); }
}

// the OpenMP threads that the CPU trainer's sums are split over: its results depend on
// their number (the order of the sums, OpenBLAS's included), so a run resumed with another
// number is not bit-identical to one that was not stopped; 0 where built without OpenMP
// (the CUDA trainer)
static int sum_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 0;
#endif
}

// ----------------------------------------------------------------------------
// checkpoints and resume: model_<step>.bin, state_<step>_<rank>.bin, then DONE_<step>
// once every rank has written its files; resume picks the largest DONE step. Nothing
// non-finite is ever marked complete: the model file is read back and the optimizer state
// checked before the marker; if either holds a NaN or an infinity, the model file is
// removed and the run stops, naming the last complete checkpoint.

static void save_training(GPT2* model, const TrainArgs* a, const MultiProcess* mp, int step,
                          uint64_t rng, const DataLoader* train, int updates, int bad_steps, const OutlierDetector* health) {
    char model_path[PATH_MAX], path[PATH_MAX];
    snprintf(model_path, sizeof(model_path), "%s/model_%08d.bin", a->output_dir, step);
    double bad[2] = {0, 0}; // non-finite values in the model, in the optimizer state
    if (mp->rank == 0) {
        gpt2_save_checkpoint(model, model_path);
        bad[0] = (double)checkpoint_count_nonfinite(model_path);
    }
    TrainState s;
    memset(&s, 0, sizeof(s));
    s.step = step; s.world = mp->world; s.rank = mp->rank; s.pe = PE_ID; s.rng = rng;
    s.shard_idx = train->shard_idx; s.shard_pos = (uint64_t)train->pos;
    s.updates = updates; s.bad_steps = bad_steps; s.threads = sum_threads();
    s.num_params = gpt2_opt_state_size(model);
    s.pe_bytes = (int)pe_resume_bytes(model);
    resume_record(&s, a, train);
    float* m = (float*)malloc_check(s.num_params * sizeof(float));
    float* v = (float*)malloc_check(s.num_params * sizeof(float));
    gpt2_opt_state_get(model, m, v);
    for (size_t i = 0; i < s.num_params; i++) { bad[1] += !isfinite(m[i]) || !isfinite(v[i]) || v[i] < 0; }
    mp_allreduce_sum_f64(bad, 2);
    if (bad[0] + bad[1] > 0) {
        if (mp->rank == 0) {
            unlink(model_path);
            fatal("step %d: %.0f non-finite values in the model and %.0f in the optimizer state: stopping without a checkpoint of this step (%s)",
                  step, bad[0], bad[1], last_checkpoint_note(a->output_dir));
        }
        mp_barrier(); // rank 0 ends the job
    }
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
    char* pe = (char*)malloc_check((size_t)s.pe_bytes + 1);
    pe_resume_save(model, pe);
    atomic_write(&af, pe, 1, (size_t)s.pe_bytes);
    atomic_commit(&af);
    free(pe);
    free(m);
    free(v);
    mp_barrier();
    if (mp->rank == 0) {
        snprintf(path, sizeof(path), "%s/DONE_%08d", a->output_dir, step);
        atomic_open(&af, path);
        atomic_commit(&af);
        printf("wrote checkpoint %s\n", model_path);
    }
}

// loads this rank's state of checkpoint `step` (the optimizer moments, data position, RNG,
// training health), after checking it: the same training data, finite moments, v >= 0
static void load_training_state(GPT2* model, const TrainArgs* a, const MultiProcess* mp, int step, uint64_t* rng,
                                DataLoader* train, int* updates, int* bad_steps, OutlierDetector* health) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/state_%08d_%05d.bin", a->output_dir, step, mp->rank);
    TrainState s;
    FILE* f = state_open(path, &s, 2 * OUTLIER_STATE_BYTES);
    if (s.step != step) { fatal("%s records step %d", path, s.step); }
    if (s.num_params != gpt2_opt_state_size(model)) { fatal("%s does not match the model's parameter count", path); }
    if ((size_t)s.pe_bytes != pe_resume_bytes(model)) {
        fatal("%s holds %d bytes of PE '%s''s own state, the model %zu", path, s.pe_bytes, pe_name(PE_ID), pe_resume_bytes(model));
    }
    if (s.data_shards != (int)train->num_shards || s.data_tokens != train->num_tokens || s.data_hash != dataloader_fingerprint(train)) {
        fatal("resume: the training data (%s %s: %zu shard(s), %lld tokens) is not this run's (%d shard(s), %lld tokens, as %s records)",
              a->overfit ? "-j" : "-i", a->overfit ? a->val_pattern : a->train_pattern, train->num_shards,
              (long long)train->num_tokens, s.data_shards, (long long)s.data_tokens, path);
    }
    float* m = (float*)malloc_check(s.num_params * sizeof(float));
    float* v = (float*)malloc_check(s.num_params * sizeof(float));
    fread_check(m, sizeof(float), s.num_params, f, path);
    fread_check(v, sizeof(float), s.num_params, f, path);
    for (size_t i = 0; i < s.num_params; i++) {
        if (!isfinite(m[i]) || !isfinite(v[i]) || v[i] < 0) {
            fatal("%s: corrupt optimizer state: m = %g, v = %g at index %zu (both must be finite, v >= 0)", path, m[i], v[i], i);
        }
    }
    outlier_load(f, &health[0], path);
    outlier_load(f, &health[1], path);
    char* pe = (char*)malloc_check((size_t)s.pe_bytes + 1);
    fread_check(pe, 1, (size_t)s.pe_bytes, f, path);
    fclose(f);
    pe_resume_load(model, pe);
    free(pe);
    gpt2_opt_state_set(model, m, v);
    free(m);
    free(v);
    *rng = s.rng;
    *updates = s.updates;
    *bad_steps = s.bad_steps;
    dataloader_seek(train, (size_t)s.shard_idx, (int64_t)s.shard_pos);
    if (s.threads > 0 && sum_threads() > 0 && s.threads != sum_threads()) {
        char rank[32] = "";
        if (mp->world > 1) { snprintf(rank, sizeof(rank), " (rank %d)", mp->rank); }
        fprintf(stderr, "warning%s: %s was written with %d OpenMP threads, this run has %d: the steps from here on are not "
                "bit-identical to a run that was not stopped (OMP_NUM_THREADS=%d resumes exactly)\n",
                rank, path, s.threads, sum_threads(), s.threads);
    }
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
    model->rp_key = rp_key(RP_STREAM_SAMPLE, 0, 0);
    gpt2_forward(model, seq, NULL, 1, maxlen - 1, 0); // sizes the buffers once for the longest prefix
    printf("generating:\n---\n");
    for (int t = 1; t < maxlen; t++) {
        model->rp_key = rp_key(RP_STREAM_SAMPLE, (uint64_t)t, 0);
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
        model->rp_key = rp_key(RP_STREAM_VAL, (uint64_t)i, 0); // the same positions at every validation
        gpt2_forward(model, val->inputs, val->targets, val->B, val->T, 0);
        sum[0] += model->mean_loss;
    }
    mp_allreduce_sum_f64(sum, 1);
    return (float)(sum[0] / batches / mp->world);
}

// the encoding's name in the extrapolation table and its CSV files: the binary's
// (model_label), with rope's table (_rb<base>, _rt<L>, _rr where not plain) and _rp<L> for a
// model with randomized positions from [0, L)
static char run_pe_label[64];

// ----------------------------------------------------------------------------
// length extrapolation: perplexity on each test set's tokens at each length, in up to three
// modes
//   nonoverlap  windows of L tokens side by side, every token scored (CABLE/ALiBi papers)
//   sliding     windows of L tokens every `stride` tokens, only the last `stride` scored
//   last<N>     windows of L tokens that end maxL tokens apart (maxL: the longest -E
//               length), only the last N scored (DAPE's protocol, N = 256 there)
// The same number of tokens is scored at every length where the data allows. Each row also
// gets DAPE V2's context-use gap (its Appendix A) for L beyond the training length T: the
// mean loss of the last T tokens of each window, minus their loss given only themselves
// (a window of T tokens): negative when the model uses the context before them, positive
// when it is hurt by it (DAPE's Delta P, in perplexity and with the other sign).

// the sliding-window stride: -W, or half the training length by default (0: no sliding mode)
static int eval_stride(const TrainArgs* a, int train_len) {
    if (a->eval_stride != 0) { return a->eval_stride > 0 ? a->eval_stride : 0; }
    return train_len / 2 > 0 ? train_len / 2 : 1;
}

// Loss by position: the positions of a window fall in buckets whose edges are powers of
// two, [0, 1), [1, 2), [2, 4), [4, 8), ... Fine where the loss falls fastest (the first
// tokens), coarse far out where many tokens keep the means steady, the same edges at every
// evaluation length, and a power-of-two training length is an edge: the positions a model
// was trained on and those beyond it never share a bucket.
#define MAX_POS_BUCKETS 25 // positions below 2^24, the longest -E length

// bucket of position t: 0 for t = 0, else k such that 2^(k-1) <= t < 2^k
static int position_bucket(int t) {
    int k = 0;
    while (t > 0) { k++; t >>= 1; }
    return k;
}
static int bucket_lo(int k) { return k == 0 ? 0 : 1 << (k - 1); }
static int bucket_hi(int k) { return 1 << k; }

typedef struct {
    const char* set;    // the test set (-j)
    int eval_len;
    char mode[32];      // nonoverlap, sliding or last<N>, +the evaluation variant (e.g. nonoverlap+yarn)
    int64_t tokens;     // scored tokens (0: not evaluated)
    double loss;
    double mem_mib;
    const char* note;   // why a row has no number
    int first_pos;      // first scored position of a window (0, or L - stride when sliding)
    int64_t pos_tokens[MAX_POS_BUCKETS]; // scored tokens and their mean loss per position bucket
    double pos_loss[MAX_POS_BUCKETS];
    int64_t gap_tokens; // tokens of the context-use gap (0: none, L <= T)
    double gap;
} EvalRow;

// Where a row's windows lie in the set's tokens: window k scores the `scored` tokens from
// first + k * spacing on, with the L - scored tokens before them as context; `windows` of
// them score about -K tokens
typedef struct { int64_t first, spacing, windows; int scored; } WindowLayout;

static WindowLayout window_layout(const TrainArgs* a, int mode, int L, int maxL, int stride) {
    WindowLayout w;
    w.scored = mode == 0 ? L : mode == 1 ? (stride < L ? stride : L) : a->eval_last;
    w.first = mode == 0 ? 0 : maxL - (mode == 1 ? (stride < maxL ? stride : maxL) : w.scored);
    w.spacing = mode == 2 ? maxL : w.scored;
    w.windows = ((int64_t)a->eval_tokens + w.scored - 1) / w.scored;
    return w;
}

// Mean loss of the windows of a layout (cut to `windows` of them), each L tokens. Windows are
// spread over the ranks and batched `batch_rows` at a time. Also fills the row's loss by
// position (the scored positions L - scored .. L - 1 of the windows) and, for gap_len > 0,
// the context-use gap: the last gap_len tokens of each window, scored in it and alone.
static double eval_windows(GPT2* model, const uint16_t* tokens, const WindowLayout* w, int64_t windows,
                           int L, int gap_len, int batch_rows, const MultiProcess* mp, EvalRow* row) {
    int* inp = (int*)malloc_check((size_t)batch_rows * L * sizeof(int));
    int* tgt = (int*)malloc_check((size_t)batch_rows * L * sizeof(int));
    float* losses = (float*)malloc_check((size_t)batch_rows * L * sizeof(float));
    int scored = w->scored, G = gap_len;
    double sum[3 + 2 * MAX_POS_BUCKETS] = {0}; // the total, the gap's sum, then each bucket's loss sum and token count
    for (int64_t w0 = (int64_t)mp->rank * batch_rows; w0 < windows; w0 += (int64_t)mp->world * batch_rows) {
        int rows = windows - w0 < batch_rows ? (int)(windows - w0) : batch_rows;
        for (int r = 0; r < rows; r++) {
            const uint16_t* src = tokens + w->first + (w0 + r) * w->spacing - (L - scored);
            for (int t = 0; t < L; t++) { inp[r * L + t] = src[t]; tgt[r * L + t] = src[t + 1]; }
        }
        model->rp_key = rp_key(RP_STREAM_EVAL, ((uint64_t)L << 32) | (uint64_t)scored, (uint64_t)w0); // however many ranks
        gpt2_forward(model, inp, tgt, rows, L, 0);
        gpt2_token_losses(model, losses);
        for (int r = 0; r < rows; r++) {
            for (int t = L - scored; t < L; t++) {
                int k = position_bucket(t);
                sum[0] += losses[r * L + t];
                sum[3 + 2 * k] += losses[r * L + t];
                sum[4 + 2 * k] += 1;
            }
            for (int t = L - G; t < L; t++) { sum[1] += losses[r * L + t]; }
        }
        if (G == 0) { continue; }
        for (int r = 0; r < rows; r++) { // the same last G tokens, without the context before them
            for (int t = 0; t < G; t++) { inp[r * G + t] = inp[r * L + L - G + t]; tgt[r * G + t] = tgt[r * L + L - G + t]; }
        }
        model->rp_key = rp_key(RP_STREAM_GAP, ((uint64_t)L << 32) | (uint64_t)scored, (uint64_t)w0);
        gpt2_forward(model, inp, tgt, rows, G, 0);
        gpt2_token_losses(model, losses);
        for (int i = 0; i < rows * G; i++) { sum[1] -= losses[i]; }
    }
    mp_allreduce_sum_f64(sum, 3 + 2 * MAX_POS_BUCKETS);
    for (int k = 0; k < MAX_POS_BUCKETS; k++) {
        row->pos_tokens[k] = (int64_t)sum[4 + 2 * k];
        row->pos_loss[k] = sum[4 + 2 * k] > 0 ? sum[3 + 2 * k] / sum[4 + 2 * k] : 0;
    }
    row->gap_tokens = windows * G;
    row->gap = G > 0 ? sum[1] / ((double)windows * G) : 0;
    free(inp);
    free(tgt);
    free(losses);
    double loss = sum[0] / ((double)windows * scored);
    if (!isfinite(loss) || !isfinite(row->gap)) { fatal("evaluation at length %d: the loss is not finite (the model has diverged)", L); }
    return loss;
}

// the static RoPE scaling factor: -rf, or the longest evaluation length over the training length
static double eval_rope_factor(const TrainArgs* a, int train_len) {
    if (a->rope_factor > 0) { return a->rope_factor; }
    int maxL = train_len;
    for (int k = 0; k < a->num_eval_lengths; k++) { if (a->eval_lengths[k] > maxL) { maxL = a->eval_lengths[k]; } }
    return (double)maxL / train_len;
}

// Every length and mode scores the same tokens: non-overlapping windows tile tokens
// [0, K); sliding windows score [maxL - S, maxL - S + K) S at a time, so that even the
// first scored token has the full L - S tokens of context at every length; last<N> windows
// end at maxL, 2 maxL, ... (a length below N cannot score N tokens a window: its last<N>
// row is n/a, not a row of fewer tokens). `suffix` is appended to the mode names (the
// evaluation variant in effect, e.g. "+yarn"). Returns the number of rows, for the test set
// `set` of -j.
static int run_extrapolation(GPT2* model, const TrainArgs* a, const MultiProcess* mp, int train_len, int set,
                             EvalRow* rows, const char* suffix) {
    int maxL = 0;
    for (int k = 0; k < a->num_eval_lengths; k++) { if (a->eval_lengths[k] > maxL) { maxL = a->eval_lengths[k]; } }
    int stride = eval_stride(a, train_len);
    int modes = a->eval_last > 0 ? 3 : 2;
    int64_t need = 0; // tokens to read: the last target of every row's last window
    for (int k = 0; k < a->num_eval_lengths; k++) {
        for (int mode = 0; mode < modes; mode++) {
            if ((mode == 1 && stride == 0) || (mode == 2 && a->eval_last > a->eval_lengths[k])) { continue; }
            WindowLayout w = window_layout(a, mode, a->eval_lengths[k], maxL, stride);
            int64_t end = w.first + (w.windows - 1) * w.spacing + w.scored + 1;
            if (end > need) { need = end; }
        }
    }
    DataLoader val;
    dataloader_init(&val, a->set_patterns[set], 1, 1, 0, 1, model->config.vocab_size);
    int64_t ntok;
    uint16_t* tokens = dataloader_read_all(&val, need, &ntok);
    dataloader_free(&val);
    int nrows = 0;
    for (int k = 0; k < a->num_eval_lengths; k++) {
        int L = a->eval_lengths[k];
        for (int mode = 0; mode < modes; mode++) {
            if (mode == 1 && stride == 0) { continue; }
            EvalRow* r = &rows[nrows++];
            memset(r, 0, sizeof(*r));
            r->set = a->set_names[set];
            r->eval_len = L;
            if (mode == 2) { snprintf(r->mode, sizeof(r->mode), "last%d%s", a->eval_last, suffix); }
            else { snprintf(r->mode, sizeof(r->mode), "%s%s", mode == 0 ? "nonoverlap" : "sliding", suffix); }
            if (mode == 2 && a->eval_last > L) { r->note = "n/a: shorter than the -L tokens a window scores"; continue; }
            WindowLayout w = window_layout(a, mode, L, maxL, stride);
            if (!gpt2_reaches(model, L)) {
                r->note = "n/a: " PE_LIMIT_NOTE;
                continue;
            }
            // the target number of windows, cut to what the data holds
            int64_t fit = ntok - 1 - w.first - w.scored < 0 ? 0 : (ntok - 1 - w.first - w.scored) / w.spacing + 1;
            int64_t windows = w.windows < fit ? w.windows : fit;
            if (windows < 1) { r->note = "n/a: not enough validation tokens"; continue; }
            int batch_rows = (a->B * a->T) / L;
            if (batch_rows < 1) { batch_rows = 1; }
            if (batch_rows > windows) { batch_rows = (int)windows; }
            r->first_pos = L - w.scored;
            r->loss = eval_windows(model, tokens, &w, windows, L, L > train_len ? train_len : 0, batch_rows, mp, r);
            r->tokens = windows * w.scored;
            r->mem_mib = gpt2_peak_memory_mib(model);
        }
    }
    free(tokens);
    return nrows;
}

// the tables of the extrapolation in the output directory (llmc/utils.h: each evaluation
// appends its rows)
#define EXTRAPOLATION_CSV "extrapolation.csv"
#define EXTRAPOLATION_CSV_HEADER "pe,train_len,eval_len,mode,tokens,loss,ppl,set,gap,step\n"
#define POSITIONS_CSV "positions.csv"
#define POSITIONS_CSV_HEADER "pe,train_len,eval_len,mode,pos_lo,pos_hi,tokens,loss,set,step\n"

// positions.csv: the mean loss in each position bucket of every evaluated row, the
// buckets cut to the scored positions (positions from 0, pos_hi excluded); rows without a
// number (n/a) have no buckets
static void write_positions(const EvalRow* rows, int n, const char* dir, int train_len, int step) {
    AtomicFile af;
    csv_open(&af, dir, POSITIONS_CSV, POSITIONS_CSV_HEADER, INT_MAX);
    for (int i = 0; i < n; i++) {
        const EvalRow* r = &rows[i];
        for (int k = 0; k < MAX_POS_BUCKETS && r->tokens > 0; k++) {
            if (r->pos_tokens[k] == 0) { continue; }
            int lo = bucket_lo(k) > r->first_pos ? bucket_lo(k) : r->first_pos;
            int hi = bucket_hi(k) < r->eval_len ? bucket_hi(k) : r->eval_len;
            csv_row(&af, "%s,%d,%d,%s,%d,%d,%lld,%.6f,%s,%d\n", run_pe_label, train_len, r->eval_len, r->mode, lo, hi,
                    (long long)r->pos_tokens[k], r->pos_loss[k], r->set, step);
        }
    }
    atomic_commit(&af);
}

// one sentence under a test set's table that says what it shows: the perplexity of
// non-overlapping windows at the training length and at the longest length evaluated
static void extrapolation_summary(const EvalRow* rows, int n, const char* set, int train_len) {
    const EvalRow *at = NULL, *far = NULL;
    for (int i = 0; i < n; i++) {
        const EvalRow* r = &rows[i];
        if (strcmp(r->set, set) != 0 || strcmp(r->mode, "nonoverlap") != 0) { continue; }
        if (r->eval_len == train_len && r->tokens > 0) { at = r; }
        if (r->eval_len > train_len && (far == NULL || r->eval_len > far->eval_len)) { far = r; }
    }
    if (at == NULL || far == NULL) { return; }
    if (far->tokens == 0) {
        printf("reading: %s cannot run beyond its training length (%s); train another encoding (make train_gpt2 PE=cable) to "
               "see one extrapolate\n", run_pe_label, far->note);
        return;
    }
    printf("reading: trained at %d tokens, %s's perplexity is %.3f there and %.3f at %d tokens (%.0fx): an encoding that "
           "extrapolates keeps it flat or lower beyond the training length\n", train_len, run_pe_label, exp(at->loss),
           exp(far->loss), far->eval_len, (double)far->eval_len / train_len);
}

// one table per test set (the gap column: the context-use gap, "-" up to the training
// length), then the rows appended to extrapolation.csv and positions.csv in the output
// directory
static void report_extrapolation(const EvalRow* rows, int n, const TrainArgs* a, int train_len, int step, int stride) {
    char modes[64] = "non-overlapping windows only";
    if (stride > 0) { snprintf(modes, sizeof(modes), "sliding stride %d", stride); }
    int w = 10; // the mode column fits the longest mode name
    for (int i = 0; i < n; i++) { if ((int)strlen(rows[i].mode) > w) { w = (int)strlen(rows[i].mode); } }
    for (int set = 0; set < a->num_sets; set++) {
        printf("extrapolation: pe %s, trained at T=%d, step %d (%s), test set %s (%s)\n", run_pe_label, train_len,
               step, modes, a->set_names[set], a->set_patterns[set]);
        for (int k = 0; k < a->num_eval_variants; k++) {
            int v = a->eval_variants[k];
            if (v == PE_EVAL_PI || v == PE_EVAL_NTK || v == PE_EVAL_YARN) { printf("static RoPE scaling factor s = %g\n", eval_rope_factor(a, train_len)); break; }
        }
        printf("| eval_len | %-*s | tokens   | loss     | ppl        | gap      | peak mem MiB |\n", w, "mode");
        printf("|---------:|%.*s|---------:|---------:|-----------:|---------:|-------------:|\n", w + 2, "------------------------------------");
        for (int i = 0; i < n; i++) {
            const EvalRow* r = &rows[i];
            if (strcmp(r->set, a->set_names[set]) != 0) { continue; }
            if (r->tokens == 0) { printf("| %8d | %-*s | %8s | %8s | %10s | %8s | %12s | %s\n", r->eval_len, w, r->mode, "-", "n/a", "n/a", "-", "-", r->note); continue; }
            char gap[16] = "-";
            if (r->gap_tokens > 0) { snprintf(gap, sizeof(gap), "%+.4f", r->gap); }
            printf("| %8d | %-*s | %8lld | %8.4f | %10.3f | %8s | %12.1f |\n", r->eval_len, w, r->mode, (long long)r->tokens, r->loss,
                   exp(r->loss), gap, r->mem_mib);
        }
        extrapolation_summary(rows, n, a->set_names[set], train_len);
    }
    if (a->output_dir == NULL) { return; }
    AtomicFile af;
    csv_open(&af, a->output_dir, EXTRAPOLATION_CSV, EXTRAPOLATION_CSV_HEADER, INT_MAX);
    for (int i = 0; i < n; i++) {
        const EvalRow* r = &rows[i];
        if (r->tokens == 0) { csv_row(&af, "%s,%d,%d,%s,0,n/a,n/a,%s,n/a,%d\n", run_pe_label, train_len, r->eval_len, r->mode, r->set, step); continue; }
        char gap[32] = "n/a";
        if (r->gap_tokens > 0) { snprintf(gap, sizeof(gap), "%.6f", r->gap); }
        csv_row(&af, "%s,%d,%d,%s,%lld,%.6f,%.6f,%s,%s,%d\n", run_pe_label, train_len, r->eval_len, r->mode, (long long)r->tokens,
                r->loss, exp(r->loss), r->set, gap, step);
    }
    atomic_commit(&af);
    write_positions(rows, n, a->output_dir, train_len, step);
}

static void extrapolation(GPT2* model, const TrainArgs* a, const MultiProcess* mp, int train_len, int step) {
    if (a->num_eval_lengths == 0) { return; }
    EvalRow* rows = (EvalRow*)malloc_check((size_t)a->num_sets * (1 + a->num_eval_variants) * 3 * a->num_eval_lengths * sizeof(EvalRow));
    int n = 0;
    // each test set: the encoding as trained, then each evaluation variant (-rs, -xb: llmc/pe.h) in the order given
    for (int set = 0; set < a->num_sets; set++) {
        for (int k = -1; k < a->num_eval_variants; k++) {
            PEEval e = {k < 0 ? PE_EVAL_PLAIN : a->eval_variants[k], eval_rope_factor(a, train_len), train_len};
            char suffix[32] = "";
            if (k >= 0) { snprintf(suffix, sizeof(suffix), "+%s", PE_EVAL_NAMES[e.variant]); }
            model->pe_eval = e;
            n += run_extrapolation(model, a, mp, train_len, set, rows + n, suffix);
        }
    }
    model->pe_eval.variant = PE_EVAL_PLAIN; // training, validation and sampling use the encoding as trained
    if (mp->rank == 0) { report_extrapolation(rows, n, a, train_len, step, eval_stride(a, train_len)); }
    free(rows);
}

// the test files of -H, -P and -A, read and checked once at the start, and every shard of
// every set of -j checked, headers, tokens and masks (a malformed or missing one stops the run
// before it trains); the perplexity windows (-E) need plain shards, not the tasks' masked ones
typedef struct {
    EvalFile hellaswag;
    PasskeyTokens passkey;
    TaskSets tasks;
} EvalData;

static void eval_data_load(EvalData* ed, const TrainArgs* a, GPT2* model) {
    memset(ed, 0, sizeof(*ed));
    for (int set = 0; set < a->num_sets; set++) {
        int vocab, rows = shard_pattern_rows(a->set_patterns[set], &vocab);
        if (rows > 0 && a->num_eval_lengths > 0) {
            fatal("-E: the test set '%s' (%s) holds answer-only task data (masked shards); the perplexity windows need plain "
                  "token shards (give -E none; the tasks' accuracy: -A)", a->set_names[set], a->set_patterns[set]);
        }
        DataLoader dl;
        dataloader_init(&dl, a->set_patterns[set], 1, rows > 0 ? rows : 1, 0, 1, model->config.vocab_size);
        dataloader_check_tokens(&dl);
        dataloader_free(&dl);
    }
    if (a->hellaswag != NULL) { evalfile_load(&ed->hellaswag, a->hellaswag, model->config.vocab_size, gpt2_max_length(model)); }
    if (a->passkey_trials > 0) { passkey_load(&ed->passkey, "gpt2_passkey.bin", model->config.vocab_size); }
    if (a->tasks != NULL) { task_sets_load(&ed->tasks, a->tasks, model->config.vocab_size); }
}

static void eval_data_free(EvalData* ed) {
    evalfile_free(&ed->hellaswag);
    passkey_free(&ed->passkey);
    task_sets_free(&ed->tasks);
}

// HellaSwag (-H): llm.c's line (acc_norm), the acc line, main.log's "s:<step> eval:<acc_norm>"
// (llm.c's), and a row appended to hellaswag.csv
#define HELLASWAG_CSV "hellaswag.csv"
#define HELLASWAG_CSV_HEADER "pe,train_len,step,examples,correct,acc,correct_norm,acc_norm,cut\n"
static void hellaswag(GPT2* model, const TrainArgs* a, const MultiProcess* mp, const EvalFile* ef, Logger* logger,
                      int train_len, int step) {
    EvalResult r = evalfile_score(model, ef, a->B, mp);
    if (mp->rank != 0) { return; }
    double acc = (double)r.correct / r.examples, acc_norm = (double)r.correct_norm / r.examples;
    printf("HellaSwag: %d/%d = %f\n", r.correct_norm, r.examples, acc_norm);
    printf("HellaSwag acc (lowest summed loss): %d/%d = %f; acc_norm (lowest mean loss per token) above\n", r.correct, r.examples, acc);
    if (r.cut > 0) { printf("note: %d of %d examples had their context cut from the left to the model's %d positions\n", r.cut, r.examples, gpt2_max_length(model)); }
    logger_line(logger, "s:%d eval:%.4f\n", step, acc_norm);
    if (a->output_dir == NULL) { return; }
    AtomicFile af;
    csv_open(&af, a->output_dir, HELLASWAG_CSV, HELLASWAG_CSV_HEADER, INT_MAX);
    csv_row(&af, "%s,%d,%d,%d,%d,%.6f,%d,%.6f,%d\n", run_pe_label, train_len, step, r.examples, r.correct, acc, r.correct_norm,
            acc_norm, r.cut);
    atomic_commit(&af);
}

// passkey retrieval (-P) at the -E lengths (the training length alone with -E none)
static void passkey(GPT2* model, const TrainArgs* a, const MultiProcess* mp, const PasskeyTokens* pk, int train_len, int step) {
    const int* lengths = a->num_eval_lengths > 0 ? a->eval_lengths : &train_len;
    int num_lengths = a->num_eval_lengths > 0 ? a->num_eval_lengths : 1;
    PasskeyCell* cells = (PasskeyCell*)malloc_check((size_t)num_lengths * a->passkey_depths * sizeof(PasskeyCell));
    passkey_grid(model, pk, lengths, num_lengths, a->passkey_depths, a->passkey_trials, (uint64_t)a->passkey_seed,
                 (int64_t)a->B * a->T, mp, cells);
    if (mp->rank == 0) {
        passkey_report(cells, num_lengths, a->passkey_depths, a->passkey_trials, (uint64_t)a->passkey_seed,
                       run_pe_label, train_len, step, a->output_dir);
    }
    free(cells);
}

// Before a run evaluates: the tables it appends to (llmc/utils.h) must be absent or its own,
// and a training run drops their rows of the steps after the one it starts from (start_step:
// the step it resumes from, 0 for a run from the start, which a run killed before its first
// checkpoint and restarted is; -1: an evaluation-only run, which drops none): it evaluates
// them again, as main.log drops those steps' lines
static void eval_tables_prepare(const TrainArgs* a, int start_step) {
    struct { int written; const char* name; const char* header; } tables[] = {
        {a->num_eval_lengths > 0, EXTRAPOLATION_CSV, EXTRAPOLATION_CSV_HEADER},
        {a->num_eval_lengths > 0, POSITIONS_CSV, POSITIONS_CSV_HEADER},
        {a->hellaswag != NULL, HELLASWAG_CSV, HELLASWAG_CSV_HEADER},
        {a->passkey_trials > 0, PASSKEY_CSV, PASSKEY_CSV_HEADER},
        {a->tasks != NULL, TASKS_CSV, TASKS_CSV_HEADER},
    };
    for (size_t k = 0; k < sizeof(tables) / sizeof(tables[0]); k++) {
        if (tables[k].written) { csv_prepare(a->output_dir, tables[k].name, tables[k].header, start_step >= 0 ? start_step : INT_MAX); }
    }
}

// every evaluation of a run: the extrapolation tables, HellaSwag (-H), passkey retrieval (-P),
// the algorithmic tasks (-A)
static void evaluate(GPT2* model, const TrainArgs* a, const MultiProcess* mp, const EvalData* ed, Logger* logger,
                     int train_len, int step) {
    extrapolation(model, a, mp, train_len, step);
    if (a->hellaswag != NULL) { hellaswag(model, a, mp, &ed->hellaswag, logger, train_len, step); }
    if (a->passkey_trials > 0) { passkey(model, a, mp, &ed->passkey, train_len, step); }
    if (a->tasks != NULL) { task_eval(model, &ed->tasks, (int64_t)a->B * a->T, mp, run_pe_label, train_len, step, a->output_dir); }
}

// ----------------------------------------------------------------------------

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// what this binary computes: the ranks of a job must all run the same (the trainer, the
// encoding and the revision of its definition, DAPE's variant and width)
static void build_description(char* out, size_t n) {
    char dape[32] = "";
    if (DAPE_ID != 0) { snprintf(dape, sizeof(dape), ", DAPE width %d", DAPE_WIDTH); }
    snprintf(out, n, "%s with PE '%s' (revision %d%s)", TRAINER_NAME, model_label(PE_ID, DAPE_ID), pe_revision(PE_ID), dape);
}

// Writes the flags a training run starts with (RUN_FLAGS_FILE): the command line but -o and -y.
static void run_flags_save(const TrainArgs* a) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/" RUN_FLAGS_FILE, a->output_dir);
    AtomicFile af;
    atomic_open(&af, path);
    for (int i = 1; i + 1 < a->argc; i += 2) {
        if (strcmp(a->argv[i], "-o") == 0 || strcmp(a->argv[i], "-y") == 0) { continue; }
        atomic_write(&af, a->argv[i], 1, strlen(a->argv[i]) + 1);
        atomic_write(&af, a->argv[i + 1], 1, strlen(a->argv[i + 1]) + 1);
    }
    atomic_commit(&af);
}

// A training run resumed (-y 1) continues as it was started: its command line is parsed
// again as the flags it was started with (RUN_FLAGS_FILE), followed by the flags given now,
// which take their place (the state file then checks the ones that define the run:
// resume_flags_apply). `latest` is the latest complete checkpoint (-1: the run was killed
// before its first, and starts again at step 0), `run` a file that shows the run. A run
// with a checkpoint but no RUN_FLAGS_FILE (written before it was recorded) takes the flags
// its state file records; one with neither is refused.
static void run_flags_resume(TrainArgs* a, const MultiProcess* mp, int latest, const char* run) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/" RUN_FLAGS_FILE, a->output_dir);
    if (!file_exists(path)) {
        if (latest >= 0) { return; }
        fatal("resume: %s holds a run (%s) but neither a complete checkpoint nor the flags it was started with (%s): "
              "nothing to resume; start a new run in another directory", a->output_dir, run, path);
    }
    FILE* f = fopen_read_regular(path);
    int64_t size = file_size_check(f, path);
    if (size > (1 << 20)) { fatal("%s: %lld bytes, too large for a run's flags", path, (long long)size); }
    char* buf = (char*)malloc_check((size_t)size + 1);
    fread_check(buf, 1, (size_t)size, f, path);
    fclose(f);
    int n = 0;
    for (int64_t i = 0; i < size; i++) { n += buf[i] == '\0'; }
    if (n % 2 != 0 || (size > 0 && buf[size - 1] != '\0')) { fatal("%s: corrupt (flags and values, each NUL-terminated)", path); }
    char** argv = (char**)malloc_check((size_t)(1 + n + a->argc) * sizeof(char*));
    int argc = 0;
    argv[argc++] = a->argv[0];
    char taken[2048] = ""; // the flags taken, for the message (cut to fit)
    for (char* p = buf; p < buf + size;) {
        char* flag = p;
        p += strlen(p) + 1;
        char* value = p;
        p += strlen(p) + 1;
        if (flag_given(a, flag)) { continue; }
        argv[argc++] = flag;
        argv[argc++] = value;
        append_format(taken, sizeof(taken), " %s %s", flag, value);
    }
    for (int i = 1; i < a->argc; i++) { argv[argc++] = a->argv[i]; }
    parse_args(a, argc, argv); // argv and buf are kept for the whole run
    if (mp->rank != 0) { return; }
    if (latest < 0) { printf("resume: no complete checkpoint in %s: the run starts again at step 0 with its flags, from %s:%s\n", a->output_dir, path, taken); }
    else { printf("resume: the run's flags, from %s:%s\n", path, taken); }
}

// -e names a checkpoint file (.bin), not a preset
static int model_is_file(const char* model) { return strlen(model) > 4 && strcmp(model + strlen(model) - 4, ".bin") == 0; }

// A model's setting kept in its checkpoint (rope's frequency table, shape's offset K) given
// by its flag (want; < 0: not given) into *now: the model's own (its checkpoint's, a preset's)
// where the flag is not given; a given value that replaces a checkpoint's is said in one line:
// a resumed run's from the step it resumes at (as the other flags that may change), a run from
// a checkpoint's (fine-tuning, or an evaluation) for the whole run. The checkpoints a run
// writes record the setting it trained with. was, is: the two values as the flag says them.
static void model_setting_apply(const char* flag, int* now, int want, int was, int is, int from_file, int resume_step, int training,
                                int rank) {
    if (want < 0) { return; }
    if (from_file && rank == 0 && was != is) {
        if (resume_step >= 0 && training) { printf("resume: %s %d replaces this run's %s %d from step %d on\n", flag, is, flag, was, resume_step); }
        else { printf("%s %d replaces the checkpoint's %s %d %s\n", flag, is, flag, was, training ? "in the training from it and its checkpoints" : "in this evaluation"); }
    }
    *now = want;
}

// rope's frequency table (-rb, -rt, -rr; llmc/pe.h) into the model's t (model_setting_apply;
// the base said as the number it stands for)
static void rope_table_apply(RopeTable* t, const RopeTable* given, int from_file, int resume_step, int training, int rank) {
    static const char* const flags[3] = {"-rb", "-rt", "-rr"};
    int* now[3] = {&t->base, &t->truncate, &t->resonance};
    const int want[3] = {given->base, given->truncate, given->resonance};
    for (int k = 0; k < 3; k++) {
        int was = k == 0 ? rope_base(*now[k]) : *now[k], is = k == 0 ? rope_base(want[k]) : want[k];
        model_setting_apply(flags[k], now[k], want[k], was, is, from_file, resume_step, training, rank);
    }
}

// shaw's tables (-ak, -av; pe/shaw.h) into the configuration c of a new model; a checkpoint's
// (from_file) are the shapes of its parameters, which the flags can only repeat
static void shaw_tables_apply(GPT2Config* c, const TrainArgs* a, int from_file) {
    if ((a->shaw_k >= 0 || a->shaw_values >= 0) && PE_ID != PE_ID_SHAW) {
        fatal("flags -ak, -av: the tables of shaw, which this binary's PE '%s' is not", pe_name(PE_ID));
    }
    if (from_file && ((a->shaw_k >= 0 && a->shaw_k != c->shaw_k) || (a->shaw_values >= 0 && a->shaw_values != c->shaw_values))) {
        fatal("flags -ak, -av: the checkpoint's tables have k = %d and %s, made with the model; leave the flags out",
              c->shaw_k, c->shaw_values ? "a^V (-av 1)" : "no a^V (-av 0)");
    }
    if (a->shaw_k >= 0) { c->shaw_k = a->shaw_k; }
    if (a->shaw_values >= 0) { c->shaw_values = a->shaw_values; }
}

static int train_main(int argc, char** argv) {
    MultiProcess mp;
    mp_init(&mp, &argc, &argv);
    char build[MP_SHOW_BYTES]; // ranks of different builds are stopped before they exchange anything else
    build_description(build, sizeof(build));
    mp_check_same(build, "build", 1);
    TrainArgs a;
    parse_args(&a, argc, argv);
    char lists[512] = ""; // -E, then -rs/-xb's variants: at most 32 and 8 short items
    for (int k = 0; k < a.num_eval_lengths; k++) { append_format(lists, sizeof(lists), " E%d", a.eval_lengths[k]); }
    for (int k = 0; k < a.num_eval_variants; k++) { append_format(lists, sizeof(lists), " V%d", a.eval_variants[k]); }
    // every flag, whole (paths of any length), so that ranks started differently are caught at once
    char* desc = format_alloc("%s|%s|%s|%s|%d %d %d %d %g %d %g %g %d %d %d %d %d %d %d %d %g %g %llu %d %d %d %d%s rf%g rb%d rt%d rr%d sk%d cg%g cs%g cl%d ak%d av%d fr%d rp%d L%d P%d %d %d|%s|%s",
             a.train_pattern, a.val_sets, a.model, a.output_dir ? a.output_dir : "", a.B, a.T, a.total_batch,
             a.max_steps, a.lr, a.warmup, a.final_lr_frac, a.weight_decay, a.val_every, a.val_batches, a.sample_every,
             a.gen_tokens, a.checkpoint_every, a.resume, a.zero_stage, a.overfit, a.skip_loss_z, a.skip_grad_z,
             (unsigned long long)a.seed, a.num_eval_lengths, a.eval_tokens, a.eval_stride, a.eval_every, lists, a.rope_factor,
             a.rope_table.base, a.rope_table.truncate, a.rope_table.resonance, a.shape_k, a.cape.global, a.cape.scale, a.cape.local, a.shaw_k, a.shaw_values, a.floater_refresh, a.rand_pos, a.eval_last, a.passkey_trials, a.passkey_depths, a.passkey_seed, a.hellaswag ? a.hellaswag : "",
             a.tasks ? a.tasks : "");
    mp_check_same(desc, "configuration (flags)", 0);
    free(desc);

    // the output directory: locked for the whole run (its stale temporary files removed);
    // a new training run refuses a directory that holds another run
    char run[256] = "", path[PATH_MAX];
    if (a.output_dir != NULL && mp.rank == 0) {
        ensure_dir_writable(a.output_dir);
        output_dir_lock(a.output_dir);
        output_dir_scan(a.output_dir, run, sizeof(run), 1);
    }
    mp_barrier();
    int latest = a.output_dir != NULL ? output_dir_scan(a.output_dir, run, sizeof(run), 0) : -1;
    if (mp.rank == 0 && !a.resume && a.max_steps != 0 && run[0] != '\0') {
        fatal("%s holds a run (%s): resume it with -y 1, or give another -o (or remove the directory)", a.output_dir, run);
    }
    if (mp.rank == 0 && a.resume && a.max_steps == 0) { // evaluation only: of the run's latest checkpoint
        if (flag_given(&a, "-e")) {
            fatal("-x 0 -y 1 evaluates the latest checkpoint in %s; -e %s names another model: give one of the two", a.output_dir, a.model);
        }
        if (latest < 0) { fatal("-x 0 -y 1: %s holds no complete checkpoint to evaluate", a.output_dir); }
    }
    if (a.resume && a.max_steps != 0) { // a training run resumed: as it was started
        if (latest >= 0 || run[0] != '\0') { run_flags_resume(&a, &mp, latest, run); }
        else if (mp.rank == 0) { printf("no complete checkpoint in %s: a new run starts\n", a.output_dir); }
    }
    int resume_step = a.resume ? latest : -1;
    TrainState recorded; // what the resumed run's state file records: its flags and data
    if (resume_step >= 0 && a.max_steps != 0) {
        snprintf(path, sizeof(path), "%s/state_%08d_%05d.bin", a.output_dir, resume_step, mp.rank);
        fclose(state_open(path, &recorded, 2 * OUTLIER_STATE_BYTES));
        resume_flags_apply(&a, &recorded, path, &mp);
    }
    int training = a.max_steps != 0;
    // answer-only data (masked shards: the tasks of data/tasks.c): a window is one of its rows
    // (-t by default), a new model takes its vocabulary, and there are no perplexity windows
    // (-E none by default) and no samples (the task evaluation, -A, prints examples)
    int data_vocab;
    int data_rows = shard_pattern_rows(training ? (a.overfit ? a.val_pattern : a.train_pattern) : a.val_pattern, &data_vocab);
    if (data_rows > 0) {
        if (!flag_given(&a, "-t")) { a.T = data_rows; }
        if (a.num_eval_lengths < 0) { a.num_eval_lengths = 0; }
        if (a.sample_every > 0 && flag_given(&a, "-s") && mp.rank == 0) { printf("note: -s: no samples of answer-only data (-A prints examples)\n"); }
        a.sample_every = 0;
    }
    if (training && a.output_dir != NULL && (strlen(a.model) >= STATE_MODEL_BYTES || strlen(a.train_pattern) >= STATE_PATTERN_BYTES)) {
        fatal("-e or -i is too long to be recorded for resume (at most %d and %d bytes)", STATE_MODEL_BYTES - 1, STATE_PATTERN_BYTES - 1);
    }

    // the model: resume, checkpoint, or a preset
    GPT2 model;
    if (resume_step >= 0) {
        snprintf(path, sizeof(path), "%s/model_%08d.bin", a.output_dir, resume_step);
        gpt2_build_from_checkpoint(&model, path);
    } else if (model_is_file(a.model)) {
        gpt2_build_from_checkpoint(&model, a.model);
    } else {
        GPT2Config cfg;
        if (!gpt2_config_from_preset(&cfg, a.model, a.T, PE_ID)) {
            fatal("-e %s is neither a .bin checkpoint nor a preset (nano, cpu, tiny, small, medium, d6..d48, task)", a.model);
        }
        pe_config_positions(&cfg, a.rand_pos > a.pose_len ? a.rand_pos : a.pose_len); // learned's table: a row for every position drawn (-rp) or given (-po)
        if (data_vocab > 0) { cfg.vocab_size = data_vocab; cfg.padded_vocab_size = round_up(data_vocab, 128); }
        shaw_tables_apply(&cfg, &a, 0);
        gpt2_build_from_config(&model, &cfg, a.seed);
    }
    GPT2Config* cfg = &model.config;
    if (resume_step >= 0 || model_is_file(a.model)) { shaw_tables_apply(cfg, &a, 1); }
    // randomized positions (llmc/pe.h): -rp sets the range of a new model or of an
    // evaluation; a resumed run draws from its checkpoint's range with its seed
    if (a.rand_pos >= 0 && a.rand_pos != cfg->rp_len) {
        if (resume_step >= 0 && training) {
            fatal("resume: -rp %d differs from this run's -rp %d (its checkpoint's); leave -rp out to continue the run as it was",
                  a.rand_pos, cfg->rp_len);
        }
        if (cfg->rp_len == 0 || training) { cfg->rp_seed = (int)a.seed; }
        cfg->rp_len = a.rand_pos;
        gpt2_config_check(cfg, "-rp");
    }
    if (training && cfg->rp_len > 0 && a.T > cfg->rp_len) {
        fatal("-t %d is more than the %d randomized positions it would be drawn from (-rp %d)", a.T, cfg->rp_len, cfg->rp_len);
    }
    if (a.pose_len > 0) { // PoSE (llmc/dataloader.h): the training rows' positions, given to the encoding
        if (!training) { fatal("-po is a way of training (-x 0 evaluates at plain positions)"); }
        if (!rp_supported(PE_ID)) {
            fatal("-po gives the rows positions, which %s takes none (the encodings that take positions: %s)",
                  model_label(PE_ID, DAPE_ID), pe_names_rp());
        }
        if (cfg->rp_len > 0) { fatal("-po and randomized positions (-rp %d) would both set the training rows' positions", cfg->rp_len); }
        if (a.pose_len > pe_max_length(cfg)) {
            fatal("-po %d: PE %s cannot take positions up to %d (%s %d)", a.pose_len, pe_name(PE_ID), a.pose_len - 1, PE_LIMIT_REASON,
                  pe_max_length(cfg));
        }
    }
    for (int k = 0; k < a.num_eval_variants; k++) {
        if (a.eval_variants[k] == PE_EVAL_PLAINPOS && cfg->rp_len == 0) { fatal("flag -ra: the model has no randomized positions (-rp)"); }
        if (a.eval_variants[k] == PE_EVAL_BCA && cfg->rp_len > 0) {
            fatal("flag -xb: blockwise causal attention is not defined for a model with randomized positions (-rp %d)", cfg->rp_len);
        }
    }
    rope_table_apply(&cfg->rope, &a.rope_table, resume_step >= 0 || model_is_file(a.model), resume_step, training, mp.rank);
    model_setting_apply("-sk", &cfg->shape_k, a.shape_k, cfg->shape_k, a.shape_k, resume_step >= 0 || model_is_file(a.model), resume_step,
                        training, mp.rank);
    if ((a.cape.global >= 0 || a.cape.scale >= 0 || a.cape.local >= 0) && PE_ID != PE_ID_CAPE) {
        fatal("flags -cg, -cs, -cl: the augmentation of cape, which this binary's PE '%s' is not", pe_name(PE_ID));
    }
    if (a.cape.global >= 0) { cfg->cape.global = a.cape.global; }
    if (a.cape.scale >= 0) { cfg->cape.scale = a.cape.scale; }
    if (a.cape.local >= 0) { cfg->cape.local = a.cape.local; }
    if (a.floater_refresh >= 0 && PE_ID != PE_ID_FLOATER) {
        fatal("flag -fr: the refresh of floater's positions, which this binary's PE '%s' is not", pe_name(PE_ID));
    }
    model_setting_apply("-fr", &cfg->floater_refresh, a.floater_refresh, cfg->floater_refresh, a.floater_refresh,
                        resume_step >= 0 || model_is_file(a.model), resume_step, training, mp.rank);
    gpt2_config_check(cfg, "the model with this run's -rb, -rt, -rr, -sk");
    snprintf(run_pe_label, sizeof(run_pe_label), "%s", model_label(PE_ID, DAPE_ID));
    if (rope_base(cfg->rope.base) != ROPE_BASE) { append_format(run_pe_label, sizeof(run_pe_label), "_rb%d", cfg->rope.base); }
    if (cfg->rope.truncate != 0) { append_format(run_pe_label, sizeof(run_pe_label), "_rt%d", cfg->rope.truncate); }
    if (cfg->rope.resonance != 0) { append_format(run_pe_label, sizeof(run_pe_label), "_rr"); }
    if (cfg->rp_len > 0) { append_format(run_pe_label, sizeof(run_pe_label), "_rp%d", cfg->rp_len); }
    char shape[MP_SHOW_BYTES]; // the same build may have read different files on different ranks
    snprintf(shape, sizeof(shape), "L=%d NH=%d C=%d maxT=%d V=%d Vp=%d DAPE width %d, %zu parameters, rp %d seed %d", cfg->num_layers,
             cfg->num_heads, cfg->channels, cfg->max_seq_len, cfg->vocab_size, cfg->padded_vocab_size, cfg->dape_width,
             count_parameters(cfg), cfg->rp_len, cfg->rp_seed);
    mp_check_same(shape, "model", 1);
    if (training && a.T > gpt2_max_length(&model)) {
        fatal("-t %d is beyond maxT = %d of this learned-PE model", a.T, gpt2_max_length(&model));
    }
    if (!training && a.T > gpt2_max_length(&model)) { // validation of a learned model at most at its maxT
        if (mp.rank == 0) { printf("validation at T = %d, the model's maxT (-t %d is beyond its positions)\n", gpt2_max_length(&model), a.T); }
        a.T = gpt2_max_length(&model);
    }
    // the training length, what the extrapolation is measured against: -t when training (and
    // recorded in the checkpoints), the checkpoint's when evaluating (a checkpoint of an older
    // trainer does not record it: maxT stands for it, which for learned is the table's length)
    if (training) { cfg->train_len = a.T; }
    int train_len = cfg->train_len > 0 ? cfg->train_len : cfg->max_seq_len;
    if (cfg->train_len == 0 && PE_HAS_POSITION_TABLE && mp.rank == 0) {
        printf("note: the checkpoint does not record its training length (an older trainer's, or llm.c's): taken as its maxT = %d\n",
               cfg->max_seq_len);
    }
    default_eval_lengths(&a, train_len);
    if (mp.rank == 0) { note_flags_without_windows(&a); }
    // every product of flags in 64 bits: a micro-step's tokens must fit an int
    int64_t tokens_per_micro = (int64_t)a.B * a.T * mp.world;
    if (tokens_per_micro > INT32_MAX) {
        fatal("-b %d x -t %d x %d processes = %lld tokens per micro-step, more than %d", a.B, a.T, mp.world,
              (long long)tokens_per_micro, INT32_MAX);
    }
    if (a.total_batch == -1) { a.total_batch = (int)tokens_per_micro; }
    if (a.total_batch % tokens_per_micro != 0) {
        fatal("total batch -d %d is not a multiple of B*T*processes = %d*%d*%d", a.total_batch, a.B, a.T, mp.world);
    }
    int grad_accum = (int)(a.total_batch / tokens_per_micro);
    EvalData evals; // -H, -P
    eval_data_load(&evals, &a, &model);

    // data: the val split is required (validation, extrapolation); train only when training
    DataLoader train, val;
    dataloader_init(&val, a.val_pattern, a.B, a.T, mp.rank, mp.world, cfg->vocab_size);
    if (training) { dataloader_init(&train, a.overfit ? a.val_pattern : a.train_pattern, a.B, a.T, mp.rank, mp.world, cfg->vocab_size); }
    if (training && a.pose_len > 0) { dataloader_pose(&train, a.pose_len, a.seed, POSE_WINDOWS); }
    int total_steps = a.max_steps;
    if (training && total_steps < 0) {
        int64_t epoch = train.num_tokens / ((int64_t)a.total_batch / a.T * train.stride); // a step's rows, each `stride` tokens
        if (epoch > INT32_MAX) { fatal("-x -1: one epoch is %lld steps, more than %d", (long long)epoch, INT32_MAX); }
        total_steps = (int)epoch;
    }
    if (training && total_steps < 1) { fatal("the training data holds fewer tokens than one step's %d", a.total_batch); }
    if (training && resume_step > total_steps) {
        fatal("resume: %s is at step %d, past the last step, %d (-x %d); give a larger -x", a.output_dir, resume_step, total_steps, a.max_steps);
    }
    if (training && resume_step == total_steps) { // a finished run: nothing to do
        if (mp.rank == 0) { printf("the run in %s already ended at step %d (-x %d): nothing to train\n", a.output_dir, resume_step, a.max_steps); }
        dataloader_free(&train);
        dataloader_free(&val);
        eval_data_free(&evals);
        gpt2_free(&model);
        mp_finalize();
        return 0;
    }

    if (mp.rank == 0) {
        printf("+-----------------------+----------------------------------------------------+\n");
        printf("| %-21s | %-50s |\n", "trainer", TRAINER_NAME);
#ifdef TRAINER_COMPUTE
        char compute[128];
        TRAINER_COMPUTE(compute, sizeof(compute));
        printf("| %-21s | %-50s |\n", "compute", compute);
#endif
        printf("| %-21s | %-50s |\n", "positional encoding", model_label(PE_ID, DAPE_ID));
        if (cfg->dape != 0) {
            char dape[64];
            snprintf(dape, 64, "kernel 1x%d, width D=%d, edge exact %d", cfg->dape, cfg->dape_width, DAPE_EDGE_EXACT);
            printf("| %-21s | %-50s |\n", "DAPE", dape);
        }
        if (rope_table_supported(cfg->pe)) {
            char rt[64];
            snprintf(rt, 64, "base %d, truncation %d%s, resonance %s", rope_base(cfg->rope.base), cfg->rope.truncate,
                     cfg->rope.truncate > 0 ? "" : " (off)", cfg->rope.resonance ? "on" : "off");
            printf("| %-21s | %-50s |\n", "rope frequencies", rt);
        }
        if (cfg->rp_len > 0) {
            char rp[64];
            snprintf(rp, 64, "from [0, %d), seed %d, drawn %s", cfg->rp_len, cfg->rp_seed,
                     rp_draws(cfg->pe, cfg->num_layers) > 1 ? "per layer" : "per pass");
            printf("| %-21s | %-50s |\n", "randomized positions", rp);
        }
        if (training && cfg->pe == PE_ID_CAPE) {
            char cape[64];
            snprintf(cape, 64, "global shift %g, scale %g, local shift %s", cfg->cape.global, cfg->cape.scale, cfg->cape.local ? "on" : "off");
            printf("| %-21s | %-50s |\n", "cape augmentation", cape);
        }
        if (training && cfg->pe == PE_ID_FLOATER) {
            char fr[64];
            snprintf(fr, 64, "the ODE solved again every %d update%s", cfg->floater_refresh, cfg->floater_refresh > 1 ? "s" : "");
            printf("| %-21s | %-50s |\n", "floater positions", fr);
        }
        if (training && a.pose_len > 0) {
            char pose[64];
            snprintf(pose, 64, "positions up to %d, windows of %d tokens", a.pose_len - 1, train.stride);
            printf("| %-21s | %-50s |\n", "PoSE", pose);
        }
        printf("| %-21s | %-50s |\n", "model", resume_step >= 0 ? path : a.model);
        char cell[3][64]; // the rows made of several numbers, padded like the others
        snprintf(cell[0], 64, "L=%d NH=%d C=%d maxT=%d V=%d Vp=%d", cfg->num_layers, cfg->num_heads, cfg->channels, cfg->max_seq_len, cfg->vocab_size, cfg->padded_vocab_size);
        snprintf(cell[1], 64, "B=%d T=%d processes=%d total=%d accum=%d", a.B, a.T, mp.world, a.total_batch, grad_accum);
        snprintf(cell[2], 64, "lr %.2e warmup %d final %.2f wd %.2f", a.lr, a.warmup, a.final_lr_frac, a.weight_decay);
        printf("| %-21s | %-50s |\n", "config", cell[0]);
        printf("| %-21s | %-50zu |\n", "parameters", count_parameters(cfg));
        printf("| %-21s | %-50s |\n", "train data", training ? (a.overfit ? a.val_pattern : a.train_pattern) : "(evaluation only)");
        printf("| %-21s | %-50s |\n", "val data", a.val_sets);
        printf("| %-21s | %-50s |\n", "batch", cell[1]);
        printf("| %-21s | %-50d |\n", "steps", training ? total_steps : 0);
        printf("| %-21s | %-50s |\n", "optimizer", cell[2]);
        printf("| %-21s | %-50s |\n", "output dir", a.output_dir ? a.output_dir : "(none)");
        printf("+-----------------------+----------------------------------------------------+\n");
        if (training && a.sample_every > 0 && a.gen_tokens > gpt2_max_length(&model) - 1) {
            printf("note: samples are cut at %d tokens (-g %d): the learned positions end at maxT = %d\n",
                   gpt2_max_length(&model) - 1, a.gen_tokens, cfg->max_seq_len);
        }
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
        load_training_state(&model, &a, &mp, resume_step, &rng, &train, &updates, &bad_steps, health);
        start_step = resume_step;
        if (mp.rank == 0) { printf("resumed from step %d of %s\n", start_step, a.output_dir); }
    }
    Logger logger;
    logger_init(&logger, a.output_dir, mp.rank, training, resume_step >= 0 ? resume_step : 0);
    if (a.output_dir != NULL && mp.rank == 0) { eval_tables_prepare(&a, training ? start_step : -1); }
    if (training && resume_step < 0 && a.output_dir != NULL && mp.rank == 0) { run_flags_save(&a); }
    if (training && a.overfit) { dataloader_reset(&train); dataloader_next_batch(&train); } // the first batch, resumed or not
    RowBucket* buckets = training ? (RowBucket*)malloc_check((size_t)a.B * sizeof(RowBucket)) : NULL;

    double total_time = 0;
    int timed_steps = 0;
    for (int step = start_step; training; step++) {
        int last = step >= total_steps;
        // the step a run resumes at already had its validation, sample and checkpoint
        int fresh = !(resume_step >= 0 && step == start_step);
        if (fresh && a.val_batches != 0 && ((a.val_every > 0 && step % a.val_every == 0) || last)) {
            float vl = validation_loss(&model, &val, a.val_batches, &mp);
            if (mp.rank == 0) { printf("val loss %.6f\n", vl); }
            logger_line(&logger, "s:%d tel:%.4f\n", step, vl);
        }
        if (fresh && a.eval_every > 0 && step % a.eval_every == 0 && step > 0 && !last) { evaluate(&model, &a, &mp, &evals, &logger, train_len, step); }
        if (fresh && mp.rank == 0 && a.sample_every > 0 && (step % a.sample_every == 0 || last) && step > 0) {
            generate_sample(&model, &tokenizer, a.gen_tokens, &rng);
        }
        if (fresh && a.output_dir != NULL && ((a.checkpoint_every > 0 && step % a.checkpoint_every == 0 && step > 0) || last)) {
            save_training(&model, &a, &mp, step, rng, &train, updates, bad_steps, health);
        }
        if (last) { break; }

        // one optimizer step: grad_accum micro-batches, averaged over processes. The step's loss
        // is the mean over its scored targets, of every micro-batch and process together: a
        // micro-batch's mean counts with its share of them, 1 / parts (a plain shard scores
        // every target: parts = grad_accum, as the plain mean)
        double t0 = now_seconds();
        gpt2_zero_grad(&model);
        double loss[1] = {0};
        model.rp_key = rp_key(RP_STREAM_TRAIN, (uint64_t)step, 0); // every micro-batch and process of the step
        int64_t step_scored = a.overfit ? grad_accum * dataloader_scored(&train, 0, 0, 1)
                                        : dataloader_scored(&train, train.shard_idx, train.pos, grad_accum);
        int64_t computed = 0; // tokens the passes computed (the length buckets cut rows short)
        for (int micro = 0; micro < grad_accum; micro++) {
            if (!a.overfit) { dataloader_next_batch(&train); }
            // the batch, or its rows in length buckets, each a pass of its own (a bucket's part of the
            // step's mean is its share of the scored targets), drawing the batch's positions (-rp)
            int groups = dataloader_buckets(&train, bucket_pass_tokens(a.pass_tokens), buckets);
            for (int k = 0; k < groups; k++) { computed += (int64_t)buckets[k].rows * buckets[k].T; }
            if (step == start_step && micro == 0 && train.row_len > 0 && a.pass_tokens >= 0 && mp.rank == 0) {
                if (bucket_pass_tokens(a.pass_tokens) < 0) {
                    printf("length buckets (-lb %d): off, whole rows (%s)\n", a.pass_tokens, PE_WHOLE_ROWS_WHY);
                } else {
                    printf("length buckets (-lb %d): the first batch in %d passes, %lld of its %d tokens computed\n",
                           a.pass_tokens, groups, (long long)computed, a.B * a.T);
                }
            }
            model.rp_draw_len = a.T;
            for (int k = 0; k < groups; k++) {
                float parts = (float)((double)step_scored / ((double)buckets[k].scored * mp.world));
                model.pos_in = buckets[k].positions; // PoSE's, or none
                gpt2_forward(&model, buckets[k].inputs, buckets[k].targets, buckets[k].rows, buckets[k].T, 1.0f / parts);
                gpt2_backward(&model);
                loss[0] += model.mean_loss / parts;
            }
            model.rp_draw_len = 0;
            model.pos_in = NULL;
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
                fatal("%d consecutive steps with a non-finite loss or gradient: stopping (%s)", bad_steps, last_checkpoint_note(a.output_dir));
            }
        }
        double dt = now_seconds() - t0;
        if (step > start_step) { total_time += dt; timed_steps++; }
        if (mp.rank == 0) {
            char info[128];
            gpt2_step_info(&model, dt, (long)(computed * mp.world), info, sizeof(info)); // MFU: of the tokens computed
            printf("step %4d/%d | loss %.6f (%+.2fz) | norm %.4f (%+.2fz) | lr %.2e | %.2f ms | %.0f tok/s%s\n",
                   step + 1, total_steps, loss[0], isnan(zl) ? 0.0 : zl, norm, isnan(zn) ? 0.0 : zn, lr, dt * 1000,
                   a.total_batch / dt, info);
            fflush(stdout);
        }
        logger_line(&logger, "s:%d trl:%.4f lr:%.6f norm:%.2f\n", step + 1, loss[0], lr, norm);
    }
    if (mp.rank == 0 && timed_steps > 0) {
        printf("total average iteration time: %.2f ms (%.0f tok/s)\n", total_time / timed_steps * 1000,
               (double)a.total_batch * timed_steps / total_time);
    }
    if (!training && a.val_batches != 0) { // evaluation only: llm.c's validation line, then the extrapolation table
        float vl = validation_loss(&model, &val, a.val_batches, &mp);
        if (!isfinite(vl)) { fatal("validation: the loss is not finite (the model has diverged)"); }
        if (mp.rank == 0) { printf("val loss %.6f\n", vl); }
        logger_line(&logger, "s:0 tel:%.4f\n", vl);
    }
    evaluate(&model, &a, &mp, &evals, &logger, train_len, training ? total_steps : 0);

    if (training) { dataloader_free(&train); }
    free(buckets);
    dataloader_free(&val);
    eval_data_free(&evals);
    tokenizer_free(&tokenizer);
    gpt2_free(&model);
    mp_finalize();
    return 0;
}

#endif // LLMC_DRIVER_H
