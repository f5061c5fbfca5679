/*
bipe_rope, bipe_alibi (He et al. 2024, BiPE), as the official code (zhenyuhe00/BiPE at 3dddab3,
my_modeling_llama_bipe_rope.py and my_modeling_llama_bipe_alibi.py): two levels of positions,
both of the tokens themselves. The text is cut into segments, each ended by a separator token,
which belongs to the segment it ends (get_bilevel_ids, rope.py 632-650):

    seg_t   = the number of separators before token t          (the segment's index)
    intra_t = t - the index of the segment's first token         (the position within it)

Within a segment, an absolute embedding: a learned table of rows (wpe [maxT, C], as learned's;
the official nn.Embedding of train_scale = 1024 rows, the training length) at intra_t, clipped
to its last row (rope.py 644-646), added to the token's embedding (rope.py 593-600, 703).
Between segments, a relative encoding at the segments' indices: bipe_rope rotates q and k by
seg_t as rope does (position_ids = seg, rope.py 683); bipe_alibi adds ALiBi's bias of the
segments, -96 m_h (seg_i - seg_j), its slopes 96 times ALiBi's (_init_alibi_mul96, alibi.py
197-218; the official adds +96 m_h seg_j, the same under the softmax, alibi.py 291-292).
The separators are GPT-2's full stop and newlines (BIPE_SEPARATORS; the official code's are
Llama's "\u2581." and "\n", docs/encodings.md says where this differs). seg and intra are the
encoding's own positions (pe_positions_own): seg is what the layers read, intra is computed from
it (bipe_within); a row's positions depend only on its tokens up to each one, so BiPE takes no
given or drawn positions (the registry's rp 0) and its rows may be cut anywhere.
*/
#if PE_PART == PE_PART_DEFINITION
#define ALIBI_SLOPE_SCALE 96.0f // BiPE-ALiBi's slopes, 96 times ALiBi's (pe/alibi.h)
#endif
#if PE_IS(BIPE_ROPE)
#include "rope.h"
#else
#include "alibi.h"
#endif

#if PE_PART == PE_PART_DEFINITION

// the tokens that end a segment: GPT-2's ".", " ." (the official Llama id 869's text), "\n"
// and "\n\n" (GPT-2 merges two newlines into one token; pe_tests checks the four with the
// tokenizer's table)
static const int BIPE_SEPARATORS[4] = {13, 764, 198, 628};
static int bipe_is_separator(int token) {
    for (int k = 0; k < 4; k++) { if (token == BIPE_SEPARATORS[k]) { return 1; } }
    return 0;
}

// the segments' indices seg (the positions every draw holds, the layers' positions) of the
// pass's tokens (B, T): a row's first segment is 0, each separator's next token starts the
// next; without tokens (the attention kernels' check, which has none) the positions stay as
// they are. Returns their range.
#define PE_OWN_POSITIONS
static int pe_positions_own(const GPT2Config* cfg, int* pos, const int* tokens, int draws, int B, int T, int span, int training,
                            uint64_t key) {
    if (tokens == NULL) { return span; }
    int most = 0;
    for (int b = 0; b < B; b++) {
        int seg = 0;
        for (int t = 0; t < T; t++) {
            for (int d = 0; d < draws; d++) { pos[((size_t)d * B + b) * T + t] = seg; }
            if (bipe_is_separator(tokens[(size_t)b * T + t])) { seg++; }
        }
        most = most > pos[(size_t)b * T + T - 1] ? most : pos[(size_t)b * T + T - 1];
    }
    return most + 1;
}

// the positions within their segments (B, T) of tokens whose segments' indices are seg (B, T),
// clipped to the table's last row: t minus the first index of the row whose segment is seg_t
// (a binary search: seg never decreases along a row)
static void bipe_within(int* intra, const int* seg, int B, int T, int rows) {
    for (int b = 0; b < B; b++) {
        const int* s = seg + (size_t)b * T;
        for (int t = 0; t < T; t++) {
            int lo = 0, hi = t;
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (s[mid] < s[t]) { lo = mid + 1; } else { hi = mid; }
            }
            intra[(size_t)b * T + t] = t - lo < rows - 1 ? t - lo : rows - 1;
        }
    }
}

#elif PE_PART == PE_PART_CPU

// the table's rows at the tokens' positions within their segments, of the segments the layers
// read (pe_positions), added to the token embeddings; the backward scatters into those rows
#define PE_EMBED
static void pe_embed_forward(GPT2* model, floatX* out, int B, int T) {
    int* intra = (int*)malloc_check((size_t)B * T * sizeof(int));
    bipe_within(intra, pe_positions(model, 0), B, T, model->config.max_seq_len);
    position_embed_forward(out, model->params.wpe, intra, B * T, model->config.channels);
    free(intra);
}
static void pe_embed_backward(GPT2* model, floatX* dout, int B, int T) {
    int* intra = (int*)malloc_check((size_t)B * T * sizeof(int));
    bipe_within(intra, pe_positions(model, 0), B, T, model->config.max_seq_len);
    encoder_backward(model->grads.wpe, dout, intra, B, T, model->config.channels);
    free(intra);
}

#elif PE_PART == PE_PART_CUDA

// the positions within the segments, made on the host from the segments there (pos_host, as
// the CPU path makes them) and copied with the pass (pe_pass_upload), then the table's rows
#define PE_EMBED
static void pe_embed_forward(GPT2* model, floatX* out, int B, int T) {
    int* intra = (int*)malloc_check((size_t)B * T * sizeof(int));
    bipe_within(intra, model->pos_host, B, T, model->config.max_seq_len);
    const int* dev = (const int*)pe_pass_upload(model, intra, (size_t)B * T * sizeof(int), "BiPE's positions within segments");
    free(intra);
    position_embed_forward(out, model->params.wpe, dev, B * T, T, model->config.channels);
}
static void pe_embed_backward(GPT2* model, floatX* dout, int B, int T) {
    position_embed_backward(model->grads.wpe, dout, (const int*)model->pe_pass, B * T, model->config.channels);
}

#elif PE_PART == PE_PART_TEST

// the table's row added to the value in column c of token bt of the last forward pass, its
// position within the segment counted again from the tokens (an independent reading): the
// tokens since the last separator before it in its row, clipped to the table's last row
#define PE_REF_EMBED
static double pe_ref_embed(GPT2* model, double token, size_t bt, int c) {
    int T = model->seq_len, t = (int)(bt % T), intra = 0;
    while (intra < t && !bipe_is_separator(model->inputs[bt - intra - 1])) { intra++; }
    if (intra > model->config.max_seq_len - 1) { intra = model->config.max_seq_len - 1; }
    return token + model->params.wpe[(size_t)intra * model->config.channels + c];
}

// the tests' tokens: one in four a separator (13 or 198, both within the tiny vocabulary), so
// that a row of the tests holds several segments
#define PE_TEST_TOKENS
static void pe_test_tokens(int* x, int n, uint64_t* rng) {
    for (int i = 0; i < n; i++) {
        if (random_u32(rng) % 4 == 0) { x[i] = random_u32(rng) % 2 ? 13 : 198; }
    }
}

// the segments of a written-out row against the definition's by hand; each row starts at 0;
// a segment longer than the table shares its last row; the separators' text in GPT-2's table
#define PE_TESTS
static void pe_tests(void) {
    printf("bipe: segments and positions within them\n");
    enum { B = 2, T = 9 };
    // "a . b c \n\n d \n e f" in row 0, "x x x x x . x x x" in row 1 (ids 13 ".", 628 "\n\n", 198 "\n")
    const int tokens[B * T] = {64, 13, 65, 66, 628, 67, 198, 68, 69, 87, 87, 87, 87, 87, 13, 87, 87, 87};
    const int seg_want[B * T] = {0, 0, 1, 1, 1, 2, 2, 3, 3, 0, 0, 0, 0, 0, 0, 1, 1, 1};
    const int intra_want[B * T] = {0, 1, 0, 1, 2, 0, 1, 0, 1, 0, 1, 2, 3, 4, 4, 0, 1, 2}; // a table of 5 rows: 5 -> 4
    int pos[2 * B * T], intra[B * T], bad = 0;
    GPT2Config cfg = tiny_config(T);
    int span = pe_positions_own(&cfg, pos, tokens, 2, B, T, T, 1, 0);
    for (int i = 0; i < B * T; i++) { bad += pos[i] != seg_want[i] || pos[B * T + i] != seg_want[i]; }
    check(bad == 0 && span == 4, "segments: a separator ends its own, every draw, range 4", bad, 0);
    bipe_within(intra, pos, B, T, 5);
    bad = 0;
    for (int i = 0; i < B * T; i++) { bad += intra[i] != intra_want[i]; }
    check(bad == 0, "positions within segments, clipped to the table's last row", bad, 0);
    Tokenizer tok;
    tokenizer_init(&tok, "gpt2_tokenizer.bin");
    const char* want[4] = {".", " .", "\n", "\n\n"};
    bad = !tok.init_ok;
    for (int k = 0; k < 4 && tok.init_ok; k++) { bad += strcmp(tokenizer_decode(&tok, BIPE_SEPARATORS[k]), want[k]) != 0; }
    check(bad == 0, "separators: GPT-2's \".\", \" .\", \"\\n\", \"\\n\\n\" (gpt2_tokenizer.bin)", bad, 0);
    tokenizer_free(&tok);
}

#endif
