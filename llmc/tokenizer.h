/*
GPT-2 token decoder for the trainers (llm.c's tokenizer.h API), reading llm.c's
gpt2_tokenizer.bin: int32 header[256] = {20240328, version, vocab_size, eot_token, 0...}
(version 1 files have no eot word: it is 50256), then for each token id in order a uint8
length and that many raw bytes. `make gpt2_tokenizer.bin` writes it with ./tokenizer.

A missing file is not an error (the trainer then prints token ids instead of text); a file
that is there but wrong is one.
*/
#ifndef LLMC_TOKENIZER_H
#define LLMC_TOKENIZER_H

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "utils.h"

#define TOKENIZER_FILE_MAGIC 20240328
#define TOKENIZER_GPT2_VOCAB 50257

typedef struct {
    uint32_t vocab_size;
    char** token_table;  // token id -> its bytes, NUL-terminated for printing
    int init_ok;
    int eot_token;
} Tokenizer;

// reads the token table; a missing file leaves init_ok = 0 after one warning line
static void tokenizer_init(Tokenizer* t, const char* filename) {
    t->vocab_size = 0;
    t->token_table = NULL;
    t->init_ok = 0;
    t->eot_token = -1;
    FILE* f = fopen(filename, "rb");
    if (f == NULL) {
        fprintf(stderr, "warning: cannot open tokenizer file %s (%s); printing token ids instead of text (make gpt2_tokenizer.bin)\n",
                filename, strerror(errno));
        return;
    }
    int header[256];
    fread_check(header, sizeof(int), 256, f, filename);
    if (header[0] != TOKENIZER_FILE_MAGIC) { fatal("%s is not a tokenizer file: bad magic %d (expected %d)", filename, header[0], TOKENIZER_FILE_MAGIC); }
    if (header[1] != 1 && header[1] != 2) { fatal("%s: unsupported tokenizer file version %d (expected 1 or 2)", filename, header[1]); }
    if (header[2] != TOKENIZER_GPT2_VOCAB) { fatal("%s: vocabulary of %d tokens, expected GPT-2's %d", filename, header[2], TOKENIZER_GPT2_VOCAB); }
    t->vocab_size = (uint32_t)header[2];
    t->eot_token = header[1] == 1 ? TOKENIZER_GPT2_VOCAB - 1 : header[3];
    if (t->eot_token < 0 || (uint32_t)t->eot_token >= t->vocab_size) { fatal("%s: end-of-text token %d is out of range", filename, t->eot_token); }
    t->token_table = (char**)malloc_check(t->vocab_size * sizeof(char*));
    for (uint32_t i = 0; i < t->vocab_size; i++) {
        unsigned char length;
        fread_check(&length, 1, 1, f, filename);
        if (length == 0) { fatal("%s: token %u has length 0", filename, i); }
        t->token_table[i] = (char*)malloc_check(length + 1);
        fread_check(t->token_table[i], 1, length, f, filename);
        t->token_table[i][length] = '\0';
    }
    if (fgetc(f) != EOF) { fatal("%s: unexpected bytes after the last token", filename); }
    fclose(f);
    t->init_ok = 1;
}

// the bytes of a token (NUL-terminated); NULL when no tokenizer file was loaded
static const char* tokenizer_decode(Tokenizer* t, uint32_t token_id) {
    if (!t->init_ok) { return NULL; }
    if (token_id >= t->vocab_size) { fatal("token id %u is out of range [0, %u)", token_id, t->vocab_size); }
    return t->token_table[token_id];
}

static void tokenizer_free(Tokenizer* t) {
    if (t->init_ok) {
        for (uint32_t i = 0; i < t->vocab_size; i++) { free(t->token_table[i]); }
        free(t->token_table);
    }
    t->token_table = NULL;
    t->init_ok = 0;
}

// prints a decoded piece; a single-byte piece that is neither printable nor whitespace
// (a control byte, or half of a UTF-8 character) is skipped, as in llm.c
static void safe_printf(const char* piece) {
    if (piece == NULL || piece[0] == '\0') { return; }
    if (piece[1] == '\0') {
        unsigned char byte = (unsigned char)piece[0];
        if (!(isprint(byte) || isspace(byte))) { return; }
    }
    printf("%s", piece);
}

#endif // LLMC_TOKENIZER_H
