/*
Data loader for llm.c token shards: int32 header[256] = {20240520, 1, ntok, 0...}
followed by ntok uint16 tokens. A glob pattern selects the shards, read in sorted
order and in sequence, wrapping around at the end. Every header is validated when
the loader is created, and every token id as it is read, so a wrong file is one
clear error instead of a crash or silent garbage.

Multi-process: one global batch is world * B * T + 1 consecutive tokens; rank r
reads its B * T + 1 tokens at offset r * B * T of it, so that N processes with B
rows each see exactly the tokens that one process with N * B rows would see.
*/
#ifndef LLMC_DATALOADER_H
#define LLMC_DATALOADER_H

#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "utils.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256

typedef struct {
    int rank, world;
    int B, T;
    int vocab_size;        // every token must be below this
    glob_t glob;
    size_t num_shards;
    int64_t* shard_ntok;   // tokens in each shard
    int64_t num_tokens;    // total tokens over all shards
    // position: the next global batch starts at token `pos` of shard `shard_idx`
    size_t shard_idx;
    int64_t pos;
    FILE* file;            // the open shard (shard_idx)
    uint16_t* buffer;
    int* inputs;           // (B, T)
    int* targets;          // (B, T)
} DataLoader;

// reads and validates a shard header; returns its token count
static int64_t shard_read_header(const char* path, FILE* f) {
    int header[SHARD_HEADER_INTS];
    int64_t size = file_size_check(f, path);
    if (size < (int64_t)sizeof(header)) { fatal("%s is not a token shard: %lld bytes, shorter than the header", path, (long long)size); }
    fread_check(header, sizeof(int), SHARD_HEADER_INTS, f, path);
    if (header[0] != SHARD_MAGIC) { fatal("%s is not a token shard: bad magic %d (expected %d)", path, header[0], SHARD_MAGIC); }
    if (header[1] != SHARD_VERSION) { fatal("%s: unsupported shard version %d (expected %d)", path, header[1], SHARD_VERSION); }
    int64_t ntok = header[2];
    if (ntok <= 0) { fatal("%s: header says %lld tokens", path, (long long)ntok); }
    int64_t expected = (int64_t)sizeof(header) + ntok * (int64_t)sizeof(uint16_t);
    if (size != expected) {
        fatal("%s: header says %lld tokens (%lld bytes) but the file has %lld bytes", path,
              (long long)ntok, (long long)expected, (long long)size);
    }
    return ntok;
}

static void dataloader_open_shard_(DataLoader* dl) {
    if (dl->file != NULL) { fclose(dl->file); }
    dl->file = fopen_read_regular(dl->glob.gl_pathv[dl->shard_idx]);
}

static void dataloader_init(DataLoader* dl, const char* pattern, int B, int T, int rank, int world, int vocab_size) {
    memset(dl, 0, sizeof(*dl));
    dl->rank = rank; dl->world = world; dl->B = B; dl->T = T; dl->vocab_size = vocab_size;
    int rc = glob(pattern, 0, NULL, &dl->glob);
    if (rc != 0 || dl->glob.gl_pathc == 0) { fatal("no file matches the data pattern '%s'", pattern); }
    dl->num_shards = dl->glob.gl_pathc;
    dl->shard_ntok = (int64_t*)malloc_check(dl->num_shards * sizeof(int64_t));
    int64_t need = (int64_t)world * B * T + 1;
    for (size_t s = 0; s < dl->num_shards; s++) {
        const char* path = dl->glob.gl_pathv[s];
        FILE* f = fopen_read_regular(path);
        dl->shard_ntok[s] = shard_read_header(path, f);
        fclose(f);
        if (dl->shard_ntok[s] < need) {
            fatal("%s has %lld tokens, fewer than one batch of %d x %d x %d + 1 = %lld", path,
                  (long long)dl->shard_ntok[s], world, B, T, (long long)need);
        }
        dl->num_tokens += dl->shard_ntok[s];
    }
    dl->buffer = (uint16_t*)malloc_check(((size_t)B * T + 1) * sizeof(uint16_t));
    dl->inputs = (int*)malloc_check((size_t)B * T * sizeof(int));
    dl->targets = (int*)malloc_check((size_t)B * T * sizeof(int));
    dl->shard_idx = 0;
    dl->pos = 0;
    dataloader_open_shard_(dl);
}

// moves to a saved position (training resume) after checking that it is valid
static void dataloader_seek(DataLoader* dl, size_t shard_idx, int64_t pos) {
    if (shard_idx >= dl->num_shards || pos < 0 || pos >= dl->shard_ntok[shard_idx]) {
        fatal("saved data position (shard %zu, token %lld) does not exist in the current data", shard_idx, (long long)pos);
    }
    dl->shard_idx = shard_idx;
    dl->pos = pos;
    dataloader_open_shard_(dl);
}

static void dataloader_reset(DataLoader* dl) {
    dataloader_seek(dl, 0, 0);
}

// loads this rank's B x T inputs and targets of the next global batch
static void dataloader_next_batch(DataLoader* dl) {
    int64_t global = (int64_t)dl->world * dl->B * dl->T;
    if (dl->pos + global + 1 > dl->shard_ntok[dl->shard_idx]) {
        // not enough tokens left in this shard: continue at the start of the next one
        dl->shard_idx = (dl->shard_idx + 1) % dl->num_shards;
        dl->pos = 0;
        dataloader_open_shard_(dl);
    }
    const char* path = dl->glob.gl_pathv[dl->shard_idx];
    int64_t start = dl->pos + (int64_t)dl->rank * dl->B * dl->T;
    size_t n = (size_t)dl->B * dl->T + 1;
    fseek_check(dl->file, (long)(SHARD_HEADER_INTS * sizeof(int) + start * sizeof(uint16_t)), SEEK_SET, path);
    fread_check(dl->buffer, sizeof(uint16_t), n, dl->file, path);
    for (size_t i = 0; i < n; i++) {
        if (dl->buffer[i] >= dl->vocab_size) {
            fatal("%s: token %d at position %lld is out of range (vocab size %d)", path, dl->buffer[i],
                  (long long)(start + (int64_t)i), dl->vocab_size);
        }
    }
    for (size_t i = 0; i < n - 1; i++) {
        dl->inputs[i] = dl->buffer[i];
        dl->targets[i] = dl->buffer[i + 1];
    }
    dl->pos += global;
}

// reads every token of every shard and checks it against the vocabulary (the test sets are
// checked whole when a run starts, so that a bad token stops it before it trains)
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
        fclose(f);
    }
    free(buf);
}

// reads up to `max_tokens` consecutive tokens of all shards (in order) into a new array;
// the evaluation uses this to cut long windows across shard boundaries
static uint16_t* dataloader_read_all(DataLoader* dl, int64_t max_tokens, int64_t* out_n) {
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
    free(dl->inputs);
    free(dl->targets);
}

#endif // LLMC_DATALOADER_H
