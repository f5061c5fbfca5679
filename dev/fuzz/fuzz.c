/*
libFuzzer harnesses for the readers of untrusted files, one per build flag:
  -DFUZZ_CHECKPOINT     gpt2_build_from_checkpoint (train_gpt2.c, PE cable)
  -DFUZZ_SHARD          the data loader: dataloader_init, next_batch, scored, read_all (plain
                        and masked shards)
  -DFUZZ_TOKENIZER_BIN  tokenizer_init / tokenizer_decode (llmc/tokenizer.h)
  -DFUZZ_BPE            the BPE encoder (data/tokenizer.c): any bytes, made valid UTF-8
                        as the tool does, must encode to ids that decode to exactly
                        those bytes (a failed round trip aborts: a finding)
Each reader's input is written to a file and handed to it. A reader must either
accept it or reject it through fatal() (one line, exit 1); here fatal() jumps back
to the harness instead of exiting, so a clean rejection counts as success and only
a real crash or memory error (AddressSanitizer) fails the run.

  make test-fuzz                          builds, seeds and runs each for a bounded time
  FUZZ_SEED_OUT=dir ./build/fuzz_shard    writes valid seed files into dir and exits
*/
#include <dirent.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(FUZZ_CHECKPOINT)
#define TESTING
#include "../../train_gpt2.c"
#elif defined(FUZZ_BPE)
#define main tokenizer_main
#include "../../data/tokenizer.c"
#undef main
static Worker fuzz_worker;
#else
#include "../../llmc/utils.h"
#include "../../llmc/dataloader.h"
#include "../../llmc/tokenizer.h"
#endif

static jmp_buf fuzz_env;
static char fuzz_path[256];

static void fuzz_reject(int code) { longjmp(fuzz_env, code); }

// marks the open file descriptors (below 1024) in `open_fds`
static void list_open_fds(unsigned char* open_fds) {
    memset(open_fds, 0, 1024);
    DIR* d = opendir("/proc/self/fd");
    if (d == NULL) { return; }
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (fd >= 0 && fd < 1024 && fd != dirfd(d)) { open_fds[fd] = 1; }
    }
    closedir(d);
}

// closes the descriptors an aborted reader left open (its FILE*s are lost to us)
static void close_leaked_fds(const unsigned char* before) {
    unsigned char now[1024];
    list_open_fds(now);
    for (int fd = 0; fd < 1024; fd++) { if (now[fd] && !before[fd]) { close(fd); } }
}

static void write_file(const char* path, const void* data, size_t n) {
    FILE* f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, n, f) != n) { fprintf(stderr, "cannot write %s\n", path); exit(1); }
    fclose(f);
}

// the code under test, on one input (the readers read it from the file at `path`)
static void read_input(const uint8_t* data, size_t size, const char* path) {
#if defined(FUZZ_BPE)
    (void)path;
    ByteBuf text = {0}, scratch = {0}, decoded = {0};
    IntVec ids = {0};
    bytes_append(&text, data, size);
    utf8_sanitize_tail(&text, 0, &scratch);
    encode_text(&fuzz_worker, text.data, text.len, &ids);
    for (size_t i = 0; i < ids.len; i++) {
        if (ids.data[i] < 0 || ids.data[i] >= VOCAB_SIZE) { abort(); }
        bytes_append(&decoded, vocab.token_bytes[ids.data[i]], vocab.token_len[ids.data[i]]);
    }
    if (decoded.len != text.len || (text.len > 0 && memcmp(decoded.data, text.data, text.len) != 0)) { abort(); }
    free(text.data); free(scratch.data); free(decoded.data); free(ids.data);
#elif defined(FUZZ_CHECKPOINT)
    GPT2 model;
    gpt2_build_from_checkpoint(&model, path);
    gpt2_free(&model);
#elif defined(FUZZ_SHARD)
    DataLoader dl;
    dataloader_init(&dl, path, 2, 4, 0, 1, 50257);
    for (int i = 0; i < 3; i++) { dataloader_next_batch(&dl); }
    (void)dataloader_scored(&dl, 0, 0, 5);
    int64_t n;
    free(dataloader_read_all(&dl, 1 << 20, &n));
    dataloader_free(&dl);
#elif defined(FUZZ_TOKENIZER_BIN)
    Tokenizer t;
    tokenizer_init(&t, path);
    if (t.init_ok) {
        for (uint32_t i = 0; i < t.vocab_size; i++) { (void)tokenizer_decode(&t, i); }
    }
    tokenizer_free(&t);
#endif
}

// valid inputs to start from
static void write_seeds(const char* dir) {
    char path[512];
#if defined(FUZZ_CHECKPOINT)
    GPT2Config cfg = {4, 3, 4, 1, 2, 2, PE_ID}; // maxT V Vp L NH C pe
    GPT2 model;
    gpt2_build_from_config(&model, &cfg, 1);
    snprintf(path, sizeof(path), "%s/tiny_fp32.bin", dir);
    gpt2_save_checkpoint(&model, path);
    gpt2_free(&model);
#elif defined(FUZZ_SHARD)
    int header[256] = {20240520, 1, 40};
    unsigned char buf[1024 + 80];
    memcpy(buf, header, 1024);
    for (int i = 0; i < 40; i++) { uint16_t t = (uint16_t)(i * 997 % 50257); memcpy(buf + 1024 + 2 * i, &t, 2); }
    snprintf(path, sizeof(path), "%s/shard.bin", dir);
    write_file(path, buf, sizeof(buf));
    // a masked shard: 8 rows of 4 tokens (the harness's T) and the token that ends the last,
    // the middle two of each row scored
    int masked[256] = {20240520, 2, 33, 4, 50257};
    unsigned char mbuf[1024 + 3 * 33] = {0};
    memcpy(mbuf, masked, 1024);
    for (int i = 0; i < 33; i++) {
        uint16_t t = (uint16_t)(i * 31 % 50257);
        memcpy(mbuf + 1024 + 2 * i, &t, 2);
        mbuf[1024 + 66 + i] = i % 4 == 1 || i % 4 == 2;
    }
    snprintf(path, sizeof(path), "%s/masked.bin", dir);
    write_file(path, mbuf, sizeof(mbuf));
#elif defined(FUZZ_BPE)
    const char* texts[] = {
        "Hello world, DON'T you'll 12345 3.14159  \n\n\t  end",
        "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xd0\xbf\xd1\x80\xd0\xb8 \xd9\x85\xd8\xb1 \xf0\x9f\x99\x82\xe2\x80\x8d\xf0\x9f\x94\xa5",
        "bad bytes \xff\xfe\xc3 and \xed\xa0\x80 surrogate",
    };
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/text%d.txt", dir, i);
        write_file(path, texts[i], strlen(texts[i]));
    }
#elif defined(FUZZ_TOKENIZER_BIN)
    // a structurally valid table: every token one byte long
    size_t n = 1024 + 2 * 50257;
    unsigned char* buf = (unsigned char*)calloc(n, 1);
    int header[256] = {20240328, 2, 50257, 50256};
    memcpy(buf, header, 1024);
    for (int i = 0; i < 50257; i++) { buf[1024 + 2 * i] = 1; buf[1024 + 2 * i + 1] = (unsigned char)(i % 256); }
    snprintf(path, sizeof(path), "%s/tokenizer.bin", dir);
    write_file(path, buf, n);
    free(buf);
#endif
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
    (void)argc; (void)argv;
    const char* seeds = getenv("FUZZ_SEED_OUT");
    if (seeds != NULL) { write_seeds(seeds); exit(0); }
    snprintf(fuzz_path, sizeof(fuzz_path), "/tmp/fuzz_input_%d.bin", (int)getpid());
#if defined(FUZZ_BPE)
    vocab_load("data/gpt2"); // make vocab
    regex_init();
    worker_init(&fuzz_worker);
#endif
    fatal_abort = fuzz_reject; // run with -close_fd_mask=2 to silence the rejections' messages
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static unsigned char open_before[1024];
#if !defined(FUZZ_BPE)
    write_file(fuzz_path, data, size);
#endif
    list_open_fds(open_before);
    if (setjmp(fuzz_env) == 0) {
        read_input(data, size, fuzz_path);
    } else {
        close_leaked_fds(open_before);
    }
    return 0;
}
