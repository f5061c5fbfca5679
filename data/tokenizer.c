/*
GPT-2 byte-level BPE tokenizer and token shard writer, in plain C.

    ./tokenizer encode FILE          token ids of FILE ('-': standard input), one per line
    ./tokenizer decode               token ids on standard input, one per line -> raw bytes
    ./tokenizer shard [-n N] [-s SPLIT] PREFIX
                                     document stream on standard input -> token shards
    ./tokenizer info SHARD...        tokens, documents and longest document of shards
    ./tokenizer dump SHARD           token ids of a shard, one per line
    ./tokenizer write-bin FILE       llm.c's gpt2_tokenizer.bin, for decoding in the trainers
    ./tokenizer eval FILE            example stream on standard input -> llm.c's eval file
    ./tokenizer write-passkey FILE   the tokens of the passkey test (gpt2_passkey.bin)
options: -v DIR  vocabulary directory holding encoder.json and vocab.bpe (default data/gpt2)
         -t N    threads (default: all online cores)

The encoding is GPT-2's, token for token (tiktoken's "gpt2", OpenAI's original encoder):
  1. the input bytes are decoded as UTF-8; invalid bytes become U+FFFD exactly as a WHATWG
     decoder replaces them (maximal subparts), so that files with broken bytes encode like
     JavaScript's readFileSync(f, 'utf8') sees them;
  2. GPT-2's regular expression splits the text into pieces (PCRE2, UTF mode, JIT). Its \s is
     spelled out as the Unicode White_Space set, as in tiktoken, not JavaScript's \s;
  3. each piece is byte-pair merged with the ranks of vocab.bpe (lowest rank first, all its
     occurrences left to right), with a per-thread cache of merged pieces.
Documents are read in batches and large ones cut into chunks at places where the regular
expression is known to cut (see is_split_point); threads encode the chunks of one batch while
the main thread reads the next batch and writes out the last, in order.

Document stream (what `shard` reads): for each document, its length in bytes as ASCII
decimal and a newline, then exactly that many bytes of text. Every document becomes the
end-of-text token 50256 followed by its tokens.

Example stream (what `eval` reads): for each example a line "<label> <completions>", then
its context and each completion as documents of the document stream; each is tokenized as
given (HellaSwag's completions carry their leading space). The eval file is llm.c's (see
cmd_eval).

Token shard (llm.c's format): int32 header[256] = {20240520, 1, ntok, 0...}, then ntok uint16.
Shards are written to a temporary file (llmc/utils.h: AtomicFile) and renamed when complete,
so that a crash or a full disk never leaves a shard that looks complete. Shards of the same
prefix and split left by an earlier, longer run are removed at the end.
*/
#define _GNU_SOURCE
#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <dirent.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdatomic.h>
#include "../llmc/utils.h"

#define VOCAB_SIZE 50257
#define EOT_TOKEN 50256
#define NUM_MERGES 50000
#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define TOKENIZER_MAGIC 20240328
#define TOKENIZER_VERSION 2
#define HEADER_INTS 256
#define CHUNK_BYTES (64 * 1024)          // large documents are cut into chunks of about this size
#define BATCH_BYTES (4 * 1024 * 1024)    // text per batch (one round of parallel encoding)
#define CACHE_SLOTS (1 << 17)            // per-thread cache of merged pieces (power of two)
#define CACHE_MAX_PIECE 48               // longer pieces are merged every time, not cached
#define MAX_THREADS 256
#define MAX_DOC_BYTES INT_MAX            // longest document of a stream (pieces are counted in int)
#define EVAL_MAGIC 20240522              // llm.c's eval file (multiple-choice completions)
#define EVAL_VERSION 1
#define EVAL_DELIMITER 65535             // opens every example
#define EVAL_MAX_EXAMPLES 65535          // the example index is a uint16
#define EVAL_MAX_EXAMPLE_BYTES 65535     // so is an example's size in bytes
#define MAX_COMPLETIONS 16
#define PASSKEY_MAGIC 20240610           // gpt2_passkey.bin (llmc/passkey.h reads it)
#define PASSKEY_VERSION 1
#define PASSKEY_FIRST_KEY 10000          // the keys: every 5-digit number
#define PASSKEY_NUM_KEYS 90000

// ----------------------------------------------------------------------------
// growable arrays

typedef struct { uint8_t* data; size_t len, cap; } ByteBuf;
typedef struct { int* data; size_t len, cap; } IntVec;

// makes room for `extra` more bytes, doubling the capacity
static void bytes_reserve(ByteBuf* b, size_t extra) {
    if (b->len + extra <= b->cap) { return; }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) { cap *= 2; }
    uint8_t* p = (uint8_t*)realloc(b->data, cap);
    if (p == NULL) { fatal("out of memory allocating %zu bytes", cap); }
    b->data = p; b->cap = cap;
}

// appends n bytes
static void bytes_append(ByteBuf* b, const void* src, size_t n) {
    if (n == 0) { return; }
    bytes_reserve(b, n);
    memcpy(b->data + b->len, src, n);
    b->len += n;
}

// makes room for `extra` more ints, doubling the capacity
static void ints_reserve(IntVec* v, size_t extra) {
    if (v->len + extra <= v->cap) { return; }
    size_t cap = v->cap ? v->cap : 1024;
    while (cap < v->len + extra) { cap *= 2; }
    int* p = (int*)realloc(v->data, cap * sizeof(int));
    if (p == NULL) { fatal("out of memory allocating %zu tokens", cap); }
    v->data = p; v->cap = cap;
}

// reads a whole file (or standard input for "-") into b, NUL-terminated; fails with one line on any error
static void read_all(const char* path, ByteBuf* b) {
    int is_stdin = strcmp(path, "-") == 0;
    FILE* f = is_stdin ? stdin : fopen(path, "rb");
    if (f == NULL) { fatal("cannot open %s (%s)", path, strerror(errno)); }
    b->len = 0;
    for (;;) {
        bytes_reserve(b, 1 << 20);
        size_t got = fread(b->data + b->len, 1, b->cap - b->len, f);
        b->len += got;
        if (got == 0) { break; }
    }
    if (ferror(f)) { fatal("cannot read %s (%s)", is_stdin ? "standard input" : path, strerror(errno)); }
    if (!is_stdin) { fclose(f); }
    bytes_reserve(b, 1);
    b->data[b->len] = '\0';  // so that the parsers may use strtol at the end
}

// ----------------------------------------------------------------------------
// UTF-8

// decodes one UTF-8 sequence at s (n bytes available) the WHATWG way: returns its length and
// stores the code point, or returns the length of the maximal invalid subpart (at least 1)
// and stores -1. Each invalid subpart becomes exactly one U+FFFD.
static int utf8_next(const uint8_t* s, size_t n, int* cp) {
    uint8_t c = s[0];
    *cp = -1;
    if (c < 0x80) { *cp = c; return 1; }
    int need; uint8_t lo = 0x80, hi = 0xBF; int value;
    if (c >= 0xC2 && c <= 0xDF) { need = 1; value = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2; value = c & 0x0F;
        if (c == 0xE0) { lo = 0xA0; } else if (c == 0xED) { hi = 0x9F; }
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3; value = c & 0x07;
        if (c == 0xF0) { lo = 0x90; } else if (c == 0xF4) { hi = 0x8F; }
    } else { return 1; }
    for (int i = 1; i <= need; i++) {
        if ((size_t)i >= n || s[i] < lo || s[i] > hi) { return i; }
        value = (value << 6) | (s[i] & 0x3F);
        lo = 0x80; hi = 0xBF;
    }
    *cp = value;
    return need + 1;
}

// makes text[start, len) valid UTF-8 in place, each invalid subpart replaced by U+FFFD
// (WHATWG decoding); valid text, the usual case, is only scanned
static void utf8_sanitize_tail(ByteBuf* text, size_t start, ByteBuf* scratch) {
    const uint8_t* t = text->data;
    size_t n = text->len, i = start;
    while (i < n) {
        if (i + 8 <= n) {  // eight ASCII bytes at a time
            uint64_t w;
            memcpy(&w, t + i, 8);
            if ((w & 0x8080808080808080ull) == 0) { i += 8; continue; }
        }
        if (t[i] < 0x80) { i++; continue; }
        int cp;
        int len = utf8_next(t + i, n - i, &cp);
        if (cp < 0) { break; }
        i += len;
    }
    if (i == n) { return; }
    // from the first invalid byte on, copy aside and write back with replacements
    scratch->len = 0;
    bytes_append(scratch, t + i, n - i);
    text->len = i;
    bytes_reserve(text, scratch->len);
    const uint8_t* in = scratch->data;
    size_t j = 0;
    while (j < scratch->len) {
        int cp;
        int len = utf8_next(in + j, scratch->len - j, &cp);
        if (cp >= 0) { bytes_append(text, in + j, len); } else { bytes_append(text, "\xEF\xBF\xBD", 3); }
        j += len;
    }
}

// ----------------------------------------------------------------------------
// vocabulary: encoder.json (token string -> id) and vocab.bpe (merges in rank order)

typedef struct { uint64_t key; int rank; int merged; } PairSlot;

typedef struct {
    uint8_t* token_bytes[VOCAB_SIZE];  // raw bytes of each token (byte-level mapping undone)
    int token_len[VOCAB_SIZE];
    int* token_slots;                  // hash of token bytes -> id, open addressing, -1 = empty
    uint32_t token_mask;
    PairSlot* pair_slots;              // hash of (left id, right id) -> merge rank and result
    uint32_t pair_mask;
    int byte_id[256];                  // id of each single byte
} Vocab;

static Vocab vocab;
static const uint64_t PAIR_EMPTY = UINT64_MAX;

// hash of a byte string (FNV-1a): token table and piece cache
static uint32_t hash_bytes(const uint8_t* s, size_t n) {
    uint32_t h = 2166136261u;  // FNV-1a
    for (size_t i = 0; i < n; i++) { h = (h ^ s[i]) * 16777619u; }
    return h;
}

// hash of a (left id, right id) pair key (Fibonacci hashing)
static uint32_t hash_pair(uint64_t key) {
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32);
}

// id of the token with these raw bytes, or -1
static int token_lookup(const uint8_t* s, int n) {
    for (uint32_t i = hash_bytes(s, n) & vocab.token_mask;; i = (i + 1) & vocab.token_mask) {
        int id = vocab.token_slots[i];
        if (id < 0) { return -1; }
        if (vocab.token_len[id] == n && memcmp(vocab.token_bytes[id], s, n) == 0) { return id; }
    }
}

// rank of merging token a with token b (and the merged id in *merged), or INT_MAX
static inline int pair_lookup(int a, int b, int* merged) {
    uint64_t key = ((uint64_t)a << 32) | (uint32_t)b;
    for (uint32_t i = hash_pair(key) & vocab.pair_mask;; i = (i + 1) & vocab.pair_mask) {
        const PairSlot* s = &vocab.pair_slots[i];
        if (s->key == key) { *merged = s->merged; return s->rank; }
        if (s->key == PAIR_EMPTY) { return INT_MAX; }
    }
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes
// for code points 256.. in byte order. Fills the inverse map, code point -> byte (-1: none).
static void byte_level_inverse(int cp_to_byte[324]) {
    for (int i = 0; i < 324; i++) { cp_to_byte[i] = -1; }
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        if (printable) { cp_to_byte[b] = b; } else { cp_to_byte[256 + n++] = b; }
    }
}

// converts a token written in GPT-2's byte-level alphabet (code points) to its raw bytes
static int byte_level_to_bytes(const int* cps, int n, uint8_t* out, const int cp_to_byte[324]) {
    for (int i = 0; i < n; i++) {
        if (cps[i] < 0 || cps[i] >= 324 || cp_to_byte[cps[i]] < 0) { return -1; }
        out[i] = (uint8_t)cp_to_byte[cps[i]];
    }
    return n;
}

// opens a vocabulary file, failing with a hint to fetch it when it is missing
static void read_vocab_file(const char* dir, const char* name, ByteBuf* b, char* path, size_t path_size) {
    snprintf(path, path_size, "%s/%s", dir, name);
    if (!file_exists(path)) {
        fatal("GPT-2 vocabulary file %s not found; run `make vocab` to fetch it (or pass -v DIR)", path);
    }
    read_all(path, b);
}

// adds token id to the bytes -> id table
static void token_insert(int id) {
    uint32_t i = hash_bytes(vocab.token_bytes[id], vocab.token_len[id]) & vocab.token_mask;
    while (vocab.token_slots[i] >= 0) { i = (i + 1) & vocab.token_mask; }
    vocab.token_slots[i] = id;
}

// parses encoder.json, a flat JSON object {"token": id, ...}, into the id -> bytes table
static void load_encoder_json(const char* dir, const int cp_to_byte[324]) {
    char path[PATH_MAX];
    ByteBuf b = {0};
    read_vocab_file(dir, "encoder.json", &b, path, sizeof(path));
    const uint8_t* s = b.data;
    size_t n = b.len, i = 0;
    int cps[256];
    uint8_t raw[256];
    int count = 0;
    for (int id = 0; id < VOCAB_SIZE; id++) { vocab.token_bytes[id] = NULL; }
#define SKIP_WS() while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) { i++; }
#define BAD(what) fatal("%s is not GPT-2's encoder.json: %s at byte %zu", path, what, i)
    SKIP_WS();
    if (i >= n || s[i++] != '{') { BAD("expected '{'"); }
    for (;;) {
        SKIP_WS();
        if (i >= n || s[i++] != '"') { BAD("expected a string"); }
        int ncp = 0;
        while (i < n && s[i] != '"') {
            int cp;
            if (s[i] == '\\') {
                if (i + 1 >= n) { BAD("truncated escape"); }
                char e = (char)s[i + 1];
                i += 2;
                if (e == 'u') {
                    cp = 0;
                    for (int k = 0; k < 4; k++, i++) {
                        if (i >= n || !isxdigit(s[i])) { BAD("bad \\u escape"); }
                        cp = cp * 16 + (isdigit(s[i]) ? s[i] - '0' : (tolower(s[i]) - 'a' + 10));
                    }
                } else {
                    const char* from = "\"\\/bfnrt";
                    const char* to = "\"\\/\b\f\n\r\t";
                    const char* at = strchr(from, e);
                    if (e == '\0' || at == NULL) { BAD("bad escape"); }
                    cp = to[at - from];
                }
            } else {
                i += utf8_next(s + i, n - i, &cp);
                if (cp < 0) { BAD("invalid UTF-8"); }
            }
            if (ncp == 256) { BAD("token longer than 256 characters"); }
            cps[ncp++] = cp;
        }
        if (i >= n) { BAD("unterminated string"); }
        i++;
        SKIP_WS();
        if (i >= n || s[i++] != ':') { BAD("expected ':'"); }
        SKIP_WS();
        char* end;
        long id = strtol((const char*)s + i, &end, 10);
        if (end == (const char*)s + i) { BAD("expected a token id"); }
        i = (size_t)(end - (const char*)s);
        if (id < 0 || id >= VOCAB_SIZE) { BAD("token id out of range"); }
        if (vocab.token_bytes[id] != NULL) { BAD("duplicate token id"); }
        if (ncp == 0 || byte_level_to_bytes(cps, ncp, raw, cp_to_byte) < 0) { BAD("token outside the byte-level alphabet"); }
        vocab.token_bytes[id] = (uint8_t*)malloc_check(ncp);
        memcpy(vocab.token_bytes[id], raw, ncp);
        vocab.token_len[id] = ncp;
        count++;
        SKIP_WS();
        if (i < n && s[i] == ',') { i++; continue; }
        if (i < n && s[i] == '}') { break; }
        BAD("expected ',' or '}'");
    }
#undef SKIP_WS
#undef BAD
    if (count != VOCAB_SIZE) { fatal("%s has %d tokens, expected GPT-2's %d", path, count, VOCAB_SIZE); }
    free(b.data);
}

// parses vocab.bpe ("#version" line, then one merge "left right" per line, in rank order)
static void load_vocab_bpe(const char* dir, const int cp_to_byte[324]) {
    char path[PATH_MAX];
    ByteBuf b = {0};
    read_vocab_file(dir, "vocab.bpe", &b, path, sizeof(path));
    const uint8_t* s = b.data;
    size_t n = b.len, i = 0;
    while (i < n && s[i] != '\n') { i++; }  // the version line
    if (n == 0 || s[0] != '#') { fatal("%s is not GPT-2's vocab.bpe: no #version line", path); }
    i++;
    int rank = 0, line = 2;
    int cps[256];
    uint8_t raw[512];
    for (; i < n; line++) {
        size_t eol = i;
        while (eol < n && s[eol] != '\n') { eol++; }
        if (eol == i) { i = eol + 1; continue; }  // empty (last) line
        int ids[2], len = 0, part = 0;
        size_t j = i;
        while (j <= eol) {
            if (j == eol || s[j] == ' ') {
                if (part >= 2 || len == 0) { fatal("%s line %d: expected two tokens separated by one space", path, line); }
                int raw_len = byte_level_to_bytes(cps, len, raw, cp_to_byte);
                ids[part] = raw_len < 0 ? -1 : token_lookup(raw, raw_len);
                if (ids[part] < 0) { fatal("%s line %d: token not in encoder.json", path, line); }
                part++; len = 0; j++;
                continue;
            }
            int cp;
            j += utf8_next(s + j, eol - j, &cp);
            if (cp < 0 || len == 256) { fatal("%s line %d: invalid token", path, line); }
            cps[len++] = cp;
        }
        if (part != 2) { fatal("%s line %d: expected two tokens separated by one space", path, line); }
        int la = vocab.token_len[ids[0]], lb = vocab.token_len[ids[1]];
        memcpy(raw, vocab.token_bytes[ids[0]], la);
        memcpy(raw + la, vocab.token_bytes[ids[1]], lb);
        int merged = token_lookup(raw, la + lb);
        if (merged < 0) { fatal("%s line %d: merged token not in encoder.json", path, line); }
        uint64_t key = ((uint64_t)ids[0] << 32) | (uint32_t)ids[1];
        uint32_t k = hash_pair(key) & vocab.pair_mask;
        while (vocab.pair_slots[k].key != PAIR_EMPTY && vocab.pair_slots[k].key != key) { k = (k + 1) & vocab.pair_mask; }
        vocab.pair_slots[k].key = key;  // a repeated merge takes its later rank, as in GPT-2's dict
        vocab.pair_slots[k].rank = rank;
        vocab.pair_slots[k].merged = merged;
        rank++;
        i = eol + 1;
    }
    if (rank != NUM_MERGES) { fatal("%s has %d merges, expected GPT-2's %d", path, rank, NUM_MERGES); }
    // bpe_merge relies on the order in which BPE learns merges: both tokens of a merge are
    // made by earlier merges (or are single bytes)
    int* made_by = (int*)malloc_check(VOCAB_SIZE * sizeof(int));
    for (int id = 0; id < VOCAB_SIZE; id++) { made_by[id] = -1; }
    for (uint32_t k = 0; k <= vocab.pair_mask; k++) {
        const PairSlot* p = &vocab.pair_slots[k];
        if (p->key != PAIR_EMPTY && p->rank > made_by[p->merged]) { made_by[p->merged] = p->rank; }
    }
    for (uint32_t k = 0; k <= vocab.pair_mask; k++) {
        const PairSlot* p = &vocab.pair_slots[k];
        if (p->key == PAIR_EMPTY) { continue; }
        int later = made_by[p->key >> 32] > made_by[p->key & 0xFFFFFFFFu] ? made_by[p->key >> 32] : made_by[p->key & 0xFFFFFFFFu];
        if (later >= p->rank) {
            fatal("%s line %d: merges a token that line %d makes: not a BPE merge list in the order it was learned", path, p->rank + 2, later + 2);
        }
    }
    free(made_by);
    free(b.data);
}

// loads GPT-2's vocabulary from dir (encoder.json and vocab.bpe) into the global `vocab`
static void vocab_load(const char* dir) {
    int cp_to_byte[324];
    byte_level_inverse(cp_to_byte);
    vocab.token_mask = (1u << 17) - 1;
    vocab.token_slots = (int*)malloc_check((vocab.token_mask + 1) * sizeof(int));
    memset(vocab.token_slots, 0xFF, (vocab.token_mask + 1) * sizeof(int));
    vocab.pair_mask = (1u << 17) - 1;
    vocab.pair_slots = (PairSlot*)malloc_check((vocab.pair_mask + 1) * sizeof(PairSlot));
    for (uint32_t k = 0; k <= vocab.pair_mask; k++) { vocab.pair_slots[k].key = PAIR_EMPTY; }
    load_encoder_json(dir, cp_to_byte);
    for (int id = 0; id < VOCAB_SIZE; id++) { token_insert(id); }
    for (int byte = 0; byte < 256; byte++) {
        uint8_t c = (uint8_t)byte;
        vocab.byte_id[byte] = token_lookup(&c, 1);
        if (vocab.byte_id[byte] < 0) { fatal("%s/encoder.json lacks the token for byte %d", dir, byte); }
    }
    load_vocab_bpe(dir, cp_to_byte);
}

// ----------------------------------------------------------------------------
// pre-tokenizer: GPT-2's pattern, with \s spelled out as Unicode White_Space (tiktoken's \s)

#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static const char* GPT2_PATTERN =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+";

static pcre2_code* gpt2_regex;
static int gpt2_regex_jit;  // JIT-compiled: matched with pcre2_jit_match, which skips some checks

// compiles the pattern once (anchored: the pieces tile the text, each starts where the last
// ended) and JIT-compiles it when the library can
static void regex_init(void) {
    int err;
    PCRE2_SIZE err_off;
    gpt2_regex = pcre2_compile((PCRE2_SPTR)GPT2_PATTERN, PCRE2_ZERO_TERMINATED,
                               PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &err_off, NULL);
    if (gpt2_regex == NULL) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof(msg));
        fatal("cannot compile the GPT-2 pattern at offset %zu: %s", (size_t)err_off, (char*)msg);
    }
    gpt2_regex_jit = pcre2_jit_compile(gpt2_regex, PCRE2_JIT_COMPLETE) == 0;  // else interpreted
}

// Is text[p] a place where the text can be cut without changing the pieces? It is when
// text[p-1] and text[p] are whitespace and text[p+1] is not: GPT-2's `\s+(?!\S)` then ends a
// piece at p in the whole text, and also at the end of text[..p), and the next piece starts
// at p in both. Only ASCII is looked at, which is enough to find places in real text.
static int is_split_point(const uint8_t* t, size_t n, size_t p) {
    if (p < 1 || p + 1 >= n) { return 0; }
    uint8_t a = t[p - 1], b = t[p], c = t[p + 1];
    return (a == ' ' || (a >= '\t' && a <= '\r')) && (b == ' ' || (b >= '\t' && b <= '\r')) && c > ' ' && c < 0x7F;
}

// ----------------------------------------------------------------------------
// byte-pair encoding with a per-thread cache

typedef struct { uint32_t hash, key_off, val_off; uint16_t key_len, val_len; } CacheSlot;

typedef struct {
    pcre2_match_data* match;
    pcre2_match_context* match_ctx;
    pcre2_jit_stack* jit_stack;
    CacheSlot* cache;             // open addressing, key_len == 0 = empty
    uint32_t cache_count;
    ByteBuf cache_keys;           // piece bytes of the cached entries
    IntVec cache_vals;            // their token ids
    // scratch of bpe_merge, one entry per byte of the piece: its parts (runs of bytes merged
    // into one token) as a linked list, each named by the index of its first byte
    int* sym;                     // token of each part (then the piece's tokens, in order)
    int* next;                    // next part (-1: none)
    int* prev;                    // previous part (-1: none)
    int* rank;                    // rank of merging the part with the next one (INT_MAX: none)
    int* heap;                    // min-heap of the parts that can merge, by (rank, index)
    int* slot;                    // position of each part in the heap (-1: not in it)
    size_t cap;
} Worker;

// per-thread state: regex match data and JIT stack (8 MB, for very long pieces), empty cache
static void worker_init(Worker* w) {
    memset(w, 0, sizeof(*w));
    w->match = pcre2_match_data_create_from_pattern(gpt2_regex, NULL);
    w->match_ctx = pcre2_match_context_create(NULL);
    w->jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (w->match == NULL || w->match_ctx == NULL || w->jit_stack == NULL) { fatal("out of memory creating a regex matcher"); }
    pcre2_jit_stack_assign(w->match_ctx, NULL, w->jit_stack);
    w->cache = (CacheSlot*)calloc_check(CACHE_SLOTS, sizeof(CacheSlot));
}

// the heap of bpe_merge orders parts by rank, then by position (the leftmost first)
static inline int part_before(const Worker* w, int a, int b) {
    return w->rank[a] < w->rank[b] || (w->rank[a] == w->rank[b] && a < b);
}

// moves the heap entry at position k up or down to where it belongs
static void heap_fix(Worker* w, int size, int k) {
    int* h = w->heap;
    while (k > 0 && part_before(w, h[k], h[(k - 1) / 2])) {
        int up = (k - 1) / 2, t = h[k];
        h[k] = h[up]; h[up] = t;
        w->slot[h[k]] = k; w->slot[h[up]] = up;
        k = up;
    }
    for (;;) {
        int c = 2 * k + 1;
        if (c >= size) { break; }
        if (c + 1 < size && part_before(w, h[c + 1], h[c])) { c++; }
        if (!part_before(w, h[c], h[k])) { break; }
        int t = h[k];
        h[k] = h[c]; h[c] = t;
        w->slot[h[k]] = k; w->slot[h[c]] = c;
        k = c;
    }
}

// takes part i out of the heap, if it is in it
static void heap_remove(Worker* w, int* size, int i) {
    int k = w->slot[i];
    if (k < 0) { return; }
    w->slot[i] = -1;
    int last = w->heap[--*size];
    if (k == *size) { return; }
    w->heap[k] = last;
    w->slot[last] = k;
    heap_fix(w, *size, k);
}

// sets the rank of part i from its pair with the next part, and its place in the heap
static void part_update(Worker* w, int* size, int i) {
    int merged;
    w->rank[i] = w->next[i] < 0 ? INT_MAX : pair_lookup(w->sym[i], w->sym[w->next[i]], &merged);
    if (w->rank[i] == INT_MAX) { heap_remove(w, size, i); return; }
    if (w->slot[i] < 0) { w->slot[i] = *size; w->heap[(*size)++] = i; }
    heap_fix(w, *size, w->slot[i]);
}

// Merges one piece as GPT-2's bpe() does: starting from its bytes, repeatedly the adjacent
// pair of lowest rank, all its occurrences left to right; returns the number of tokens,
// left in w->sym. A min-heap of the pairs' ranks over a linked list of the parts makes it
// O(n log n): the heap gives the leftmost pair of lowest rank, a merge changes the pairs of
// two parts. Popping merges one at a time gives GPT-2's rounds exactly because a merge only
// creates pairs of higher rank (load_vocab_bpe checks that the merge list is so ordered).
static int bpe_merge(Worker* w, const uint8_t* p, int n) {
    if ((size_t)n > w->cap) {
        w->cap = (size_t)n * 2;
        int** arrays[] = {&w->sym, &w->next, &w->prev, &w->rank, &w->heap, &w->slot};
        for (int k = 0; k < 6; k++) { free(*arrays[k]); *arrays[k] = (int*)malloc_check(w->cap * sizeof(int)); }
    }
    int size = 0;
    for (int i = 0; i < n; i++) {
        w->sym[i] = vocab.byte_id[p[i]];
        w->next[i] = i + 1 < n ? i + 1 : -1;
        w->prev[i] = i - 1;
        w->slot[i] = -1;
    }
    for (int i = 0; i < n; i++) { part_update(w, &size, i); }
    while (size > 0) {
        int i = w->heap[0], j = w->next[i], merged = -1;
        pair_lookup(w->sym[i], w->sym[j], &merged);
        w->sym[i] = merged; // part i takes in part j
        heap_remove(w, &size, j);
        w->next[i] = w->next[j];
        if (w->next[j] >= 0) { w->prev[w->next[j]] = i; }
        part_update(w, &size, i);
        if (w->prev[i] >= 0) { part_update(w, &size, w->prev[i]); }
    }
    int m = 0;
    for (int i = 0; i >= 0; i = w->next[i]) { w->sym[m++] = w->sym[i]; }
    return m;
}

// short byte strings compare faster in a loop than through a call to memcmp
static inline int bytes_equal(const uint8_t* a, const uint8_t* b, int n) {
    for (int i = 0; i < n; i++) { if (a[i] != b[i]) { return 0; } }
    return 1;
}

// appends the tokens of one piece to out, through the cache
static void bpe_piece(Worker* w, const uint8_t* p, int n, IntVec* out) {
    if (n == 1) {
        ints_reserve(out, 1);
        out->data[out->len++] = vocab.byte_id[p[0]];
        return;
    }
    uint32_t h = 0, slot = 0;
    if (n <= CACHE_MAX_PIECE) {
        h = hash_bytes(p, n);
        for (slot = h & (CACHE_SLOTS - 1);; slot = (slot + 1) & (CACHE_SLOTS - 1)) {
            const CacheSlot* c = &w->cache[slot];
            if (c->key_len == 0) { break; }
            if (c->hash == h && c->key_len == n && bytes_equal(w->cache_keys.data + c->key_off, p, n)) {
                ints_reserve(out, c->val_len);
                memcpy(out->data + out->len, w->cache_vals.data + c->val_off, c->val_len * sizeof(int));
                out->len += c->val_len;
                return;
            }
        }
    }
    int m = bpe_merge(w, p, n);
    ints_reserve(out, m);
    memcpy(out->data + out->len, w->sym, m * sizeof(int));
    out->len += m;
    if (n > CACHE_MAX_PIECE) { return; }
    if (w->cache_count >= CACHE_SLOTS / 2) {  // full: start over rather than track ages
        memset(w->cache, 0, CACHE_SLOTS * sizeof(CacheSlot));
        w->cache_count = 0; w->cache_keys.len = 0; w->cache_vals.len = 0;
        slot = h & (CACHE_SLOTS - 1);
    }
    CacheSlot* c = &w->cache[slot];
    c->hash = h; c->key_len = (uint16_t)n; c->val_len = (uint16_t)m;
    c->key_off = (uint32_t)w->cache_keys.len; c->val_off = (uint32_t)w->cache_vals.len;
    bytes_append(&w->cache_keys, p, n);
    ints_reserve(&w->cache_vals, m);
    memcpy(w->cache_vals.data + w->cache_vals.len, w->sym, m * sizeof(int));
    w->cache_vals.len += m;
    w->cache_count++;
}

// appends the tokens of valid UTF-8 text to out: regex pieces, each byte-pair merged
static void encode_text(Worker* w, const uint8_t* text, size_t len, IntVec* out) {
    size_t pos = 0;
    while (pos < len) {
        int rc = gpt2_regex_jit ? pcre2_jit_match(gpt2_regex, text, len, pos, PCRE2_NO_UTF_CHECK, w->match, w->match_ctx)
                                : pcre2_match(gpt2_regex, text, len, pos, PCRE2_NO_UTF_CHECK, w->match, w->match_ctx);
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof(msg));
            fatal("pre-tokenizer failed at byte %zu: %s", pos, (char*)msg);
        }
        size_t end = pcre2_get_ovector_pointer(w->match)[1];
        bpe_piece(w, text + pos, (int)(end - pos), out);
        pos = end;
    }
}

// ----------------------------------------------------------------------------
// batches of documents, cut into chunks and encoded by a pool of threads

typedef struct {
    size_t start, len;   // byte range in the batch text
    int first_of_doc;    // the chunk opens a document (an end-of-text token goes before it)
    IntVec ids;
} Chunk;

typedef struct {
    ByteBuf text;        // the documents of the batch, sanitized, back to back
    Chunk* chunks;
    size_t nchunks, cap;
    ByteBuf scratch;
} Batch;

static int num_threads = 1;
static Worker* workers;          // one per thread, kept across batches (their caches stay warm)
static pthread_t threads[MAX_THREADS];
static int threads_running;
static Batch* encoding;          // the batch the threads are encoding
static atomic_size_t next_chunk;

// takes the document that was appended to the batch text at `start`: sanitizes it and cuts
// it into chunks of about CHUNK_BYTES at split points, so that threads can share it
static void batch_add_document(Batch* b, size_t start) {
    utf8_sanitize_tail(&b->text, start, &b->scratch);
    const uint8_t* t = b->text.data + start;
    size_t n = b->text.len - start, pos = 0;
    int first = 1;
    do {
        size_t cut = n;
        if (n - pos > 2 * CHUNK_BYTES) {
            for (size_t p = pos + CHUNK_BYTES; p + 1 < n; p++) {
                if (is_split_point(t, n, p)) { cut = p; break; }
            }
        }
        if (b->nchunks == b->cap) {
            size_t cap = b->cap ? b->cap * 2 : 256;
            Chunk* c = (Chunk*)realloc(b->chunks, cap * sizeof(Chunk));
            if (c == NULL) { fatal("out of memory"); }
            memset(c + b->cap, 0, (cap - b->cap) * sizeof(Chunk));
            b->chunks = c; b->cap = cap;
        }
        Chunk* c = &b->chunks[b->nchunks++];
        c->start = start + pos; c->len = cut - pos; c->first_of_doc = first; c->ids.len = 0;
        first = 0;
        pos = cut;
    } while (pos < n);
}

// thread body: encodes the next chunk of the batch until none is left
static void* encode_worker(void* arg) {
    Worker* w = (Worker*)arg;
    Batch* b = encoding;
    for (;;) {
        size_t i = atomic_fetch_add(&next_chunk, 1);
        if (i >= b->nchunks) { break; }
        Chunk* c = &b->chunks[i];
        encode_text(w, b->text.data + c->start, c->len, &c->ids);
    }
    return NULL;
}

// starts the threads on a batch; the caller is free to read the next batch meanwhile
static void batch_encode_start(Batch* b) {
    encoding = b;
    atomic_store(&next_chunk, 0);
    threads_running = (size_t)num_threads < b->nchunks ? num_threads : (int)b->nchunks;
    for (int t = 0; t < threads_running; t++) {
        if (pthread_create(&threads[t], NULL, encode_worker, &workers[t]) != 0) { fatal("cannot start a thread"); }
    }
}

// waits until every chunk of the batch is encoded
static void batch_encode_finish(void) {
    for (int t = 0; t < threads_running; t++) { pthread_join(threads[t], NULL); }
    threads_running = 0;
}

// ----------------------------------------------------------------------------
// output helpers

// buffered writer of decimal ids, one per line, to stdout
typedef struct { char buf[1 << 16]; size_t len; } IdPrinter;

// writes bytes to stdout; a failed write (full disk, closed pipe) is fatal
static void out_flush_raw(const void* p, size_t n) { fwrite_check(p, 1, n, stdout, "standard output"); }

// appends one id and a newline, flushing the buffer when it is nearly full
static void print_id(IdPrinter* pr, int id) {
    if (pr->len + 16 > sizeof(pr->buf)) { out_flush_raw(pr->buf, pr->len); pr->len = 0; }
    char tmp[12];
    int k = 0;
    do { tmp[k++] = (char)('0' + id % 10); id /= 10; } while (id > 0);
    while (k > 0) { pr->buf[pr->len++] = tmp[--k]; }
    pr->buf[pr->len++] = '\n';
}

// flushes the ids to stdout and checks that every write reached it
static void print_finish(IdPrinter* pr) {
    out_flush_raw(pr->buf, pr->len);
    pr->len = 0;
    if (fflush(stdout) != 0) { fatal("write error on standard output (%s)", strerror(errno)); }
}

// ----------------------------------------------------------------------------
// shard writer

typedef struct {
    char prefix[PATH_MAX];
    const char* split;       // every shard named with this split; NULL: first "val", then "train"
    int64_t shard_tokens;    // tokens per shard (the last one may have fewer)
    AtomicFile file;
    int open;
    int index;               // number of the current shard
    int64_t ntok;            // tokens in the current shard
    int64_t total;
    uint16_t buf[1 << 15];
    size_t buf_len;
} ShardWriter;

// writes the buffered tokens to the shard being written
static void shard_flush_buf(ShardWriter* sw) {
    atomic_write(&sw->file, sw->buf, sizeof(uint16_t), sw->buf_len);
    sw->buf_len = 0;
}

// completes the current shard: header with the final count, then the atomic rename
static void shard_close(ShardWriter* sw) {
    shard_flush_buf(sw);
    int header[HEADER_INTS] = {0};
    header[0] = SHARD_MAGIC; header[1] = SHARD_VERSION; header[2] = (int)sw->ntok;
    fseek_check(sw->file.f, 0, SEEK_SET, sw->file.tmp_path);
    atomic_write(&sw->file, header, sizeof(int), HEADER_INTS);
    atomic_commit(&sw->file);
    printf("wrote %s (%lld tokens)\n", sw->file.path, (long long)sw->ntok);
    fflush(stdout);
    sw->open = 0;
    sw->index++;
}

// starts the next shard under its temporary name, with a placeholder header
static void shard_open(ShardWriter* sw) {
    char path[PATH_MAX + 64];
    const char* split = sw->split ? sw->split : (sw->index == 0 ? "val" : "train");
    snprintf(path, sizeof(path), "%s_%s_%06d.bin", sw->prefix, split, sw->index);
    atomic_open(&sw->file, path);
    int header[HEADER_INTS] = {0};  // rewritten with the count when the shard is complete
    atomic_write(&sw->file, header, sizeof(int), HEADER_INTS);
    sw->open = 1;
    sw->ntok = 0;
}

// appends tokens, starting a new shard whenever the current one is full
static void shard_put(ShardWriter* sw, const int* ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!sw->open) { shard_open(sw); }
        sw->buf[sw->buf_len++] = (uint16_t)ids[i];
        if (sw->buf_len == sizeof(sw->buf) / sizeof(sw->buf[0])) { shard_flush_buf(sw); }
        sw->ntok++;
        sw->total++;
        if (sw->ntok == sw->shard_tokens) { shard_close(sw); }
    }
}

// Is a shard of split `split` that this run did not write, or whose temporary file a killed
// run left (`temporary`), stale? `rest` is the shard's name after "<prefix>_"; the shards
// this run wrote in this split are numbered [first, end).
static int shard_is_stale(const char* rest, int temporary, const char* split, long first, long end) {
    size_t n = strlen(split);
    if (strncmp(rest, split, n) != 0 || rest[n] != '_') { return 0; }
    const char* p = rest + n + 1;
    long idx = 0;
    int digits = 0;
    for (; isdigit((unsigned char)*p) && digits < 9; p++, digits++) { idx = idx * 10 + (*p - '0'); }
    if (digits < 6 || strcmp(p, ".bin") != 0) { return 0; }
    return temporary || idx < first || idx >= end;
}

// Removes what an earlier run into the same prefix left and this run did not overwrite:
// shards of the splits this run writes, numbered beyond its last one (a glob such as
// PREFIX_train_*.bin would read them with the new ones), and temporary files of shards whose
// writer is gone (a killed run; llmc/utils.h: temporary_is_orphan). Another tokenizer's
// writes in progress are left alone.
static void remove_stale_shards(const ShardWriter* sw, const char* dir) {
    const char* slash = strrchr(sw->prefix, '/');
    const char* base = slash ? slash + 1 : sw->prefix;
    size_t nbase = strlen(base);
    DIR* d = opendir(dir);
    if (d == NULL) { fatal("cannot list %s (%s)", dir, strerror(errno)); }
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        const char* name = NULL; // the shard's name, also that of a temporary file's shard
        int temporary = temporary_is_orphan(e->d_name, &name);
        if (name == NULL) { name = e->d_name; }
        else if (!temporary) { continue; } // a write in progress
        if (strncmp(name, base, nbase) != 0 || name[nbase] != '_') { continue; }
        const char* rest = name + nbase + 1;
        int stale = sw->split ? shard_is_stale(rest, temporary, sw->split, 0, sw->index)
                              : shard_is_stale(rest, temporary, "val", 0, sw->index > 0 ? 1 : 0) || shard_is_stale(rest, temporary, "train", 1, sw->index);
        if (!stale) { continue; }
        char path[2 * PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (unlink(path) != 0) { fatal("cannot remove the stale shard %s (%s)", path, strerror(errno)); }
        printf("removed %s, left by an earlier run\n", path);
    }
    closedir(d);
}

// ----------------------------------------------------------------------------
// shard files: reading back

// reads a shard, validating its header and size like the trainers' data loader
static uint16_t* shard_read(const char* path, int64_t* ntok) {
    FILE* f = fopen_read_regular(path);
    int64_t size = file_size_check(f, path);
    int header[HEADER_INTS];
    if (size < (int64_t)sizeof(header)) { fatal("%s is not a token shard: shorter than the header", path); }
    fread_check(header, sizeof(int), HEADER_INTS, f, path);
    if (header[0] != SHARD_MAGIC) { fatal("%s is not a token shard: bad magic %d", path, header[0]); }
    if (header[1] != SHARD_VERSION) { fatal("%s: unsupported shard version %d", path, header[1]); }
    *ntok = header[2];
    if (*ntok <= 0 || size != (int64_t)sizeof(header) + *ntok * 2) {
        fatal("%s: header says %lld tokens but the file has %lld bytes", path, (long long)*ntok, (long long)size);
    }
    uint16_t* toks = (uint16_t*)malloc_check((size_t)*ntok * sizeof(uint16_t));
    fread_check(toks, sizeof(uint16_t), (size_t)*ntok, f, path);
    fclose(f);
    for (int64_t i = 0; i < *ntok; i++) {
        if (toks[i] >= VOCAB_SIZE) { fatal("%s: token %lld is %d, outside the vocabulary", path, (long long)i, toks[i]); }
    }
    return toks;
}

// ----------------------------------------------------------------------------
// commands

// ./tokenizer encode FILE
static void cmd_encode(const char* path) {
    Batch* b = (Batch*)calloc_check(1, sizeof(Batch));
    read_all(path, &b->text);
    batch_add_document(b, 0);
    batch_encode_start(b);
    batch_encode_finish();
    IdPrinter* pr = (IdPrinter*)calloc_check(1, sizeof(IdPrinter));
    for (size_t c = 0; c < b->nchunks; c++) {
        for (size_t i = 0; i < b->chunks[c].ids.len; i++) { print_id(pr, b->chunks[c].ids.data[i]); }
    }
    print_finish(pr);
    free(pr);
}

// ./tokenizer decode: ids on stdin, one per line, to raw bytes on stdout
static void cmd_decode(void) {
    char* line = NULL;
    size_t cap = 0;
    ssize_t n;
    long lineno = 0;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        lineno++;
        if (line[n - 1] == '\n') { line[--n] = '\0'; }
        long id = 0;
        int ok = n > 0;
        for (ssize_t i = 0; ok && i < n; i++) {
            if (!isdigit((unsigned char)line[i])) { ok = 0; } else if (id < VOCAB_SIZE) { id = id * 10 + (line[i] - '0'); }
        }
        if (!ok) { fatal("standard input line %ld: '%.40s' is not a token id", lineno, line); }
        if (id >= VOCAB_SIZE) { fatal("standard input line %ld: token id %.40s is out of range [0, %d)", lineno, line, VOCAB_SIZE); }
        out_flush_raw(vocab.token_bytes[id], vocab.token_len[id]);
    }
    if (ferror(stdin)) { fatal("cannot read standard input (%s)", strerror(errno)); }
    free(line);
    if (fflush(stdout) != 0) { fatal("write error on standard output (%s)", strerror(errno)); }
}

// reads the decimal length line of the next document of the stream; 0 at the end of the stream
static int read_doc_length(FILE* f, size_t* len, long long docno) {
    int c = fgetc(f);
    if (c == EOF) {
        if (ferror(f)) { fatal("cannot read standard input (%s)", strerror(errno)); }
        return 0;
    }
    size_t v = 0;
    int digits = 0;
    for (; c != '\n'; c = fgetc(f)) {
        if (c == EOF || !isdigit(c)) {
            fatal("document stream: document %lld must start with its length in bytes and a newline", docno);
        }
        v = v * 10 + (size_t)(c - '0');
        if (v > MAX_DOC_BYTES) {
            fatal("document stream: document %lld claims more than %d bytes: not a document length (a corrupt stream?)", docno, MAX_DOC_BYTES);
        }
        digits++;
    }
    if (digits == 0) { fatal("document stream: document %lld has an empty length line", docno); }
    *len = v;
    return 1;
}

// reads documents from the stream on stdin into an emptied batch until it holds about
// BATCH_BYTES or the stream ends; returns the number of documents read so far
static long long read_batch(Batch* b, long long docno) {
    b->text.len = 0;
    b->nchunks = 0;
    size_t len;
    while (b->text.len < BATCH_BYTES && read_doc_length(stdin, &len, docno + 1)) {
        size_t start = b->text.len;
        bytes_reserve(&b->text, len);
        if (fread(b->text.data + start, 1, len, stdin) != len) {
            if (ferror(stdin)) { fatal("cannot read standard input (%s)", strerror(errno)); }
            fatal("document stream: document %lld is truncated (expected %zu bytes)", docno + 1, len);
        }
        b->text.len += len;
        batch_add_document(b, start);
        docno++;
    }
    return docno;
}

// ./tokenizer shard: document stream on stdin -> shards of shard_tokens tokens
static void cmd_shard(const char* prefix, const char* split, int64_t shard_tokens) {
    char dir[PATH_MAX];
    if (strlen(prefix) >= PATH_MAX - 64) { fatal("output prefix too long: %s", prefix); }
    strcpy(dir, prefix);
    char* slash = strrchr(dir, '/');
    if (slash == NULL) { strcpy(dir, "."); } else if (slash == dir) { dir[1] = '\0'; } else { *slash = '\0'; }
    ensure_dir_writable(dir);
    ShardWriter* sw = (ShardWriter*)calloc_check(1, sizeof(ShardWriter));
    strcpy(sw->prefix, prefix);
    sw->split = split;
    sw->shard_tokens = shard_tokens;
    // two batches: the threads encode one while this thread reads the next and writes the last
    Batch* batches = (Batch*)calloc_check(2, sizeof(Batch));
    Batch* cur = &batches[0];
    Batch* next = &batches[1];
    long long docno = read_batch(cur, 0);
    const int eot = EOT_TOKEN;
    batch_encode_start(cur);
    while (cur->nchunks > 0) {
        docno = read_batch(next, docno);
        batch_encode_finish();
        batch_encode_start(next);
        for (size_t c = 0; c < cur->nchunks; c++) {
            if (cur->chunks[c].first_of_doc) { shard_put(sw, &eot, 1); }
            shard_put(sw, cur->chunks[c].ids.data, cur->chunks[c].ids.len);
        }
        Batch* t = cur; cur = next; next = t;
    }
    batch_encode_finish();
    if (docno == 0) { fatal("document stream on standard input is empty: no documents to write"); }
    if (sw->open) { shard_close(sw); }
    remove_stale_shards(sw, dir);
    printf("%lld documents, %lld tokens in %d shard%s\n", docno, (long long)sw->total, sw->index, sw->index == 1 ? "" : "s");
    free(sw);
}

// ./tokenizer info SHARD...: tokens, documents (end-of-text tokens), longest document
static void cmd_info(int n, char** paths) {
    int64_t total = 0, docs = 0, longest = 0;
    for (int k = 0; k < n; k++) {
        int64_t ntok, nd = 0, run = 0, lg = 0;
        uint16_t* t = shard_read(paths[k], &ntok);
        for (int64_t i = 0; i < ntok; i++) {
            if (t[i] == EOT_TOKEN) { nd++; run = 0; } else if (++run > lg) { lg = run; }
        }
        free(t);
        printf("%s: %lld tokens, %lld documents, longest document %lld tokens\n", paths[k], (long long)ntok, (long long)nd, (long long)lg);
        total += ntok; docs += nd; longest = lg > longest ? lg : longest;
    }
    if (n > 1) { printf("total: %lld tokens, %lld documents, longest document %lld tokens\n", (long long)total, (long long)docs, (long long)longest); }
}

// ./tokenizer dump SHARD: its token ids, one per line
static void cmd_dump(const char* path) {
    int64_t ntok;
    uint16_t* t = shard_read(path, &ntok);
    IdPrinter* pr = (IdPrinter*)calloc_check(1, sizeof(IdPrinter));
    for (int64_t i = 0; i < ntok; i++) { print_id(pr, t[i]); }
    print_finish(pr);
    free(pr);
    free(t);
}

// ./tokenizer write-bin FILE: llm.c's tokenizer file, header then (length, bytes) per token
static void cmd_write_bin(const char* path) {
    int header[HEADER_INTS] = {0};
    header[0] = TOKENIZER_MAGIC; header[1] = TOKENIZER_VERSION; header[2] = VOCAB_SIZE; header[3] = EOT_TOKEN;
    AtomicFile af;
    atomic_open(&af, path);
    atomic_write(&af, header, sizeof(int), HEADER_INTS);
    for (int id = 0; id < VOCAB_SIZE; id++) {
        if (vocab.token_len[id] > 255) { fatal("token %d is longer than 255 bytes", id); }
        uint8_t len = (uint8_t)vocab.token_len[id];
        atomic_write(&af, &len, 1, 1);
        atomic_write(&af, vocab.token_bytes[id], 1, len);
    }
    atomic_commit(&af);
    printf("wrote %s (%d tokens)\n", path, VOCAB_SIZE);
}

// the tokens of one text, on the first worker: sanitized and cut into chunks as a document
// is, each chunk encoded in turn (the same ids as `encode`)
static void encode_string(Batch* b, const void* s, size_t n, IntVec* out) {
    b->text.len = 0;
    b->nchunks = 0;
    bytes_append(&b->text, s, n);
    batch_add_document(b, 0);
    out->len = 0;
    for (size_t c = 0; c < b->nchunks; c++) { encode_text(&workers[0], b->text.data + b->chunks[c].start, b->chunks[c].len, out); }
}

// appends one uint16 to an eval or passkey file's stream
static void put_u16(ByteBuf* b, int v) {
    uint16_t x = (uint16_t)v;
    bytes_append(b, &x, sizeof(x));
}

// appends the tokens of the n bytes of text s to out as a uint16 count and the uint16 ids
// (ids: the tokens, for the caller to check)
static void put_text(Batch* b, ByteBuf* out, IntVec* ids, const void* s, size_t n) {
    encode_string(b, s, n, ids);
    put_u16(out, (int)ids->len);
    for (size_t i = 0; i < ids->len; i++) { put_u16(out, ids->data[i]); }
}

// reads the next document of the stream on stdin (its length line, then its bytes) into b;
// `what` names it in errors
static void read_document(ByteBuf* b, const char* what, long long example) {
    size_t len;
    if (!read_doc_length(stdin, &len, example)) { fatal("example stream: example %lld ends before its %s", example, what); }
    b->len = 0;
    bytes_reserve(b, len + 1);
    if (fread(b->data, 1, len, stdin) != len) {
        if (ferror(stdin)) { fatal("cannot read standard input (%s)", strerror(errno)); }
        fatal("example stream: the %s of example %lld is truncated (expected %zu bytes)", what, example, len);
    }
    b->len = len;
}

// reads the line "<label> <completions>" that opens an example; 0 at the end of the stream
static int read_example_line(long long example, int* label, int* completions) {
    char line[64];
    if (fgets(line, sizeof(line), stdin) == NULL) {
        if (ferror(stdin)) { fatal("cannot read standard input (%s)", strerror(errno)); }
        return 0;
    }
    char end;
    if (sscanf(line, "%d %d%c", label, completions, &end) != 3 || end != '\n') {
        fatal("example stream: example %lld must start with a line '<label> <completions>'", example);
    }
    if (*completions < 1 || *completions > MAX_COMPLETIONS) {
        fatal("example stream: example %lld has %d completions, expected 1 to %d", example, *completions, MAX_COMPLETIONS);
    }
    if (*label < 0 || *label >= *completions) {
        fatal("example stream: example %lld has label %d, outside [0, %d)", example, *label, *completions);
    }
    return 1;
}

// ./tokenizer eval FILE: example stream on stdin -> llm.c's eval file (multiple-choice
// completion tasks such as HellaSwag, written as llm.c's dev/data/data_common.py writes them)
static void cmd_eval(const char* path) {
    Batch* b = (Batch*)calloc_check(1, sizeof(Batch));
    ByteBuf text = {0}, out = {0}, ex = {0};
    IntVec ids = {0};
    long long n = 0;
    int longest = 0, label, completions;
    while (read_example_line(n + 1, &label, &completions)) {
        if (n == EVAL_MAX_EXAMPLES) { fatal("example stream: more than %d examples (the index is a uint16)", EVAL_MAX_EXAMPLES); }
        ex.len = 0;
        put_u16(&ex, EVAL_DELIMITER);
        put_u16(&ex, 0); // the example's size in bytes, filled in below
        put_u16(&ex, (int)n);
        put_u16(&ex, label);
        put_u16(&ex, completions);
        for (int c = 0; c <= completions; c++) {
            read_document(&text, c == 0 ? "context" : "completion", n + 1);
            put_text(b, &ex, &ids, text.data, text.len);
            if (ids.len == 0) { fatal("example stream: example %lld has an empty %s", n + 1, c == 0 ? "context" : "completion"); }
        }
        if (ex.len > EVAL_MAX_EXAMPLE_BYTES) { fatal("example stream: example %lld is longer than %d bytes", n + 1, EVAL_MAX_EXAMPLE_BYTES); }
        uint16_t size = (uint16_t)ex.len;
        memcpy(ex.data + 2, &size, 2);
        if ((int)ex.len > longest) { longest = (int)ex.len; }
        bytes_append(&out, ex.data, ex.len);
        n++;
    }
    if (n == 0) { fatal("example stream on standard input is empty: no examples to write"); }
    int header[HEADER_INTS] = {0};
    header[0] = EVAL_MAGIC; header[1] = EVAL_VERSION; header[2] = (int)n; header[3] = longest;
    AtomicFile af;
    atomic_open(&af, path);
    atomic_write(&af, header, sizeof(int), HEADER_INTS);
    atomic_write(&af, out.data, 1, out.len);
    atomic_commit(&af);
    printf("wrote %s (%lld examples, longest %d bytes)\n", path, n, longest);
    free(text.data); free(out.data); free(ex.data); free(ids.data);
}

// The passkey retrieval test's texts (Mohtashami and Jaggi 2023, the landmark-attention
// code's prompt), in the order llmc/passkey.h reads them. The prompt is
//   task \n filler \n "The pass key is" key ". Remember it." key " is the pass key." \n filler \n question
// and the answer is the key; every key is tokenized with its leading space (" 12345").
static const char* PASSKEY_TEXTS[] = {
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you about the important information there.",
    "\n",
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.",
    " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.",
    "The pass key is",
    ". Remember it.",
    " is the pass key.",
    "What is the pass key? The pass key is",
};
#define PASSKEY_NUM_TEXTS ((int)(sizeof(PASSKEY_TEXTS) / sizeof(PASSKEY_TEXTS[0])))

// ./tokenizer write-passkey FILE: the tokens the trainers build passkey prompts from:
// int32 header[256] = {20240610, 1, texts, first key, keys, 0...}, then each text and each
// key " <k>" (k = first key, first key + 1, ...) as a uint16 length and its uint16 tokens
static void cmd_write_passkey(const char* path) {
    Batch* b = (Batch*)calloc_check(1, sizeof(Batch));
    ByteBuf out = {0};
    IntVec ids = {0};
    for (int k = 0; k < PASSKEY_NUM_TEXTS; k++) { put_text(b, &out, &ids, PASSKEY_TEXTS[k], strlen(PASSKEY_TEXTS[k])); }
    for (int k = PASSKEY_FIRST_KEY; k < PASSKEY_FIRST_KEY + PASSKEY_NUM_KEYS; k++) {
        char key[16];
        snprintf(key, sizeof(key), " %d", k);
        put_text(b, &out, &ids, key, strlen(key));
    }
    int header[HEADER_INTS] = {0};
    header[0] = PASSKEY_MAGIC; header[1] = PASSKEY_VERSION; header[2] = PASSKEY_NUM_TEXTS;
    header[3] = PASSKEY_FIRST_KEY; header[4] = PASSKEY_NUM_KEYS;
    AtomicFile af;
    atomic_open(&af, path);
    atomic_write(&af, header, sizeof(int), HEADER_INTS);
    atomic_write(&af, out.data, 1, out.len);
    atomic_commit(&af);
    printf("wrote %s (%d texts, keys %d to %d)\n", path, PASSKEY_NUM_TEXTS, PASSKEY_FIRST_KEY, PASSKEY_FIRST_KEY + PASSKEY_NUM_KEYS - 1);
    free(out.data); free(ids.data);
}

// prints the commands and exits 1
static void usage(void) {
    fprintf(stderr,
        "usage: ./tokenizer [-v DIR] [-t THREADS] COMMAND ...\n"
        "  encode FILE                    token ids of FILE ('-' = stdin), one per line, no end-of-text\n"
        "  decode                         token ids on stdin, one per line -> bytes on stdout\n"
        "  shard [-n N] [-s SPLIT] PREFIX document stream on stdin -> PREFIX_<split>_NNNNNN.bin shards of\n"
        "                                 N tokens (default 100000000); without -s the first shard is\n"
        "                                 'val' and the others 'train', as in llm.c; shards of these splits\n"
        "                                 and PREFIX that an earlier run left beyond the new ones are removed\n"
        "  info SHARD...                  tokens, documents and longest document of shards\n"
        "  dump SHARD                     token ids of a shard, one per line\n"
        "  write-bin FILE                 llm.c's tokenizer file (gpt2_tokenizer.bin)\n"
        "  eval FILE                      example stream on stdin -> llm.c's eval file (HellaSwag's format)\n"
        "  write-passkey FILE             the tokens of the passkey test's prompts (gpt2_passkey.bin)\n"
        "  -v DIR: vocabulary directory with encoder.json and vocab.bpe (default data/gpt2)\n"
        "  document stream: per document, its byte length in decimal, a newline, then the bytes\n"
        "  example stream: per example a line '<label> <completions>', then the context and each\n"
        "                  completion as documents of the document stream\n");
    exit(1);
}

// parses the flags (anywhere on the line), loads the vocabulary, runs the command
int main(int argc, char** argv) {
    const char* vocab_dir = "data/gpt2";
    const char* split = NULL;
    int64_t shard_tokens = 100000000;
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    char* args[64];
    int nargs = 0;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        if (a[0] == '-' && a[1] != '\0' && a[2] == '\0' && strchr("vtns", a[1]) != NULL) {
            if (i + 1 >= argc) { fatal("flag %s needs a value", a); }
            const char* v = argv[++i];
            if (a[1] == 'v') { vocab_dir = v; }
            else if (a[1] == 't') { threads = parse_long(a, v, 1, MAX_THREADS); }
            else if (a[1] == 'n') { shard_tokens = parse_long(a, v, 1, INT_MAX); }
            else {
                if (v[0] == '\0' || strchr(v, '/') != NULL) { fatal("flag -s expects a split name such as train, got '%s'", v); }
                split = v;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            fatal("unknown flag %s (run ./tokenizer without arguments for help)", a);
        } else {
            if (nargs == 64) { fatal("too many arguments"); }
            args[nargs++] = argv[i];
        }
    }
    if (nargs == 0) { usage(); }
    const char* cmd = args[0];
    num_threads = threads < 1 ? 1 : (int)threads;
    int known = (strcmp(cmd, "encode") == 0 && nargs == 2) || (strcmp(cmd, "decode") == 0 && nargs == 1) ||
                (strcmp(cmd, "shard") == 0 && nargs == 2) || (strcmp(cmd, "write-bin") == 0 && nargs == 2) ||
                (strcmp(cmd, "info") == 0 && nargs >= 2) || (strcmp(cmd, "dump") == 0 && nargs == 2) ||
                (strcmp(cmd, "eval") == 0 && nargs == 2) || (strcmp(cmd, "write-passkey") == 0 && nargs == 2);
    if (!known) { usage(); }
    if (strcmp(cmd, "info") == 0) { cmd_info(nargs - 1, args + 1); }
    else if (strcmp(cmd, "dump") == 0) { cmd_dump(args[1]); }
    else {
        vocab_load(vocab_dir);
        if (strcmp(cmd, "decode") == 0) { cmd_decode(); }
        else if (strcmp(cmd, "write-bin") == 0) { cmd_write_bin(args[1]); }
        else {
            regex_init();
            workers = (Worker*)malloc_check(num_threads * sizeof(Worker));
            for (int t = 0; t < num_threads; t++) { worker_init(&workers[t]); }
            if (strcmp(cmd, "encode") == 0) { cmd_encode(args[1]); }
            else if (strcmp(cmd, "eval") == 0) { cmd_eval(args[1]); }
            else if (strcmp(cmd, "write-passkey") == 0) { cmd_write_passkey(args[1]); }
            else { cmd_shard(args[1], split, shard_tokens); }
        }
    }
    // everything printed must have reached standard output (a full disk, a closed pipe)
    if (fflush(stdout) != 0 || ferror(stdout) || fclose(stdout) != 0) { fatal("write error on standard output (%s)", strerror(errno)); }
    return 0;
}
