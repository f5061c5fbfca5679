/*
libFuzzer harnesses for the readers of untrusted files, one per build flag:
  -DFUZZ_CHECKPOINT     gpt2_build_from_checkpoint (train_gpt2.c, PE cable)
  -DFUZZ_SHARD          the data loader: dataloader_init, next_batch, read_all
  -DFUZZ_TOKENIZER_BIN  tokenizer_init / tokenizer_decode (llmc/tokenizer.h)
Each input is written to a file and handed to the reader. A reader must either
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

// the reader under test, on the file at `path`
static void read_input(const char* path) {
#if defined(FUZZ_CHECKPOINT)
    GPT2 model;
    gpt2_build_from_checkpoint(&model, path);
    gpt2_free(&model);
#elif defined(FUZZ_SHARD)
    DataLoader dl;
    dataloader_init(&dl, path, 2, 4, 0, 1, 50257);
    for (int i = 0; i < 3; i++) { dataloader_next_batch(&dl); }
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
    fatal_abort = fuzz_reject; // run with -close_fd_mask=2 to silence the rejections' messages
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static unsigned char open_before[1024];
    write_file(fuzz_path, data, size);
    list_open_fds(open_before);
    if (setjmp(fuzz_env) == 0) {
        read_input(fuzz_path);
    } else {
        close_leaked_fds(open_before);
    }
    return 0;
}
