/*
The registry of positional encodings: one line each. Everything else about the list is
derived from it or checked against it: the ids and names (llmc/pe.h), the compile-time
selection (-DPE_<NAME>, which includes pe/<file>.h), the lists of encodings that take
randomized positions or DAPE, the help and error strings, the Makefile's PE_LIST and
DAPE_BASES, and (tests/registry.sh) python/model.py's names and the README's table.

  id    the checkpoint's header word 8; 0 = learned, so llm.c's checkpoints load as
        learned. Never renumber or reuse an id: checkpoints hold it.
  NAME  the compile-time switch: -DPE_<NAME>, set by `make ... PE=<name>`; NAME is name
        in capitals
  name  the name on the command line, in checkpoints' messages, tables and CSV files
  file  pe/<file>.h defines it (a family of variants shares one file)
  kind  where the encoding acts:
          EMBED  on the token embeddings, once (pe_embed_forward / pe_embed_backward)
          QK     on q and k in every layer (pe_layer_forward / pe_layer_backward)
          BIAS   an additive bias b(i, j) of the attention scores (pe_bias and its kin),
                 computed inside the shared attention kernels
          ATTN   its own attention (pe_attention_forward / pe_attention_backward)
          NONE   nothing: causal masking alone
  rp    1: takes randomized positions (-rp L; llmc/pe.h)
  dape  1: a base of DAPE (make ... DAPE=1x3; pe/dape.h)
  rev   the revision of its definition, header word 11: a checkpoint trained under
        another revision is refused (pe/<file>.h says what changed)

docs/adding-an-encoding.md walks through adding a line.
*/
#ifndef LLMC_PE_LIST_H
#define LLMC_PE_LIST_H

#define PE_REGISTRY(X) \
/*    id  NAME          name          file        kind   rp dape rev */ \
    X( 0, LEARNED,      learned,      learned,    EMBED,  1, 0,  0) \
    X( 1, SINUSOIDAL,   sinusoidal,   sinusoidal, EMBED,  1, 0,  1) \
    X( 2, ROPE,         rope,         rope,       QK,     1, 1,  0) \
    X( 3, NOPE,         nope,         nope,       NONE,   0, 1,  0) \
    X( 4, ALIBI,        alibi,        alibi,      BIAS,   1, 1,  0) \
    X( 5, T5,           t5,           t5,         BIAS,   1, 0,  0) \
    X( 6, KERPLE,       kerple,       kerple,     BIAS,   1, 1,  0) \
    X( 7, FIRE,         fire,         fire,       BIAS,   1, 1,  1) \
    X( 8, CABLE_V1,     cable_v1,     cable,      BIAS,   0, 0,  0) \
    X( 9, CABLE_NW,     cable_nw,     cable,      BIAS,   0, 0,  0) \
    X(10, CABLE,        cable,        cable,      BIAS,   0, 0,  0) \
    X(11, KCABLE,       kcable,       cable,      BIAS,   0, 0,  0) \
    X(12, XPOS,         xpos,         rope,       QK,     1, 0,  0) \
    X(13, SANDWICH,     sandwich,     sandwich,   BIAS,   1, 0,  0) \
    X(14, KERPLE_POWER, kerple_power, kerple,     BIAS,   1, 0,  0) \
    X(15, COPE,         cope,         cope,       ATTN,   0, 0,  0) \
    X(16, TXL,          txl,          txl,        ATTN,   0, 0,  0) \
    X(17, TISA,         tisa,         tisa,       BIAS,   1, 0,  0) \
    X(18, SHAPE,        shape,        sinusoidal, EMBED,  1, 0,  0) \
    X(19, CAPE,         cape,         sinusoidal, EMBED,  1, 0,  0) \
    X(20, BIPE_ROPE,    bipe_rope,    bipe,       QK,     0, 0,  0) \
    X(21, BIPE_ALIBI,   bipe_alibi,   bipe,       BIAS,   0, 0,  0) \
    X(22, SHAW,         shaw,         shaw,       ATTN,   1, 0,  0) \
    X(23, FLOATER,      floater,      floater,    EMBED,  1, 0,  0) \
    X(24, COMPLEX_ORDER, complex_order, complex_order, ATTN, 0, 0,  0)

#endif // LLMC_PE_LIST_H
