/*
The BPE merge of data/tokenizer.c (a heap over a linked list, O(n log n)) against GPT-2's
bpe() written the direct way (quadratic: find the lowest-rank pair, merge all its
occurrences left to right, repeat), which is kept here only as the reference. Every piece
of the given text files, as the tokenizer's pattern cuts them, and synthetic pieces (long
runs, repeated patterns, random letters and bytes, a whole text as one piece) must merge
to exactly the same tokens.

    test_bpe VOCAB_DIR FILE...        prints one line; exit status 1 on the first difference
*/
#define main tokenizer_main
#include "../tokenizer.c"
#undef main

static int pieces = 0;
static long long piece_bytes = 0;

// GPT-2's bpe(), round by round: the reference
static int bpe_reference(const uint8_t* p, int n, int* sym) {
    for (int i = 0; i < n; i++) { sym[i] = vocab.byte_id[p[i]]; }
    int m = n;
    while (m > 1) {
        int best = INT_MAX, best_i = -1, best_merged = -1;
        for (int i = 0; i + 1 < m; i++) {
            int merged;
            int rank = pair_lookup(sym[i], sym[i + 1], &merged);
            if (rank < best) { best = rank; best_i = i; best_merged = merged; }
        }
        if (best_i < 0) { break; }
        int a = sym[best_i], b = sym[best_i + 1], j = best_i;
        for (int i = best_i; i < m;) {
            if (i + 1 < m && sym[i] == a && sym[i + 1] == b) { sym[j++] = best_merged; i += 2; }
            else { sym[j++] = sym[i++]; }
        }
        m = j;
    }
    return m;
}

// merges one piece both ways and stops the test at the first difference
static void compare_piece(Worker* w, const uint8_t* p, int n, const char* what) {
    int* ref = (int*)malloc_check((size_t)n * sizeof(int));
    int m_ref = bpe_reference(p, n, ref);
    int m = bpe_merge(w, p, n);
    int k = 0;
    while (k < m && k < m_ref && w->sym[k] == ref[k]) { k++; }
    if (m != m_ref || k < m) {
        printf("FAIL: %s: a %d-byte piece merges to %d tokens, the reference to %d; first difference at token %d\n",
               what, n, m, m_ref, k);
        exit(1);
    }
    free(ref);
    pieces++;
    piece_bytes += n;
}

// every piece of a text file, as encode_text cuts it
static void compare_file(Worker* w, const char* path) {
    ByteBuf text = {0}, scratch = {0};
    read_all(path, &text);
    utf8_sanitize_tail(&text, 0, &scratch);
    size_t pos = 0;
    while (pos < text.len) {
        int rc = pcre2_match(gpt2_regex, text.data, text.len, pos, PCRE2_NO_UTF_CHECK, w->match, w->match_ctx);
        if (rc < 0) { printf("FAIL: %s: no piece at byte %zu\n", path, pos); exit(1); }
        size_t end = pcre2_get_ovector_pointer(w->match)[1];
        compare_piece(w, text.data + pos, (int)(end - pos), path);
        pos = end;
    }
    // the first 10 kB as one piece: spaces, punctuation and letters merged together
    compare_piece(w, text.data, text.len < 10000 ? (int)text.len : 10000, path);
    free(text.data);
    free(scratch.data);
}

int main(int argc, char** argv) {
    if (argc < 3) { fprintf(stderr, "usage: test_bpe VOCAB_DIR FILE...\n"); return 2; }
    vocab_load(argv[1]);
    regex_init();
    Worker w;
    worker_init(&w);
    for (int k = 2; k < argc; k++) { compare_file(&w, argv[k]); }
    uint8_t* buf = (uint8_t*)malloc_check(20000);
    uint64_t rng = 12345;
    const char* runs[] = {"a", " ", "0", "ab", "aab", "abc", "the ", "\xe2\x96\x88"};
    for (int r = 0; r < 8; r++) { // runs of one pattern, up to 5000 bytes
        size_t len = strlen(runs[r]);
        for (int n = 2; n <= 5000; n = n * 3 / 2 + 1) {
            for (int i = 0; i < n; i++) { buf[i] = (uint8_t)runs[r][i % len]; }
            compare_piece(&w, buf, n, "a repeated pattern");
        }
    }
    for (int t = 0; t < 300; t++) { // random letters (long words) and random bytes
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int n = 2 + (int)((rng >> 33) % (t < 150 ? 6000 : 300));
        for (int i = 0; i < n; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            buf[i] = t < 150 ? (uint8_t)('a' + (rng >> 33) % 26) : (uint8_t)(rng >> 33);
        }
        compare_piece(&w, buf, n, t < 150 ? "random letters" : "random bytes");
    }
    free(buf);
    printf("%d pieces, %lld bytes: the heap merge gives the quadratic reference's tokens for every one\n", pieces, piece_bytes);
    return 0;
}
