/*
DAPE: the attention logits as a learned function of the scores and the positional
bias of all heads together (DAPE, NeurIPS 2024, and DAPE V2,
arXiv 2410.04798), a second compile-time switch on top of the positional encoding:

  make train_gpt2 PE=kerple DAPE=1x3      ->  -DPE_KERPLE -DDAPE_KERNEL=3

  DAPE=   variant     checkpoint word 9   logits of row i, key j <= i (all heads at once)
  (none)  -           0                   a = s + b
  mlp     DAPE        1                   a = s + b + W2 LReLU(W1 [s; b] + b1) + b2
  1x3     DAPE_1x3    3                   the same with two 1 x 3 convolutions along the keys
  1x5     DAPE_1x5    5                   (1 x 5)
  1x7     DAPE_1x7    7                   (1 x 7)

The word is the kernel width k: DAPE (v1) is exactly the k = 1 case of the convolution
(the spec's DAPE_1x1 == DAPE), so one implementation serves every variant. The hidden
width D (default 32, `make ... DAPE_D=64`) is checkpoint word 10; it is read from a
checkpoint like the other sizes, DAPE_D only sets it for new models. Bases: nope and
rope (the network sees the H score channels), alibi, kerple and fire (2H channels:
the scores, then the biases). The definitions (forward and backward) are in the DAPE
sections of train_gpt2.c and train_gpt2.cu; llmc/attention_dape.cuh is the CUDA kernel.

DAPE_EDGE_EXACT (default 1, `make ... DAPE_EDGE_EXACT=0`): the hidden values just past
the end of the sequence (columns >= T) are PyTorch's zero padding (1, as the official
code) or computed as if the sequence went on (0: every row independent of T). It
changes only the last k/2 rows of a window; it is a property of the binary, not of the
checkpoint.
*/
#ifndef LLMC_DAPE_H
#define LLMC_DAPE_H

#include <stdio.h>
#include "pe.h"

#ifdef DAPE_KERNEL
#define DAPE_ID DAPE_KERNEL
#define PE_DAPE_TERM_(id, NAME, name, file, kind, rp, dape, ...) + PE_IS(NAME) * dape
#if !(0 PE_REGISTRY(PE_DAPE_TERM_))
#error "DAPE runs on the bases of llmc/pe_list.h whose dape column is 1"
#endif
#if DAPE_KERNEL != 1 && DAPE_KERNEL != 3 && DAPE_KERNEL != 5 && DAPE_KERNEL != 7
#error "DAPE_KERNEL must be 1 (mlp), 3, 5 or 7"
#endif
#else
#define DAPE_ID 0
#endif
#ifndef DAPE_WIDTH
#define DAPE_WIDTH 32
#endif
#ifndef DAPE_EDGE_EXACT
#define DAPE_EDGE_EXACT 1
#endif

#define DAPE_MAX_KERNEL 7
#define DAPE_MAX_WIDTH 1024
#define DAPE_LRELU_SLOPE 0.01f // PyTorch's LeakyReLU default

static inline int dape_variant_known(int k) { return k == 0 || k == 1 || k == 3 || k == 5 || k == 7; }

// the bases DAPE runs on (llmc/pe_list.h); those with a bias feed it as H more input channels
static inline int dape_base_supported(int pe) { return pe >= 0 && pe < PE_NUM_IDS && PE_INFO[pe].dape; }
static inline int dape_in_channels(int pe, int NH) { return (PE_INFO[pe].kind == PE_KIND_BIAS ? 2 : 1) * NH; }

// the value of make's DAPE= for a variant: "mlp", "1x3", ...
static inline const char* dape_make_name(int k) {
    static const char* const names[DAPE_MAX_KERNEL + 1] = {"", "mlp", "?", "1x3", "?", "1x5", "?", "1x7"};
    return k >= 0 && k <= DAPE_MAX_KERNEL ? names[k] : "?";
}

// The name of a combination, as in the binaries' names and the extrapolation CSV:
// "kerple", "kerple_dapemlp", "kerple_dape1x3". Rotates over four buffers, so that one
// message can name two combinations.
static inline const char* model_label(int pe, int dape) {
    static char buf[4][64];
    static int next = 0;
    char* out = buf[next];
    next = (next + 1) % 4;
    if (dape == 0) { snprintf(out, 64, "%s", pe_name(pe)); }
    else { snprintf(out, 64, "%s_dape%s", pe_name(pe), dape_make_name(dape)); }
    return out;
}

#endif // LLMC_DAPE_H
