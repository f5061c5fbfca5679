/*
Data loader for llm.c token shards: int32 header[256] = {20240520, 1, ntok, 0...}
followed by ntok uint16 tokens. A glob pattern selects the shards, read in sorted
order and in sequence, wrapping around at the end. Every header is validated when
the loader is created, and every token id as it is read, so a wrong file is one
clear error instead of a crash or silent garbage.

Masked shards (version 2: answer-only training, the algorithmic tasks of llmc/tasks.h):
int32 header[256] = {20240520, 2, ntok, R, V, ...}, then ntok uint16 tokens, then ntok
uint8 mask bytes, 1 where the token is a scored target, 0 where it is not. The tokens are
rows of R tokens, one example each from its first token on (PAD after it), and one token
more that ends the last row: ntok = rows * R + 1. Every token is below V, the vocabulary
the file is written in (words 5 and up are the writer's: llmc/tasks.h). Such a shard is
read in windows of exactly one row (T = R), so that no example attends to another; a target
that is not scored becomes TARGET_UNSCORED, which the loss skips. A row's first token is
never scored (it would be predicted from the row before) and every row has a scored target;
a mask that breaks either rule, or holds another byte than 0 or 1, is an error. All shards of
a pattern are of one kind, and masked ones of one R and V. A plain shard is read exactly
as before.

Multi-process: one global batch is world * B * T + 1 consecutive tokens; rank r
reads its B * T + 1 tokens at offset r * B * T of it, so that N processes with B
rows each see exactly the tokens that one process with N * B rows would see.

PoSE (Zhu et al. 2024, dwzhu-pku/PoSE src/train_pose.py 156-186; dataloader_pose): each row is
made from a window of W = 5 (T + 1) tokens of the stream, as the official code makes an example
from a document cut at 5 times the training length: its T + 1 tokens are two chunks of the
window, [0, r1) and [l2, r2), r1 ~ U{1..(T + 2) / 2}, r2 ~ U{T + 1..W}, l2 = r2 - (T + 1 - r1)
(Python's inclusive randint bounds), the first at positions 0..r1-1, the second skipped on by
u ~ U{0..L - (T + 1)}: positions r1 + u .. T + u (L: the target length). The inputs are the
first T tokens, the targets the next token of each, across the chunks' boundary as the
official code (the loss is not masked there). A row's draws come from the run's seed and the
window's place in the data, so a resumed run and any number of processes make the same rows;
a global batch takes world * B * W tokens of the stream (stride W a row, not T).
*/
#ifndef LLMC_DATALOADER_H
#define LLMC_DATALOADER_H

#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rand.h"
#include "utils.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_VERSION_MASKED 2
#define SHARD_HEADER_INTS 256
// the target of a position that the loss skips (masked shards)
#define TARGET_UNSCORED (-1)

typedef struct {
    int rank, world;
    int B, T;
    int stride;            // tokens of the stream a row takes: T, or PoSE's window W
    int pose_len;          // PoSE's target length L (0: off); its positions (B, T) of the batch, and the run's seed
    int* positions;
    uint64_t pose_seed;
    int vocab_size;        // every token must be below this
    int row_len;           // masked shards: their row length R (= T); 0: plain shards
    glob_t glob;
    size_t num_shards;
    int64_t* shard_ntok;   // tokens in each shard
    int64_t num_tokens;    // total tokens over all shards
    // position: the next global batch starts at token `pos` of shard `shard_idx`
    size_t shard_idx;
    int64_t pos;
    FILE* file;            // the open shard (shard_idx)
    uint16_t* buffer;
    uint8_t* mask;         // masked shards: the mask bytes of the batch's tokens
    int* inputs;           // (B, T)
    int* targets;          // (B, T), TARGET_UNSCORED where the loss skips a position
    int64_t scored;        // scored targets of the last batch (B * T for plain shards)
    int* bucket_tokens;    // masked shards: the batch's rows in length buckets (dataloader_buckets)
} DataLoader;

// Reads and validates a shard header into `header`; returns its token count. A masked
// shard's (version 2) row length R (word 3) and vocabulary V (word 4) are checked, and
// that its tokens fill whole rows.
static int64_t shard_read_header(const char* path, FILE* f, int* header) {
    int64_t size = file_size_check(f, path);
    if (size < SHARD_HEADER_INTS * (int64_t)sizeof(int)) { fatal("%s is not a token shard: %lld bytes, shorter than the header", path, (long long)size); }
    fread_check(header, sizeof(int), SHARD_HEADER_INTS, f, path);
    if (header[0] != SHARD_MAGIC) { fatal("%s is not a token shard: bad magic %d (expected %d)", path, header[0], SHARD_MAGIC); }
    if (header[1] != SHARD_VERSION && header[1] != SHARD_VERSION_MASKED) {
        fatal("%s: unsupported shard version %d (expected %d, or %d for a masked shard)", path, header[1], SHARD_VERSION, SHARD_VERSION_MASKED);
    }
    int64_t ntok = header[2];
    if (ntok <= 0) { fatal("%s: header says %lld tokens", path, (long long)ntok); }
    int masked = header[1] == SHARD_VERSION_MASKED;
    if (masked && (header[3] < 2 || header[4] < 1 || header[4] > 65536)) {
        fatal("%s: a masked shard with rows of %d tokens in a vocabulary of %d (expected rows of at least 2, a vocabulary of 1 to 65536)",
              path, header[3], header[4]);
    }
    if (masked && (ntok - 1) % header[3] != 0) {
        fatal("%s: %lld tokens are not whole rows of %d plus the one that ends the last", path, (long long)ntok, header[3]);
    }
    int64_t expected = SHARD_HEADER_INTS * (int64_t)sizeof(int) + ntok * (int64_t)(masked ? sizeof(uint16_t) + 1 : sizeof(uint16_t));
    if (size != expected) {
        fatal("%s: header says %lld tokens (%lld bytes%s) but the file has %lld bytes", path,
              (long long)ntok, (long long)expected, masked ? " with their mask" : "", (long long)size);
    }
    return ntok;
}

// The row length of the shards of a pattern if they are masked (llmc/tasks.h's task
// files), 0 if they are plain, and the vocabulary they are written in (0 for plain
// shards); no file matching is an error, as are shards of different kinds
static int shard_pattern_rows(const char* pattern, int* vocab) {
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) { fatal("no file matches the data pattern '%s'", pattern); }
    int rows = -1, v = 0;
    for (size_t s = 0; s < g.gl_pathc; s++) {
        int header[SHARD_HEADER_INTS];
        FILE* f = fopen_read_regular(g.gl_pathv[s]);
        shard_read_header(g.gl_pathv[s], f, header);
        fclose(f);
        int r = header[1] == SHARD_VERSION_MASKED ? header[3] : 0;
        if (rows >= 0 && (r != rows || (r > 0 && header[4] != v))) {
            fatal("%s: the shards of '%s' are of different kinds (plain, or masked with other rows or vocabularies)", g.gl_pathv[s], pattern);
        }
        rows = r;
        v = r > 0 ? header[4] : 0;
    }
    globfree(&g);
    *vocab = v;
    return rows;
}

// Checks the mask of `rows` rows of R tokens (with the token after them, which starts the
// next row): bytes 0 or 1, every row's first token unscored, a scored target in every row.
// `first` is the index of the first row's first token in the shard, for the error.
static void mask_check_rows(const uint8_t* mask, int64_t rows, int R, const char* path, int64_t first) {
    for (int64_t r = 0; r <= rows; r++) {
        const uint8_t* m = mask + r * R;
        int64_t at = first + r * R;
        if (m[0] != 0) { fatal("%s: a row starts with a scored token (token %lld): its example would be predicted from the row before", path, (long long)at); }
        if (r == rows) { break; }
        int any = 0;
        for (int t = 1; t <= R; t++) {
            if (m[t] > 1) { fatal("%s: mask byte %d at token %lld (expected 0 or 1)", path, m[t], (long long)(at + t)); }
            any |= t < R && m[t];
        }
        if (!any) { fatal("%s: the row at token %lld has no scored target", path, (long long)at); }
    }
}

static void dataloader_open_shard_(DataLoader* dl) {
    if (dl->file != NULL) { fclose(dl->file); }
    dl->file = fopen_read_regular(dl->glob.gl_pathv[dl->shard_idx]);
}

static void dataloader_init(DataLoader* dl, const char* pattern, int B, int T, int rank, int world, int vocab_size) {
    memset(dl, 0, sizeof(*dl));
    dl->rank = rank; dl->world = world; dl->B = B; dl->T = T; dl->stride = T; dl->vocab_size = vocab_size;
    int rc = glob(pattern, 0, NULL, &dl->glob);
    if (rc != 0 || dl->glob.gl_pathc == 0) { fatal("no file matches the data pattern '%s'", pattern); }
    dl->num_shards = dl->glob.gl_pathc;
    dl->shard_ntok = (int64_t*)malloc_check(dl->num_shards * sizeof(int64_t));
    int64_t need = (int64_t)world * B * T + 1;
    int shard_vocab;
    dl->row_len = shard_pattern_rows(pattern, &shard_vocab);
    if (dl->row_len > 0 && T != dl->row_len) {
        fatal("%s holds one example per row of %d tokens (masked shards): they are read in windows of exactly one row (-t %d), not %d",
              pattern, dl->row_len, dl->row_len, T);
    }
    for (size_t s = 0; s < dl->num_shards; s++) {
        const char* path = dl->glob.gl_pathv[s];
        FILE* f = fopen_read_regular(path);
        int header[SHARD_HEADER_INTS];
        dl->shard_ntok[s] = shard_read_header(path, f, header);
        fclose(f);
        if (dl->shard_ntok[s] < need) {
            fatal("%s has %lld tokens, fewer than one batch of %d x %d x %d + 1 = %lld", path,
                  (long long)dl->shard_ntok[s], world, B, T, (long long)need);
        }
        dl->num_tokens += dl->shard_ntok[s];
    }
    dl->buffer = (uint16_t*)malloc_check(((size_t)B * T + 1) * sizeof(uint16_t));
    dl->mask = dl->row_len > 0 ? (uint8_t*)malloc_check((size_t)B * T + 1) : NULL;
    dl->inputs = (int*)malloc_check((size_t)B * T * sizeof(int));
    dl->targets = (int*)malloc_check((size_t)B * T * sizeof(int));
    dl->bucket_tokens = dl->row_len > 0 ? (int*)malloc_check((size_t)2 * B * T * sizeof(int)) : NULL;
    dl->shard_idx = 0;
    dl->pos = 0;
    dataloader_open_shard_(dl);
}

// moves to a saved position (training resume) after checking that it is valid
static void dataloader_seek(DataLoader* dl, size_t shard_idx, int64_t pos) {
    if (shard_idx >= dl->num_shards || pos < 0 || pos >= dl->shard_ntok[shard_idx] || (dl->row_len > 0 && pos % dl->row_len != 0)) {
        fatal("saved data position (shard %zu, token %lld) does not exist in the current data", shard_idx, (long long)pos);
    }
    dl->shard_idx = shard_idx;
    dl->pos = pos;
    dataloader_open_shard_(dl);
}

static void dataloader_reset(DataLoader* dl) {
    dataloader_seek(dl, 0, 0);
}

// where the global batch at (shard, pos) starts: there, or at the start of the next shard
// when this one has too few tokens left
static void dataloader_batch_start_(const DataLoader* dl, size_t* shard, int64_t* pos) {
    int64_t global = (int64_t)dl->world * dl->B * dl->stride;
    if (*pos + global + 1 > dl->shard_ntok[*shard]) {
        *shard = (*shard + 1) % dl->num_shards;
        *pos = 0;
    }
}

// PoSE's windows and draws (the comment at the top)
#define POSE_WINDOWS 5        // W = 5 (T + 1): the official code cuts a document at 5 times the training length
#define POSE_STREAM 0x506f5345 // the draws' key: the run's seed, this, the window's place in the data

// a uniform integer of [lo, hi], both included (Python's randint)
static int pose_randint(uint64_t* state, int lo, int hi) { return lo + (int)(((uint64_t)random_u32(state) * (uint64_t)(hi - lo + 1)) >> 32); }

// the batch's rows from their windows in dl->buffer (row b's W tokens at b W; the window's first
// token at `start` + b W of shard dl->shard_idx): inputs, targets and positions
static void dataloader_pose_rows(DataLoader* dl, int64_t start) {
    int T = dl->T, W = dl->stride, n = T + 1;
    for (int b = 0; b < dl->B; b++) {
        const uint16_t* win = dl->buffer + (size_t)b * W;
        int64_t at = start + (int64_t)b * W;
        uint64_t state = random_seed(dl->pose_seed ^ (((uint64_t)POSE_STREAM << 32) + dl->shard_idx * 0x9E3779B97F4A7C15ull) ^ (uint64_t)at);
        int r1 = pose_randint(&state, 1, (n + 1) / 2);
        int r2 = pose_randint(&state, n, W);
        int l2 = r2 - (n - r1);
        int u = pose_randint(&state, 0, dl->pose_len - n);
        for (int t = 0; t < T; t++) { // token t of the chunked row and the next one
            int src = t < r1 ? t : l2 + (t - r1), next = t + 1 < r1 ? t + 1 : l2 + (t + 1 - r1);
            dl->inputs[b * T + t] = win[src];
            dl->targets[b * T + t] = win[next];
            dl->positions[b * T + t] = t < r1 ? t : t + u;
        }
    }
    dl->scored = (int64_t)dl->B * T;
}

// PoSE (the comment at the top) on a plain training loader, before its first batch: rows from
// windows of `windows` (T + 1) tokens (POSE_WINDOWS: the official code's; 1 in the tests: no
// content skipped), at positions that reach target_len - 1; seed: the run's
static void dataloader_pose(DataLoader* dl, int target_len, uint64_t seed, int windows) {
    if (dl->row_len > 0) { fatal("PoSE (-po) chunks a stream of text, not the rows of answer-only data (masked shards)"); }
    if (target_len < dl->T + 1) { fatal("-po %d: the target length is at least -t + 1 = %d", target_len, dl->T + 1); }
    dl->pose_len = target_len;
    dl->pose_seed = seed;
    dl->stride = windows * (dl->T + 1);
    int64_t need = (int64_t)dl->world * dl->B * dl->stride + 1;
    for (size_t s = 0; s < dl->num_shards; s++) {
        if (dl->shard_ntok[s] < need) {
            fatal("%s has %lld tokens, fewer than one PoSE batch of %d x %d windows of %d + 1 = %lld (-po)", dl->glob.gl_pathv[s],
                  (long long)dl->shard_ntok[s], dl->world, dl->B, dl->stride, (long long)need);
        }
    }
    free(dl->buffer);
    dl->buffer = (uint16_t*)malloc_check(((size_t)dl->B * dl->stride + 1) * sizeof(uint16_t));
    dl->positions = (int*)malloc_check((size_t)dl->B * dl->T * sizeof(int));
}

// loads this rank's B x T inputs and targets of the next global batch
static void dataloader_next_batch(DataLoader* dl) {
    int64_t global = (int64_t)dl->world * dl->B * dl->stride;
    size_t shard = dl->shard_idx;
    dataloader_batch_start_(dl, &dl->shard_idx, &dl->pos);
    if (dl->shard_idx != shard) { dataloader_open_shard_(dl); }
    const char* path = dl->glob.gl_pathv[dl->shard_idx];
    int64_t start = dl->pos + (int64_t)dl->rank * dl->B * dl->stride;
    size_t n = (size_t)dl->B * dl->stride + 1;
    fseek_check(dl->file, (long)(SHARD_HEADER_INTS * sizeof(int) + start * sizeof(uint16_t)), SEEK_SET, path);
    fread_check(dl->buffer, sizeof(uint16_t), n, dl->file, path);
    for (size_t i = 0; i < n; i++) {
        if (dl->buffer[i] >= dl->vocab_size) {
            fatal("%s: token %d at position %lld is out of range (vocab size %d)", path, dl->buffer[i],
                  (long long)(start + (int64_t)i), dl->vocab_size);
        }
    }
    if (dl->pose_len > 0) {
        dataloader_pose_rows(dl, start);
        dl->pos += global;
        return;
    }
    for (size_t i = 0; i < n - 1; i++) {
        dl->inputs[i] = dl->buffer[i];
        dl->targets[i] = dl->buffer[i + 1];
    }
    dl->scored = (int64_t)n - 1;
    if (dl->mask != NULL) {
        fseek_check(dl->file, (long)(SHARD_HEADER_INTS * sizeof(int) + dl->shard_ntok[dl->shard_idx] * sizeof(uint16_t) + start), SEEK_SET, path);
        fread_check(dl->mask, 1, n, dl->file, path);
        mask_check_rows(dl->mask, dl->B, dl->T, path, start);
        dl->scored = 0;
        for (size_t i = 0; i < n - 1; i++) {
            if (dl->mask[i + 1]) { dl->scored++; } else { dl->targets[i] = TARGET_UNSCORED; }
        }
    }
    dl->pos += global;
}

// The last batch's rows in length buckets (the trainer's -lb). A row's positions past its
// last scored target change no loss and no gradient (every encoding is causal: a position
// sees only those before it), so they need not be computed: the rows are grouped by their
// length up to that target, and each group is a batch of its own, its rows cut to its longest
// (`rows` rows of `T` tokens at inputs and targets, `scored` targets scored). The groups are
// the cuts of the lengths, in order, that minimize the tokens computed plus pass_tokens for
// each group (a forward and backward pass's fixed cost, in tokens: the trainer's); a group's
// rows keep the batch's order. For pass_tokens < 0 (no buckets), or a plain shard's batch,
// the one group is the batch itself. Returns the number of groups, at most B.
// positions: the rows' positions (B, T) where the loader gives them (PoSE, whose plain shards make one group), else NULL
typedef struct { int rows, T; int64_t scored; const int* inputs; const int* targets; const int* positions; } RowBucket;
static int dataloader_buckets(DataLoader* dl, int pass_tokens, RowBucket* out) {
    int B = dl->B, T = dl->T;
    if (pass_tokens < 0 || dl->row_len == 0) {
        out[0] = (RowBucket){ B, T, dl->scored, dl->inputs, dl->targets, dl->positions };
        return 1;
    }
    // each row's length up to its last scored target (>= 1: every masked row has one), and
    // how many rows have each length
    int* live = (int*)malloc_check((size_t)B * sizeof(int));
    int* rows_at = (int*)calloc_check((size_t)T + 1, sizeof(int));
    for (int b = 0; b < B; b++) {
        live[b] = 0;
        for (int t = 0; t < T; t++) { if (dl->targets[(size_t)b * T + t] != TARGET_UNSCORED) { live[b] = t + 1; } }
        rows_at[live[b]]++;
    }
    // the m <= B distinct lengths in increasing order, and how many rows are that long or shorter
    int* lengths = (int*)malloc_check((size_t)B * sizeof(int));
    int* count = (int*)malloc_check((size_t)B * sizeof(int));
    int m = 0;
    for (int t = 1; t <= T; t++) {
        if (rows_at[t] > 0) { lengths[m] = t; count[m] = rows_at[t] + (m > 0 ? count[m - 1] : 0); m++; }
    }
    // best[j]: the least cost of the rows with the first j lengths; cut[j]: where its last group starts
    int64_t* best = (int64_t*)malloc_check((size_t)(m + 1) * sizeof(int64_t));
    int* cut = (int*)malloc_check((size_t)(m + 1) * sizeof(int));
    best[0] = 0;
    for (int j = 1; j <= m; j++) {
        best[j] = INT64_MAX;
        for (int i = 0; i < j; i++) {
            int64_t rows = count[j - 1] - (i > 0 ? count[i - 1] : 0);
            int64_t cost = best[i] + rows * lengths[j - 1] + pass_tokens;
            if (cost < best[j]) { best[j] = cost; cut[j] = i; }
        }
    }
    // the groups from the longest down, then in increasing length; rows gathered in order
    int groups = 0;
    for (int j = m; j > 0; j = cut[j]) { groups++; }
    int* tokens = dl->bucket_tokens;
    for (int g = groups - 1, j = m; g >= 0; g--, j = cut[j]) {
        int lo = cut[j] > 0 ? lengths[cut[j] - 1] : 0, hi = lengths[j - 1]; // lengths in (lo, hi]
        RowBucket* k = &out[g];
        k->rows = 0;
        k->T = hi;
        k->scored = 0;
        int* in = tokens;
        int* tg = tokens + (size_t)(count[j - 1] - (cut[j] > 0 ? count[cut[j] - 1] : 0)) * hi;
        k->inputs = in;
        k->targets = tg;
        k->positions = NULL;
        for (int b = 0; b < B; b++) {
            if (live[b] <= lo || live[b] > hi) { continue; }
            memcpy(in, dl->inputs + (size_t)b * T, (size_t)hi * sizeof(int));
            memcpy(tg, dl->targets + (size_t)b * T, (size_t)hi * sizeof(int));
            for (int t = 0; t < hi; t++) { k->scored += tg[t] != TARGET_UNSCORED; }
            in += hi;
            tg += hi;
            k->rows++;
        }
        tokens = tg;
    }
    free(live);
    free(rows_at);
    free(lengths);
    free(count);
    free(best);
    free(cut);
    return groups;
}

// reads every token of every shard and checks it against the vocabulary, and every mask of a
// masked shard (mask_check_rows): the test sets are checked whole when a run starts, so that a
// bad token or mask stops it before it trains, not at an evaluation after hours of training
static void dataloader_check_tokens(const DataLoader* dl) {
    const int64_t chunk = 1 << 20;
    uint16_t* buf = (uint16_t*)malloc_check((size_t)chunk * sizeof(uint16_t));
    for (size_t s = 0; s < dl->num_shards; s++) {
        const char* path = dl->glob.gl_pathv[s];
        FILE* f = fopen_read_regular(path);
        fseek_check(f, SHARD_HEADER_INTS * sizeof(int), SEEK_SET, path);
        for (int64_t p = 0; p < dl->shard_ntok[s]; p += chunk) {
            int64_t n = dl->shard_ntok[s] - p < chunk ? dl->shard_ntok[s] - p : chunk;
            fread_check(buf, sizeof(uint16_t), (size_t)n, f, path);
            for (int64_t i = 0; i < n; i++) {
                if (buf[i] >= dl->vocab_size) {
                    fatal("%s: token %d at position %lld is out of range (vocab size %d)", path, buf[i], (long long)(p + i), dl->vocab_size);
                }
            }
        }
        if (dl->row_len > 0) { // the mask, after the tokens: rows of R bytes and the byte that ends the last
            int R = dl->row_len;
            int64_t rows = (dl->shard_ntok[s] - 1) / R, per_read = chunk / R > 0 ? chunk / R : 1;
            uint8_t* m = (uint8_t*)malloc_check((size_t)(per_read * R + 1));
            for (int64_t r = 0; r < rows; r += per_read) {
                int64_t n = rows - r < per_read ? rows - r : per_read;
                fseek_check(f, (long)(SHARD_HEADER_INTS * sizeof(int) + dl->shard_ntok[s] * sizeof(uint16_t) + r * R), SEEK_SET, path);
                fread_check(m, 1, (size_t)(n * R + 1), f, path);
                mask_check_rows(m, n, R, path, r * R);
            }
            free(m);
        }
        fclose(f);
    }
    free(buf);
}

// The scored targets of `batches` global batches (every rank's rows) from the batch at
// (shard, pos) on; the loader itself stays where it is. The driver divides a step's loss
// by this count.
static int64_t dataloader_scored(const DataLoader* dl, size_t shard, int64_t pos, int batches) {
    int64_t global = (int64_t)dl->world * dl->B * dl->T;
    if (dl->row_len == 0) { return batches * global; } // every target of a plain shard's rows (PoSE's too)
    uint8_t* m = (uint8_t*)malloc_check((size_t)global);
    int64_t count = 0;
    for (int k = 0; k < batches; k++, pos += global) {
        dataloader_batch_start_(dl, &shard, &pos);
        const char* path = dl->glob.gl_pathv[shard];
        FILE* f = fopen_read_regular(path);
        fseek_check(f, (long)(SHARD_HEADER_INTS * sizeof(int) + dl->shard_ntok[shard] * sizeof(uint16_t) + pos + 1), SEEK_SET, path);
        fread_check(m, 1, (size_t)global, f, path);
        fclose(f);
        for (int64_t i = 0; i < global; i++) { count += m[i] == 1; }
    }
    free(m);
    return count;
}

// reads up to `max_tokens` consecutive tokens of all shards (in order) into a new array;
// the evaluation uses this to cut long windows across shard boundaries
static uint16_t* dataloader_read_all(DataLoader* dl, int64_t max_tokens, int64_t* out_n) {
    if (dl->row_len > 0) {
        fatal("%s holds examples in rows (masked shards, answer-only task data): the perplexity windows (-E) need plain "
              "token shards (give -E none; the tasks' accuracy: -A)", dl->glob.gl_pathv[0]);
    }
    int64_t n = dl->num_tokens < max_tokens ? dl->num_tokens : max_tokens;
    uint16_t* tokens = (uint16_t*)malloc_check((size_t)n * sizeof(uint16_t));
    int64_t got = 0;
    for (size_t s = 0; s < dl->num_shards && got < n; s++) {
        const char* path = dl->glob.gl_pathv[s];
        FILE* f = fopen_read_regular(path);
        fseek_check(f, SHARD_HEADER_INTS * sizeof(int), SEEK_SET, path);
        int64_t take = dl->shard_ntok[s] < n - got ? dl->shard_ntok[s] : n - got;
        fread_check(tokens + got, sizeof(uint16_t), (size_t)take, f, path);
        fclose(f);
        for (int64_t i = 0; i < take; i++) {
            if (tokens[got + i] >= dl->vocab_size) {
                fatal("%s: token %d at position %lld is out of range (vocab size %d)", path, tokens[got + i],
                      (long long)i, dl->vocab_size);
            }
        }
        got += take;
    }
    *out_n = got;
    return tokens;
}

// Reads a whole file of llm.c's kind other than a shard (an eval file, the passkey tokens):
// int32 header[256] whose first two words are `magic` and `version`, then uint16 values.
// `what` names the kind in errors ("an eval file"). Fills header, returns the values and
// their count in n.
static uint16_t* read_u16_file(const char* path, int magic, int version, const char* what, int* header, int64_t* n) {
    FILE* f = fopen_read_regular(path);
    int64_t size = file_size_check(f, path);
    int64_t header_bytes = SHARD_HEADER_INTS * (int64_t)sizeof(int);
    if (size < header_bytes) { fatal("%s is not %s: %lld bytes, shorter than the header", path, what, (long long)size); }
    fread_check(header, sizeof(int), SHARD_HEADER_INTS, f, path);
    if (header[0] != magic) { fatal("%s is not %s: bad magic %d (expected %d)", path, what, header[0], magic); }
    if (header[1] != version) { fatal("%s: unsupported version %d of %s (expected %d)", path, header[1], what, version); }
    if ((size - header_bytes) % 2 != 0) { fatal("%s is truncated: an odd number of bytes after the header", path); }
    *n = (size - header_bytes) / 2;
    uint16_t* values = (uint16_t*)malloc_check((size_t)*n * sizeof(uint16_t));
    fread_check(values, sizeof(uint16_t), (size_t)*n, f, path);
    fclose(f);
    return values;
}

// identity of the data for resume: a hash (FNV-1a) of every shard's file name, without its
// directory, and token count, in order; the same files moved elsewhere keep it
static uint64_t dataloader_fingerprint(const DataLoader* dl) {
    uint64_t h = 1469598103934665603ull;
    for (size_t s = 0; s < dl->num_shards; s++) {
        const char* path = dl->glob.gl_pathv[s];
        const char* name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        for (const char* c = name; *c; c++) { h = (h ^ (unsigned char)*c) * 1099511628211ull; }
        for (int b = 0; b < 8; b++) { h = (h ^ (uint8_t)(dl->shard_ntok[s] >> (8 * b))) * 1099511628211ull; }
    }
    return h;
}

static void dataloader_free(DataLoader* dl) {
    if (dl->file != NULL) { fclose(dl->file); }
    globfree(&dl->glob);
    free(dl->shard_ntok);
    free(dl->buffer);
    free(dl->mask);
    free(dl->inputs);
    free(dl->targets);
    free(dl->bucket_tokens);
    free(dl->positions);
}

#endif // LLMC_DATALOADER_H
