"""
GPT-2 with every positional encoding of the C trainer, in PyTorch: reads the trainer's
checkpoints and computes what train_gpt2.c computes (same logits, same gradients; the
test python/test_model.py holds the two equal in float64), for analysis and evaluation
in the PyTorch ecosystem. One file, written to be read; each encoding's file pe/<file>.h is
its specification (its CPU part), llmc/model.h the checkpoint layout.

    from model import GPT, PEEval
    model = GPT.from_checkpoint("out/cable/model_00000500.bin")        # fp32 (v3) or bf16 (v5)
    logits, loss = model(idx, targets)         # idx, targets: (B, T) int64 token ids
    model = GPT.from_checkpoint(path, dtype=torch.float64)
    logits, _ = model(idx, pe_eval=PEEval("yarn", rope_factor=4))   # an evaluation variant
    logits, _ = model(idx, positions=model.draw_positions(T, key))  # randomized positions (-rp)

logits are (B, T, Vp), over the padded vocabulary as the trainer's; the loss (mean
cross-entropy) uses the first V of them, as the trainer's softmax does, and a target of -1
(TARGET_UNSCORED, answer-only data: llmc/dataloader.h) is skipped, the mean over the others. Attention here is
plain (B, NH, T, T) scores, not the trainer's fused row-at-a-time kernel: the same
numbers, more memory at long T.

An encoding is one class below with up to three hooks, as the trainer's:
  embed(model, x, pos)         x: (B, T, C) token embeddings; adds position embeddings
  rotate(model, l, q, k, ev, pos, span)   q, k: (B, NH, T, hs); rope's and xpos's rotation
  project(model, l, q, k, v, pos)   q, k, v: (B, T, C) as the projection makes them; floater's
                               position vectors added (pos: (B, T))
  bias(model, l, h, ev, pos)   h: (B, T, C), the attention block's input after ln_1;
                               returns the additive attention bias b(i, j), broadcastable
                               to (B, NH, T, T), or None
  score_bias(model, l, q, k, pos)   q, k: (B, NH, T, hs) after rotate; a term added to the
                               scores that depends on q and k (CoPE's, Transformer-XL's,
                               shaw's; pos: (B, T) the layer's positions), (B, NH, T, T), or None
  value_term(model, l, att, pos)   att: (B, NH, T, T) the attention's probabilities; a term
                               added to the attention's output att @ v (shaw's a^V),
                               (B, NH, T, hs), or None
and, for an encoding with a second residual stream (complex_order; the trainer's
PE_STREAMS), stream_prefix (its block's tensors are GPT-2's names under it; the model's
stream_tensor reads them), embed_streams (the streams' embeddings), scores (the scores of
both streams' q and k) and classifier_input (what the tied classifier reads of the streams'
final layernorms)
(ev: the evaluation variant in effect, a PEEval; pos: (T,) the tokens' positions, 0..T-1
or a draw of randomized positions, span their range), `tensors(cfg)`, the shapes of its
parameter tensors, which the checkpoint stores after GPT-2's in the order of
PE_TENSOR_ORDER, `revision`, the revision of its definition (checkpoint header word 11,
llmc/pe.h pe_revision), `eval_variants`, the evaluation variants it has, and
`max_length(cfg)`, the longest sequence it can process, and `kind`, `rp`, the registry's
columns. Adding an encoding is adding a class and its ENCODINGS entry, in the registry's
order (llmc/pe_list.h; tests/registry.py checks names, kinds, rp and revisions), and, if it
has parameters, its tensors' names to PE_TENSOR_ORDER.
"""
import itertools
import json
import math
import os
import socket
import stat
from dataclasses import dataclass, fields

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------------------
# the checkpoint format (llmc/model.h, llmc/pe.h)

CHECKPOINT_MAGIC = 20240326
CHECKPOINT_FP32 = 3
CHECKPOINT_BF16 = 5
# header words 9 and 10 (DAPE's variant and width): this file has no DAPE and refuses a
# checkpoint with either nonzero; word 11 is the revision of the PE's definition
# (Encoding.revision), which must be the one implemented here
HEADER_WORDS_ZERO = {9: "DAPE variant", 10: "DAPE width"}
HEADER_PE_REVISION = 11
# words 12 and 13: randomized positions' range L (0: none) and seed (Config.rp_len, rp_seed);
# word 14: the training length (Config.train_len; 0 in older files: maxT stands for it);
# words 15-17: rope's frequency table, its base (0: 10000), truncation length (0: off) and
# resonance (0: off) (Config.rope_base, rope_truncate, rope_resonance; llmc/pe.h RopeTable)
HEADER_RP_LEN, HEADER_RP_SEED, HEADER_TRAIN_LEN = 12, 13, 14
HEADER_ROPE_BASE, HEADER_ROPE_TRUNCATE, HEADER_ROPE_RESONANCE = 15, 16, 17
# word 18: shape's offset K (Config.shape_k; 0 for every other encoding; pe/sinusoidal.h)
HEADER_SHAPE_K = 18
# words 19 and 20: shaw's clipping distance k and its value table a^V, 1 or 0 (keys only)
# (Config.shaw_k, shaw_values; 0 for every other encoding; pe/shaw.h)
HEADER_SHAW_K, HEADER_SHAW_VALUES = 19, 20
SHAW_MAX_K = 65536
# word 21: floater's refresh R (Config.floater_refresh; 0 for every other encoding; pe/floater.h):
# a training setting of the trainer, kept here so that a checkpoint written here keeps it
HEADER_FLOATER_REFRESH = 21
# the evaluation variants (llmc/pe.h PE_EVAL_NAMES): RoPE scaling, xPos's blockwise causal
# attention, plain positions for a model trained with randomized positions
PE_EVAL_NAMES = ["plain", "pi", "ntk", "yarn", "dynamic-pi", "dynamic-ntk", "dynamic-yarn", "bca", "plainpos"]

# a block's tensors after its ln1 (llmc/model.h GPT2_BLOCK_TENSORS): GPT-2's, and those of a
# second residual stream (complex_order's imaginary one) under its prefix
BLOCK_TENSORS = ["qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb"]
GPT2_TENSORS = ["wte", "wpe", "ln1w", "ln1b"] + BLOCK_TENSORS + ["lnfw", "lnfb"]
COMPLEX_PREFIX = "complex_"
PE_TENSOR_ORDER = ["cable_wb", "cable_bb", "cable_ww", "cable_bw", "t5_table", "kerple_r1", "kerple_r2",
                   "fire_w1", "fire_b1", "fire_w2", "fire_b2", "fire_c", "fire_L", "kpower_a", "kpower_p", "cope_e",
                   "txl_wr", "txl_rw", "txl_rr", "tisa_mu", "tisa_a", "tisa_c", "shaw_ak", "shaw_av",
                   "floater_p0", "floater_w1", "floater_b1", "floater_w2", "floater_b2",
                   "complex_w"] + [COMPLEX_PREFIX + n for n in BLOCK_TENSORS + ["lnfw", "lnfb"]]

# constants of the encodings (llmc/pe.h); the float ones as the trainer's float literals
ROPE_BASE = 10000
T5_NUM_BUCKETS, T5_MAX_EXACT, T5_MAX_DISTANCE = 32, 16, 128
FIRE_HIDDEN = 32
TISA_KERNELS = 5
FIRE_EPS = float(np.float32(1e-6))
COMPLEX_OUT_DIV = 1.5  # pe/complex_order.h: the classifier reads |z| / 1.5
SINUSOIDAL_FIRST_POS = 2
FLOATER_DT, FLOATER_SUBSTEPS = 0.01, 5  # pe/floater.h: position p at s = p dt, 5 RK steps of dt / 5 each
XPOS_SCALE_BASE = 512.0
CAPE_STREAM = 0x4341  # pe/sinusoidal.h: the augmentation's draws' key within the pass's
XPOS_MAX_LOG2 = 64.0
YARN_BETA_FAST, YARN_BETA_SLOW = 32.0, 1.0
PE_MASKED_BIAS = float(np.float32(-1e30))
LAYERNORM_EPS = 1e-5
TARGET_UNSCORED = -1  # a target the loss skips (llmc/dataloader.h)


@dataclass
class Config:
    max_seq_len: int        # maxT: positions of wpe (learned); the training length otherwise
    vocab_size: int         # V
    padded_vocab_size: int  # Vp
    num_layers: int         # L
    num_heads: int          # NH
    channels: int           # C
    pe: str                 # one of PE_NAMES
    rp_len: int = 0         # randomized positions: drawn from [0, rp_len) (0: none)
    rp_seed: int = 0        # and the seed of their draws
    train_len: int = 0      # the training length T (0: not recorded, maxT stands for it)
    rope_base: int = 0      # rope's frequency table: its base (0: ROPE_BASE),
    rope_truncate: int = 0  # Giraffe's truncation length L (0: off),
    rope_resonance: int = 0  # Resonance RoPE's integer wavelengths (0: off)
    shape_k: int = 0        # shape: the offsets' range K in training, the offset at evaluation
    shaw_k: int = 0         # shaw: the clipping distance k (rows 0..k of its tables)
    shaw_values: int = 0    # shaw: 1 with the value table a^V, 0 keys only
    floater_refresh: int = 0  # floater: the trainer solves its ODE again every R updates (training only)


@dataclass
class PEEval:
    """An evaluation variant (llmc/pe.h; the driver's -rs, -rf, -xb), never used in training:
    variant one of PE_EVAL_NAMES, rope_factor the static RoPE factor s, train_len the training
    length L (0: the checkpoint's, header word 14, or its maxT where that is 0)."""
    variant: str = "plain"
    rope_factor: float = 1.0
    train_len: int = 0


def gpt2_tensors(cfg):
    """Shapes of GPT-2's tensors as the checkpoint stores them (llm.c's layout: linear
    weights as (out, in), every layer's tensor stacked along the first axis)."""
    Vp, C, L, maxT = cfg.padded_vocab_size, cfg.channels, cfg.num_layers, cfg.max_seq_len
    return {
        "wte": (Vp, C), "wpe": (maxT, C) if ENCODINGS[cfg.pe].has_wpe else None,
        "ln1w": (L, C), "ln1b": (L, C), "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C),
        "attprojw": (L, C, C), "attprojb": (L, C), "ln2w": (L, C), "ln2b": (L, C),
        "fcw": (L, 4 * C, C), "fcb": (L, 4 * C), "fcprojw": (L, C, 4 * C), "fcprojb": (L, C),
        "lnfw": (C,), "lnfb": (C,),
    }


def checkpoint_layout(cfg):
    """[(name, shape)] of every tensor the checkpoint of this configuration holds, in file order."""
    shapes = {k: v for k, v in gpt2_tensors(cfg).items() if v is not None}
    pe_shapes = ENCODINGS[cfg.pe].tensors(cfg)
    unknown = set(pe_shapes) - set(PE_TENSOR_ORDER)
    assert not unknown, "tensors missing from PE_TENSOR_ORDER: %s" % unknown
    return [(k, shapes[k]) for k in GPT2_TENSORS if k in shapes] + \
           [(k, pe_shapes[k]) for k in PE_TENSOR_ORDER if k in pe_shapes]


def check_config(cfg, where):
    """Raises ValueError naming `where` (the file it comes from) for a configuration no model
    can be built with, as the trainer's gpt2_config_check."""
    sizes = [getattr(cfg, f.name) for f in fields(Config) if f.name != "pe"]
    if cfg.pe not in PE_NAMES:
        raise ValueError("%s: unknown positional encoding %r (one of %s)" % (where, cfg.pe, ", ".join(PE_NAMES)))
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in sizes) or \
            cfg.num_layers < 1 or cfg.num_heads < 1 or cfg.channels < 1 or cfg.channels % cfg.num_heads != 0 or \
            cfg.vocab_size < 2 or cfg.padded_vocab_size < cfg.vocab_size or cfg.max_seq_len < 1:
        raise ValueError("%s: bad configuration: %s" % (where, cfg))
    if cfg.pe in ("rope", "xpos", "sandwich", "bipe_rope") and (cfg.channels // cfg.num_heads) % 2 != 0:
        raise ValueError("%s: %s needs an even head size, got %d" % (where, cfg.pe, cfg.channels // cfg.num_heads))
    if cfg.pe == "sinusoidal" and cfg.channels < 4:  # its frequencies divide by C/2 - 1
        raise ValueError("%s: sinusoidal needs at least 4 channels, got %d" % (where, cfg.channels))
    if cfg.pe == "txl" and cfg.channels % 2 != 0:  # its sinusoids come in C/2 pairs
        raise ValueError("%s: txl needs an even number of channels, got %d" % (where, cfg.channels))
    if cfg.rp_len < 0 or (cfg.rp_len > 0 and cfg.pe not in RP_SUPPORTED) or \
            (cfg.pe == "learned" and cfg.rp_len > cfg.max_seq_len):
        raise ValueError("%s: randomized positions from [0, %d) on PE '%s' with maxT %d (header word %d)"
                         % (where, cfg.rp_len, cfg.pe, cfg.max_seq_len, HEADER_RP_LEN))
    if cfg.train_len < 0 or cfg.train_len > (1 << 24) or (cfg.pe == "learned" and cfg.train_len > cfg.max_seq_len):
        raise ValueError("%s: bad training length %d (header word %d; learned: at most maxT = %d)"
                         % (where, cfg.train_len, HEADER_TRAIN_LEN, cfg.max_seq_len))
    table = (cfg.rope_base, cfg.rope_truncate, cfg.rope_resonance)
    if cfg.rope_base < 0 or cfg.rope_base == 1 or not 0 <= cfg.rope_truncate <= (1 << 24) or cfg.rope_resonance not in (0, 1):
        raise ValueError("%s: bad RoPE frequency table: base %d (0 for 10000, or >= 2), truncation length %d (0: off, "
                         "up to %d), resonance %d (0 or 1) (header words %d-%d)"
                         % (where, cfg.rope_base, cfg.rope_truncate, 1 << 24, cfg.rope_resonance, HEADER_ROPE_BASE,
                            HEADER_ROPE_RESONANCE))
    if not 0 <= cfg.shape_k <= (1 << 24) or (cfg.shape_k != 0 and cfg.pe != "shape"):
        raise ValueError("%s: bad offset K %d of shape (header word %d: 0..%d, and 0 but for shape)"
                         % (where, cfg.shape_k, HEADER_SHAPE_K, 1 << 24))
    shaw = cfg.pe == "shaw"
    if (shaw and not (1 <= cfg.shaw_k <= SHAW_MAX_K and cfg.shaw_values in (0, 1))) or \
            (not shaw and (cfg.shaw_k != 0 or cfg.shaw_values != 0)):
        raise ValueError("%s: bad tables of shaw: clipping distance k %d (header word %d: 1..%d), value table %d (word %d: "
                         "1 with a^V, 0 keys only); both 0 but for shaw"
                         % (where, cfg.shaw_k, HEADER_SHAW_K, SHAW_MAX_K, cfg.shaw_values, HEADER_SHAW_VALUES))
    if not 0 <= cfg.floater_refresh <= (1 << 24) or (cfg.floater_refresh == 0) != (cfg.pe != "floater"):
        raise ValueError("%s: bad refresh R %d of floater (header word %d: 1..%d for floater, 0 for the others)"
                         % (where, cfg.floater_refresh, HEADER_FLOATER_REFRESH, 1 << 24))
    if any(table) and cfg.pe not in ROPE_TABLE_PES:
        raise ValueError("%s: RoPE frequency table options (base %d, truncation %d, resonance %d) on PE '%s' (they exist "
                         "for rope; header words %d-%d)" % ((where,) + table + (cfg.pe, HEADER_ROPE_BASE, HEADER_ROPE_RESONANCE)))


def check_finite(tensors, where):
    """Raises ValueError naming `where` if a parameter is a NaN or an infinity: the trainer
    refuses such a model (and never writes one)."""
    for name, a in tensors.items():
        bad = int(np.size(a) - np.count_nonzero(np.isfinite(np.asarray(a, dtype=np.float32))))
        if bad > 0:
            raise ValueError("%s holds %d NaN or infinite value(s) in tensor %s: a diverged model, which the trainer refuses too"
                             % (where, bad, name))


def open_regular(path):
    """Opens for reading (binary) a file that must be a regular one: a FIFO, a device or a
    directory is refused at once, and the open does not block, so a FIFO without a writer
    cannot hang the reader (the trainer's fopen_read_regular)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("%s is not a regular file" % path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


_writes = itertools.count()  # crash-safe writes of this process so far


def atomic_write(path, write):
    """Writes `path` crash-safely, as the trainer (llmc/utils.h: AtomicFile): write(f) fills a
    temporary file of the same folder, ".llmc-tmp.<host>.<pid>.<n>.<name>" (a name no user's
    file has; the trainer removes one whose process is gone), which is fsynced and renamed over
    path; on an error it is removed."""
    host = 2166136261  # FNV-1a of the host name, as the trainer's host_id
    for b in socket.gethostname().encode():
        host = ((host ^ b) * 16777619) & 0xFFFFFFFF
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, ".llmc-tmp.%08x.%d.%d.%s" % (host, os.getpid(), next(_writes), name))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def read_checkpoint(path):
    """Reads a checkpoint (version 3: fp32, version 5: bf16) with numpy: its Config and a
    dict name -> float32 array. Raises ValueError with a clear message on a bad file (also
    one that is not a regular file, and a model with a NaN or an infinity, as the trainer)."""
    with open_regular(path) as f:
        data = f.read()
    if len(data) < 1024:
        raise ValueError("%s is not a checkpoint: %d bytes, shorter than the header" % (path, len(data)))
    header = np.frombuffer(data[:1024], dtype=np.int32)
    if header[0] != CHECKPOINT_MAGIC:
        raise ValueError("%s is not a checkpoint: bad magic %d (expected %d)" % (path, header[0], CHECKPOINT_MAGIC))
    version = int(header[1])
    if version not in (CHECKPOINT_FP32, CHECKPOINT_BF16):
        raise ValueError("%s: unsupported checkpoint version %d (expected 3 = fp32 or 5 = bf16)" % (path, version))
    if not 0 <= header[8] < len(PE_NAMES):
        raise ValueError("%s: unknown positional encoding id %d" % (path, header[8]))
    for word, what in HEADER_WORDS_ZERO.items():
        if header[word] != 0:
            raise ValueError("%s: header word %d (%s) is %d: a DAPE model, which this model file does not implement"
                             % (path, word, what, header[word]))
    cfg = Config(max_seq_len=int(header[2]), vocab_size=int(header[3]), num_layers=int(header[4]),
                 num_heads=int(header[5]), channels=int(header[6]), padded_vocab_size=int(header[7]),
                 pe=PE_NAMES[header[8]], rp_len=int(header[HEADER_RP_LEN]), rp_seed=int(header[HEADER_RP_SEED]),
                 train_len=int(header[HEADER_TRAIN_LEN]), rope_base=int(header[HEADER_ROPE_BASE]),
                 rope_truncate=int(header[HEADER_ROPE_TRUNCATE]), rope_resonance=int(header[HEADER_ROPE_RESONANCE]),
                 shape_k=int(header[HEADER_SHAPE_K]), shaw_k=int(header[HEADER_SHAW_K]),
                 shaw_values=int(header[HEADER_SHAW_VALUES]), floater_refresh=int(header[HEADER_FLOATER_REFRESH]))
    check_config(cfg, path + " (header)")
    revision = ENCODINGS[cfg.pe].revision
    if header[HEADER_PE_REVISION] != revision:
        raise ValueError("%s holds revision %d of PE '%s' (header word %d), this model file implements revision %d; "
                         "a model trained under another definition cannot be loaded"
                         % (path, header[HEADER_PE_REVISION], cfg.pe, HEADER_PE_REVISION, revision))
    layout = checkpoint_layout(cfg)
    count = sum(int(np.prod(shape)) for _, shape in layout)
    itemsize = 4 if version == CHECKPOINT_FP32 else 2
    if len(data) != 1024 + count * itemsize:
        raise ValueError("%s: %d bytes, expected %d for this configuration (truncated or corrupt)"
                         % (path, len(data), 1024 + count * itemsize))
    if version == CHECKPOINT_FP32:
        flat = np.frombuffer(data, dtype=np.float32, offset=1024)
    else:  # bf16: the upper 16 bits of a float32
        flat = (np.frombuffer(data, dtype=np.uint16, offset=1024).astype(np.uint32) << 16).view(np.float32)
    tensors, offset = {}, 0
    for name, shape in layout:
        n = int(np.prod(shape))
        tensors[name] = flat[offset:offset + n].reshape(shape)
        offset += n
    check_finite(tensors, path)
    return cfg, tensors


def write_checkpoint(path, cfg, tensors, version=CHECKPOINT_FP32):
    """Writes a checkpoint the C trainers load (version 3: fp32; 5: bf16, rounded to the
    nearest even), from a dict name -> array such as read_checkpoint's; written to a
    temporary file and renamed, so a crash never leaves half a file."""
    header = np.zeros(256, dtype=np.int32)
    header[:9] = [CHECKPOINT_MAGIC, version, cfg.max_seq_len, cfg.vocab_size, cfg.num_layers,
                  cfg.num_heads, cfg.channels, cfg.padded_vocab_size, PE_NAMES.index(cfg.pe)]
    header[HEADER_PE_REVISION] = ENCODINGS[cfg.pe].revision
    header[HEADER_RP_LEN], header[HEADER_RP_SEED], header[HEADER_TRAIN_LEN] = cfg.rp_len, cfg.rp_seed, cfg.train_len
    header[HEADER_ROPE_BASE] = 0 if cfg.rope_base == ROPE_BASE else cfg.rope_base  # one word for the default base
    header[HEADER_ROPE_TRUNCATE], header[HEADER_ROPE_RESONANCE] = cfg.rope_truncate, cfg.rope_resonance
    header[HEADER_SHAPE_K] = cfg.shape_k
    header[HEADER_SHAW_K], header[HEADER_SHAW_VALUES] = cfg.shaw_k, cfg.shaw_values
    header[HEADER_FLOATER_REFRESH] = cfg.floater_refresh
    flat = np.concatenate([np.asarray(tensors[name], dtype=np.float32).reshape(-1) for name, _ in checkpoint_layout(cfg)])
    if version == CHECKPOINT_BF16:
        u = flat.view(np.uint32).astype(np.uint64)
        flat = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    elif version != CHECKPOINT_FP32:
        raise ValueError("checkpoint version %d: only 3 (fp32) and 5 (bf16) exist" % version)
    atomic_write(path, lambda f: (f.write(header.tobytes()), f.write(flat.tobytes())))


# ----------------------------------------------------------------------------
# positional encodings (train_gpt2.c, "positional encodings")

def by_row(pos, fn):
    """fn(rows, p) for a slice of the batch's rows and their positions p (T,), given the positions
    pos (B, T): one call for every row when they share their positions, else one per row, the
    results (tensors or tuples of them, None) joined along the batch."""
    if (pos == pos[0]).all():
        return fn(slice(None), pos[0])
    parts = [fn(slice(b, b + 1), pos[b]) for b in range(pos.shape[0])]
    if parts[0] is None:
        return None
    if isinstance(parts[0], tuple):
        return tuple(torch.cat(z, dim=0) for z in zip(*parts))
    return torch.cat(parts, dim=0)


def distances(pos):
    """(T, T) int64 matrix of pos_i - pos_j (query i, key j) for the tokens' positions pos (T,),
    0 above the diagonal (masked anyway)."""
    return (pos[:, None] - pos[None, :]).clamp(min=0)


# randomized positions (llmc/pe.h, -rp L): the trainer's draws, bit for bit
M64 = (1 << 64) - 1


def random_seed(seed):
    """llmc/rand.h random_seed: splitmix64's mixer, never 0."""
    z = (seed + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    z ^= z >> 31
    return z if z != 0 else 0x2545F4914F6CDD1D


def rp_key(stream, a, b):
    """llmc/pe.h rp_key: the key of a forward pass from its stream and two numbers."""
    k = (stream * 0x9E3779B97F4A7C15) & M64
    k = ((k ^ (k >> 31) ^ a) * 0xBF58476D1CE4E5B9) & M64
    k = ((k ^ (k >> 29) ^ b) * 0x94D049BB133111EB) & M64
    return k ^ (k >> 32)


def random_u32(state):
    """llmc/rand.h random_u32: xorshift64*'s next state and its upper 32 bits."""
    state ^= state >> 12
    state = (state ^ (state << 25)) & M64
    state ^= state >> 27
    return state, ((state * 0x2545F4914F6CDD1D) & M64) >> 32


def rp_draw(T, L, seed, key, d):
    """llmc/pe.h rp_draw: T sorted, distinct positions from [0, L), draw d of the pass with this
    key for a model of this seed (selection sampling on xorshift64*)."""
    state = random_seed(seed ^ rp_key(key, d, 0x7270))
    pos, need = [], T
    for t in range(L):
        if need == 0:
            break
        state, u = random_u32(state)
        if (u * (L - t)) >> 32 < need:
            pos.append(t)
            need -= 1
    return pos


class Encoding:
    """No position information (nope); the base of the others: every hook does nothing.
    kind, rp and revision are the encoding's line of llmc/pe_list.h (tests/registry.py holds
    them equal)."""
    kind = "none"           # embed, qk, bias, attn or none
    rp = False              # takes randomized positions
    revision = 0
    has_wpe = False         # a table of positions wpe [maxT, C] (llmc/model.h pe_has_wpe)
    eval_variants = ("plain",)

    @staticmethod
    def tensors(cfg):
        return {}

    def max_length(self, cfg):
        """The longest sequence the encoding can process (train_gpt2.c gpt2_max_length)."""
        return math.inf

    def own_positions(self, model, idx, pos, training_key):
        """The encoding's own positions (llmc/model.h pe_positions_own) of the tokens idx (B, T)
        from the positions pos (draws, B, T) given, drawn or the indices: of a training pass
        with that key, or of an evaluation (training_key None)."""
        return pos

    def embed(self, model, x, pos):
        return x

    def embed_rows(self, model, x, pos, training_key):
        """x (B, T, C) with the position embeddings of the positions pos (B, T) of a training
        pass with that key, or of an evaluation (training_key None): embed's, row by row
        where the rows' positions differ."""
        return by_row(pos, lambda rows, p: self.embed(model, x[rows], p))

    def rotate(self, model, l, q, k, ev, pos, span):
        return q, k

    def project(self, model, l, q, k, v, pos):
        return q, k, v

    def bias(self, model, l, h, ev, pos):
        return None

    def score_bias(self, model, l, q, k, pos):
        return None

    def value_term(self, model, l, att, pos):
        return None

    # a second residual stream (complex_order's): its tensors' prefix (None: GPT-2's one
    # stream), its embedding, the scores of both streams' q and k, the classifier's input
    stream_prefix = None

    def embed_streams(self, model, x, pos, training_key):
        """The residual streams' embeddings of the token embeddings x (B, T, C): embed_rows's, one stream."""
        return [self.embed_rows(model, x, pos, training_key)]

    def scores(self, model, q, k, others):
        """The attention's scores (B, NH, T, T) of q, k (B, NH, T, hs) after rotate, others the
        second stream's (q, k) (or none): q.k / sqrt(hs)."""
        return (q @ k.transpose(2, 3)) * (1 / math.sqrt(q.shape[-1]))

    def classifier_input(self, model, zs):
        """What the tied classifier reads of the streams' last layer after their final layernorms."""
        return zs[0]


class Learned(Encoding):
    """GPT-2's absolute position embeddings wpe [maxT, C] (one of GPT-2's tensors)."""
    kind = "embed"
    rp = True
    has_wpe = True
    def max_length(self, cfg):
        return cfg.max_seq_len

    def embed(self, model, x, pos):
        return x + model.wpe[pos]


class Shape(Encoding):
    """SHAPE (its official code, OpenNMT-py's PositionalEncoding): the token embeddings times
    sqrt(C) plus the interleaved table p[pos, 2m] = sin(pos d_m), p[pos, 2m + 1] = cos(pos d_m),
    d_m = 10000^(-2m / C), at each row's position shifted by its offset: in training k_b
    uniform in {0..K-1} (the trainer's draw from the pass's key), at evaluation K."""
    kind = "embed"
    rp = True

    def own_positions(self, model, idx, pos, training_key):
        K, B = model.cfg.shape_k, pos.shape[1]
        offsets = []
        for b in range(B):
            if training_key is None or K == 0:
                offsets.append(K if training_key is None else 0)
            else:
                _, u = random_u32(random_seed(rp_key(training_key, b, 0x5348)))
                offsets.append((u * K) >> 32)
        return pos + torch.tensor(offsets, dtype=pos.dtype, device=pos.device)[None, :, None]

    def embed(self, model, x, pos):
        C = model.cfg.channels
        c = np.arange(C)
        angle = pos.cpu().numpy().astype(np.float64)[:, None] * np.exp((c - c % 2) * -(math.log(10000.0) / C))[None, :]
        p = np.where(c % 2 == 0, np.sin(angle), np.cos(angle))
        return x * math.sqrt(C) + torch.tensor(p, dtype=x.dtype, device=x.device)


@dataclass
class CapeAugment:
    """CAPE's augmentation of a training pass's positions (llmc/pe.h CapeAugment; the
    trainer's -cg, -cs, -cl, a run setting that no checkpoint holds), the defaults the trainer's."""
    global_shift: float = 10.0  # G: each row shifted by delta uniform in [-G/2, G/2)
    scale: float = 1.0          # S: each row scaled by exp(u), u uniform in [-ln S, ln S)
    local: int = 1              # each token moved by eps uniform in [-1/2, 1/2)


class Cape(Encoding):
    """CAPE (its official code, flashlight's SinusoidalPositionEmbedding on the cape branch):
    the token embeddings times sqrt(C) plus the concatenated table p[pos, m] = sin(pos s_m),
    p[pos, C/2 + m] = cos(pos s_m), s_m = 10000^(-2m / C), at a float position: in training
    (pos + delta_b + eps_bt) lambda_b, drawn as the trainer draws them from the pass's key
    (model.cape the augmentation), at evaluation pos."""
    kind = "embed"
    rp = True

    @staticmethod
    def draws(B, T, training_key):
        """The uniforms in [0, 1) of a training pass keyed training_key, as the trainer draws
        them (pe/sinusoidal.h cape_position): each row's for its shift and its scale (B,), each
        token's for its local shift (B, T)."""
        f32 = lambda u: (u >> 8) / 16777216.0  # llmc/rand.h random_f32, exact in double
        shift, scale, local = np.zeros(B), np.zeros(B), np.zeros((B, T))
        for b in range(B):
            state, u = random_u32(random_seed(rp_key(training_key, b, CAPE_STREAM)))
            shift[b] = f32(u)
            scale[b] = f32(random_u32(state)[1])
            for t in range(T):
                local[b, t] = f32(random_u32(random_seed(rp_key(training_key, (b << 32) | t, CAPE_STREAM)))[1])
        return shift, scale, local

    @staticmethod
    def table(p, C):
        """The concatenated sinusoids (..., C) of the float positions p (...)."""
        m = np.arange(C) % (C // 2)
        angle = p[..., None] * np.exp(-2.0 * m * math.log(10000.0) / C)
        return np.where(np.arange(C) < C // 2, np.sin(angle), np.cos(angle))

    def embed_rows(self, model, x, pos, training_key):
        p = pos.cpu().numpy().astype(np.float64)
        if training_key is not None:
            a, (B, T) = model.cape, pos.shape
            shift, scale, local = self.draws(B, T, training_key)
            delta = shift * a.global_shift - a.global_shift / 2.0
            u = scale * 2.0 * math.log(a.scale) - math.log(a.scale)
            eps = local - 0.5 if a.local else np.zeros((B, T))
            p = (p + delta[:, None] + eps) * np.exp(u)[:, None]
        table = self.table(p, model.cfg.channels)
        return x * math.sqrt(model.cfg.channels) + torch.tensor(table, dtype=x.dtype, device=x.device)


class Sinusoidal(Encoding):
    """fairseq's: the token embeddings times sqrt(C) plus p[t + 2], p[pos, k] = sin(pos w_k),
    p[pos, C/2 + k] = cos(pos w_k), w_k = 10000^(-k / (C/2 - 1)), k < C/2 (an odd C's last
    column stays 0)."""
    kind = "embed"
    rp = True
    revision = 1

    def embed(self, model, x, pos):
        C = model.cfg.channels
        half = C // 2
        angle = (pos.cpu().numpy().astype(np.float64)[:, None] + SINUSOIDAL_FIRST_POS) * \
            np.exp(-np.arange(half) * math.log(10000.0) / (half - 1))[None, :]
        p = np.zeros((len(pos), C))
        p[:, :half], p[:, half:2 * half] = np.sin(angle), np.cos(angle)
        return x * math.sqrt(C) + torch.tensor(p, dtype=x.dtype, device=x.device)


class Floater(Sinusoidal):
    """FLOATER (its official code, xuanqing94/FLOATER: flow_transformer.py, flow_funcs.py, with the
    authors' torchdiffeq fork's rk4): fairseq's sinusoidal embedding (Sinusoidal's), and in every
    layer l the vectors P_{l,q}, P_{l,k}, P_{l,v}(s) at s = pos dt added to q, k, v, P the solution of
    dP/ds = W2 [relu(W1 [P; s] + b1); s] + b2 from P(0) = P0, by Kutta's 3/8 rule with 5 steps of
    dt / 5 per position (the same dynamics for every row of the (L, 3, C) state). The positions of
    the current parameters, which the trainer's refresh (a training procedure) only holds stale
    between its solves."""
    kind = "embed"
    rp = True
    revision = 0

    @staticmethod
    def tensors(cfg):
        L, C = cfg.num_layers, cfg.channels
        return {"floater_p0": (L, 3, C), "floater_w1": (C, C + 1), "floater_b1": (C,), "floater_w2": (C, C + 1), "floater_b2": (C,)}

    @staticmethod
    def dynamics(model, s, x):
        """h(s, x) for rows x (..., C): two Linear(C + 1, C) on the input with the time appended."""
        t = torch.full(x.shape[:-1] + (1,), s, dtype=x.dtype, device=x.device)
        a = F.relu(torch.cat([x, t], dim=-1) @ model.floater_w1.T + model.floater_b1)
        return torch.cat([a, t], dim=-1) @ model.floater_w2.T + model.floater_b2

    def solve(self, model, n):
        """P at positions 0..n-1, (n, L, 3, C): RK step m from s = m d, d = dt / 5."""
        d = FLOATER_DT / FLOATER_SUBSTEPS
        y, out = model.floater_p0, [model.floater_p0]
        for m in range((n - 1) * FLOATER_SUBSTEPS):
            s = m * d
            k1 = self.dynamics(model, s, y)
            k2 = self.dynamics(model, s + d / 3, y + d * k1 / 3)
            k3 = self.dynamics(model, s + 2 * d / 3, y + d * (k1 / -3 + k2))
            k4 = self.dynamics(model, s + d, y + d * (k1 - k2 + k3))
            y = y + (k1 + 3 * k2 + 3 * k3 + k4) * (d / 8)
            if m % FLOATER_SUBSTEPS == FLOATER_SUBSTEPS - 1:
                out.append(y)
        return torch.stack(out)

    def project(self, model, l, q, k, v, pos):
        if l == 0:  # one solution per forward pass, as far as its positions reach
            model.floater_positions = self.solve(model, int(pos.max()) + 1)
        P = model.floater_positions[pos, l]  # (B, T, 3, C)
        return q + P[:, :, 0], k + P[:, :, 1], v + P[:, :, 2]


def rope_frequencies(hs, ev, T, cfg):
    """RoPE's angular frequencies theta_k, k < hs/2, of the model's frequency table (cfg's
    rope_base, rope_truncate, rope_resonance) under the evaluation variant ev in a forward
    pass over T tokens, in the order base, scaling (jquesnelle/yarn's scaled_rope),
    truncation (Giraffe), rounding (Resonance RoPE) (pe/rope.h rope_frequencies); their
    integer wavelengths under resonance (0: none); and the factor q and k are multiplied by
    (YaRN's mscale(s), 1 otherwise)."""
    dynamic = ev.variant.startswith("dynamic-")
    method = ev.variant[len("dynamic-"):] if dynamic else ev.variant
    if method not in ("pi", "ntk", "yarn"):  # plain, or xpos's bca
        s = 1.0
    elif dynamic:  # the factor of this forward pass: max(1, T / L)
        s = max(1.0, T / ev.train_len)
    else:
        s = ev.rope_factor
    model_base = float(cfg.rope_base or ROPE_BASE)
    base = model_base * (s ** (hs / (hs - 2.0)) if method == "ntk" else 1.0)
    theta = np.array([base ** (-2.0 * k / hs) for k in range(hs // 2)])
    mscale = 1.0
    if method == "pi":
        theta = theta / s
    if method == "yarn":  # g = 1 keeps theta (high frequencies), g = 0 interpolates theta / s
        def correction_dim(r):
            return hs * math.log(ev.train_len / (r * 2 * math.pi)) / (2 * math.log(model_base))
        lo = max(math.floor(correction_dim(YARN_BETA_FAST)), 0)
        hi = min(math.ceil(correction_dim(YARN_BETA_SLOW)), hs - 1)
        g = 1 - np.clip((np.arange(hs // 2) - lo) / (0.001 if hi == lo else hi - lo), 0, 1)
        theta = theta / s * (1 - g) + theta * g
        mscale = 0.1 * math.log(s) + 1 if s > 1 else 1.0
    if cfg.rope_truncate > 0:  # kept from 2 pi / L up, 2 pi / (16 L) from 2 pi / (8 L) up, else 0
        b = 2 * math.pi / cfg.rope_truncate
        theta = np.where(theta >= b, theta, np.where(theta >= b / 8, 2 * math.pi / (16.0 * cfg.rope_truncate), 0.0))
    period = np.zeros(hs // 2)
    if cfg.rope_resonance:  # lambda = round(2 pi / theta), half to even; theta = 2 pi / lambda
        live = theta > 0
        period[live] = np.rint(2 * math.pi / theta[live])
        theta[live] = 2 * math.pi / period[live]
        period[period > 2 ** 31 - 1] = 0  # beyond the positions: never repeats
    return theta, period, mscale


class Rope(Encoding):
    """Rotates each pair (2k, 2k+1) of q and k at position t by t theta_k, theta_k =
    10000^(-2k/hs), every layer; the model's frequency table (rope only: its base,
    truncation and resonance, header words 15-17) changes theta_k, under resonance the angle
    is (t mod lambda_k) theta_k; at evaluation a RoPE scaling variant changes theta_k and
    multiplies q and k by YaRN's mscale. xpos is this with a finite scale base gamma: pair k
    of q then times zeta_k^(n/gamma), of k times zeta_k^(-n/gamma), n = t - ceil(span/2)
    (rope: zeta^0 = 1); t is the token's position, span the positions' range (T, or the L
    of randomized positions)."""
    kind = "qk"
    rp = True
    eval_variants = ("plain", "pi", "ntk", "yarn", "dynamic-pi", "dynamic-ntk", "dynamic-yarn")
    scale_base = math.inf

    def rotate(self, model, l, q, k, ev, pos, span):
        T, hs = q.shape[2], q.shape[3]
        theta, period, mscale = rope_frequencies(hs, ev, T, model.cfg)
        t = pos.cpu().numpy().astype(np.float64)[:, None]
        zeta = (2.0 * np.arange(hs // 2) + 0.4 * hs) / (1.4 * hs)   # llmc/pe.h xpos_zeta
        z = zeta[None, :] ** ((t - (span + 1) // 2) / self.scale_base)
        angle = np.where(period > 0, np.fmod(t, np.where(period > 0, period, 1)), t) * theta  # resonance: (t mod lambda) theta
        cos, sin, fq, fk = (torch.tensor(a, dtype=q.dtype, device=q.device)
                            for a in (np.cos(angle), np.sin(angle), mscale * z, mscale / z))

        def rot(x, f):
            x0, x1 = x[..., 0::2], x[..., 1::2]
            return torch.stack([f * (x0 * cos - x1 * sin), f * (x0 * sin + x1 * cos)], dim=-1).flatten(-2)
        return rot(q, fq), rot(k, fk)


class Xpos(Rope):
    """torchscale's xPos: rope with the decay of scale base 512; lengths whose largest factor
    would exceed 2^64 are refused (llmc/pe.h xpos_max_length). Blockwise causal attention
    (variant bca) beyond the training length L: query i sees the keys from
    (floor(i / (L/2)) - 1) (L/2) on, the others get the trainer's bias of -1e30 (i and j:
    the positions)."""
    eval_variants = ("plain", "bca")
    scale_base = XPOS_SCALE_BASE

    def max_length(self, cfg):  # zeta_0^(-ceil(T/2) / gamma) <= 2^64 (llmc/pe.h xpos_max_length)
        hs = cfg.channels // cfg.num_heads
        return 2 * math.floor(XPOS_MAX_LOG2 * XPOS_SCALE_BASE / -math.log2(0.4 * hs / (1.4 * hs)))

    def bias(self, model, l, h, ev, pos):
        T = h.shape[1]
        if ev.variant != "bca" or T <= ev.train_len:
            return None
        half = ev.train_len // 2
        i, j = pos[:, None], pos[None, :]
        return torch.where(j < (i // half - 1) * half, PE_MASKED_BIAS, 0.0).to(h.dtype)


def alibi_slopes(n):
    """Press et al.'s head slopes (the reference get_slopes), rounded to float32 as the
    trainer keeps them: 2^(-8/n), 2^(-16/n), ... for a power-of-two n, otherwise the
    closest smaller power of two's slopes, then every other slope of twice that."""
    p = 1
    while p * 2 <= n:
        p *= 2
    start = 2.0 ** (-8.0 / p)
    slopes = [start ** (i + 1) for i in range(p)]
    start2 = 2.0 ** (-8.0 / (2 * p))
    slopes += [start2 ** (2 * i + 1) for i in range(n - p)]
    return np.array(slopes, dtype=np.float32)


class Alibi(Encoding):
    """b(i, j) = -m_h (i - j), fixed slopes, not scaled by 1/sqrt(hs)."""
    kind = "bias"
    rp = True
    slope_scale = 1.0  # the slopes' factor (pe/alibi.h ALIBI_SLOPE_SCALE: BiPE-ALiBi's 96)

    def bias(self, model, l, h, ev, pos):
        m = torch.tensor(alibi_slopes(model.cfg.num_heads), dtype=h.dtype, device=h.device) * self.slope_scale
        return -m[:, None, None] * distances(pos).to(h.dtype)


class Bipe(Encoding):
    """BiPE (pe/bipe.h): a segment ends at each separator (GPT-2's ".", " .", "\\n", "\\n\\n");
    the layers read the segments' indices seg_t (the separators before t: the encoding's own
    positions), the embedding adds wpe's row at the position within the segment, t minus the
    segment's first index, clipped to wpe's last row."""
    rp = False
    has_wpe = True
    eval_variants = ("plain",)
    separators = (13, 764, 198, 628)

    def own_positions(self, model, idx, pos, training_key):
        sep = torch.isin(idx, torch.tensor(self.separators, device=idx.device)).long()
        return (torch.cumsum(sep, dim=1) - sep).expand(pos.shape)

    def embed_rows(self, model, x, pos, training_key):
        first = torch.searchsorted(pos.contiguous(), pos.contiguous())  # each token's segment's first index
        intra = (torch.arange(pos.shape[1], device=pos.device)[None, :] - first).clamp(max=model.cfg.max_seq_len - 1)
        return x + model.wpe[intra]


class BipeRope(Bipe, Rope):
    """BiPE-RoPE: rope at the segments' indices."""
    kind = "qk"


class BipeAlibi(Bipe, Alibi):
    """BiPE-ALiBi: ALiBi of the segments' indices, the slopes 96 times ALiBi's."""
    kind = "bias"
    slope_scale = 96.0


class Sandwich(Encoding):
    """NeMo's Sandwich: b(i, j) = (sum_{k=1}^{hs/2} cos((i - j) 10000^(-2k/hs)) - hs/2) /
    (8 (h + 1) / NH), no parameters."""
    kind = "bias"
    rp = True
    def bias(self, model, l, h, ev, pos):
        NH = model.cfg.num_heads
        hs = model.cfg.channels // NH
        n = np.arange(int(pos[-1]) + 1, dtype=np.float64)[:, None]
        s = np.cos(n * np.power(10000.0, -2.0 * np.arange(1, hs // 2 + 1) / hs)[None, :]).sum(axis=1) - hs / 2.0
        table = s[None, :] / (8.0 * np.arange(1, NH + 1) / NH)[:, None]   # (NH, distance)
        return torch.tensor(table, dtype=h.dtype, device=h.device)[:, distances(pos)]


def t5_bucket(n):
    """Causal T5 bucket of a distance n >= 0: 16 exact, log-spaced up to 128, then the last."""
    if n < T5_MAX_EXACT:
        return n
    if n >= T5_MAX_DISTANCE:
        return T5_NUM_BUCKETS - 1
    b = T5_MAX_EXACT + int(math.log(n / T5_MAX_EXACT) / math.log(T5_MAX_DISTANCE / T5_MAX_EXACT)
                           * (T5_NUM_BUCKETS - T5_MAX_EXACT))
    return min(b, T5_NUM_BUCKETS - 1)


class T5(Encoding):
    """b(i, j) = table[h][bucket(i - j)], a learned scalar per head and distance bucket."""
    kind = "bias"
    rp = True
    @staticmethod
    def tensors(cfg):
        return {"t5_table": (cfg.num_layers, cfg.num_heads, T5_NUM_BUCKETS)}

    def bias(self, model, l, h, ev, pos):
        table = torch.tensor([t5_bucket(n) for n in range(int(pos[-1]) + 1)], device=h.device)
        return model.t5_table[l][:, table[distances(pos)]]


class Kerple(Encoding):
    """Logarithmic Kerple: b(i, j) = -r1_h log(1 + r2_h (i - j)); the trainer keeps r1, r2
    >= 0.01 after each update (a projection, not part of the function)."""
    kind = "bias"
    rp = True
    @staticmethod
    def tensors(cfg):
        return {"kerple_r1": (cfg.num_layers, cfg.num_heads), "kerple_r2": (cfg.num_layers, cfg.num_heads)}

    def bias(self, model, l, h, ev, pos):
        n = distances(pos).to(h.dtype)
        r1, r2 = model.kerple_r1[l][:, None, None], model.kerple_r2[l][:, None, None]
        return -r1 * torch.log(1 + r2 * n)


class KerplePower(Encoding):
    """Kerple's power variant: b(i, j) = -a_h (i - j)^p_h; the trainer keeps a >= 0.01 and
    0.01 <= p <= 2 after each update. At i = j the bias and both gradients are 0 (pow's)."""
    kind = "bias"
    rp = True
    @staticmethod
    def tensors(cfg):
        return {"kpower_a": (cfg.num_layers, cfg.num_heads), "kpower_p": (cfg.num_layers, cfg.num_heads)}

    def bias(self, model, l, h, ev, pos):
        n = distances(pos).to(h.dtype)
        a, p = model.kpower_a[l][:, None, None], model.kpower_p[l][:, None, None]
        return -a * n ** p


class Fire(Encoding):
    """FIRE (the DAPE repository's FIRE class): b(i, j) = f(psi(i - j) / (psi(max(L, i)) +
    eps)), i counted from 0, psi(x) = log(|c| x + 1), f an MLP 1 -> 32 (ReLU) -> NH shared
    by the heads of a layer; c learned, the threshold L = |l| L0 with l learned (tensor
    fire_L) and L0 = maxT // 2 fixed (i, j: the positions)."""
    kind = "bias"
    rp = True
    revision = 1

    @staticmethod
    def tensors(cfg):
        L, NH = cfg.num_layers, cfg.num_heads
        return {"fire_w1": (L, FIRE_HIDDEN), "fire_b1": (L, FIRE_HIDDEN), "fire_w2": (L, NH, FIRE_HIDDEN),
                "fire_b2": (L, NH), "fire_c": (L,), "fire_L": (L,)}

    def bias(self, model, l, h, ev, pos):
        c, threshold = model.fire_c[l].abs(), model.fire_L[l].abs() * (model.cfg.max_seq_len // 2)
        i = pos.to(h.dtype)[:, None]
        lpos = torch.where(threshold > i, threshold, i)  # the gradient reaches l only where L is the max
        u = torch.log(c * distances(pos).to(h.dtype) + 1) / (torch.log(c * lpos + 1) + FIRE_EPS)
        hidden = F.relu(u[..., None] * model.fire_w1[l] + model.fire_b1[l])   # (T, T, 32)
        return (hidden @ model.fire_w2[l].T + model.fire_b2[l]).permute(2, 0, 1)  # (NH, T, T)


class Cable(Encoding):
    """The CABLE family: a per-token, per-head increment d_t = -g(x_t W_b + b_b), its
    cumulative sum S over positions, and a bias made of S:
      cable_v1  g = softplus   b(i, j) = S_i - S_j         (the released code)
      cable_nw  g = ReLU       b(i, j) = S_i - S_j         (CABLE v2 without weights)
      cable     g = ReLU       b(i, j) = w_i (S_i - S_j),  w_i = x_i W_w + b_w
      kcable    g = ReLU       b(i, j) = -log(1 + (S_i - S_j)^2)"""
    kind = "bias"
    def __init__(self, variant):
        self.variant = variant

    def tensors(self, cfg):
        L, NH, C = cfg.num_layers, cfg.num_heads, cfg.channels
        shapes = {"cable_wb": (L, NH, C), "cable_bb": (L, NH)}
        if self.variant == "cable":
            shapes.update({"cable_ww": (L, NH, C), "cable_bw": (L, NH)})
        return shapes

    def bias(self, model, l, h, ev, pos):
        a = h @ model.cable_wb[l].T + model.cable_bb[l]                  # (B, T, NH)
        g = F.softplus(a) if self.variant == "cable_v1" else F.relu(a)   # softplus: x itself above 20, as the trainer's
        S = -torch.cumsum(g, dim=1).transpose(1, 2)                      # (B, NH, T)
        diff = S[:, :, :, None] - S[:, :, None, :]                       # S_i - S_j
        if self.variant == "cable":
            w = (h @ model.cable_ww[l].T + model.cable_bw[l]).transpose(1, 2)
            return w[:, :, :, None] * diff
        if self.variant == "kcable":
            return -torch.log(1 + diff * diff)
        return diff


class Cope(Encoding):
    """CoPE, contextual position encoding (Golovneva et al. 2024), transcribed from the official
    code, facebookresearch/RAM projects/cope/src/cope/context_position.py (commit eff93c7),
    ContextPosSelfAttn.forward with its defaults (gates from the attention's own keys, the sum
    divided by sqrt(hs)): each key's position is the sum of the gates sigmoid(q.k / sqrt(hs))
    from it up to the query, clamped at P - 1; q.E is interpolated between the position's
    floor and ceil. E is `cope_e` (L, P, hs), the official pos_emb (1, hs, P) transposed per
    layer; P = maxT + 1 (the official block_size + 1), zeros at the start (the trainer's
    initialization)."""
    kind = "attn"
    @staticmethod
    def tensors(cfg):
        return {"cope_e": (cfg.num_layers, cfg.max_seq_len + 1, cfg.channels // cfg.num_heads)}

    def score_bias(self, model, l, q, k, pos):
        T, hs = q.shape[2], q.shape[3]
        npos = model.cfg.max_seq_len + 1                                  # :69-73
        pos_emb = model.cope_e[l].T                                       # :76-78, (hs, npos)
        attn_mask = torch.ones(T, T, dtype=q.dtype, device=q.device).tril()
        gate_logits = q @ k.transpose(-1, -2)                             # :99-101
        gates = torch.sigmoid(gate_logits / math.sqrt(hs))                # :102
        gates = gates * attn_mask                                         # :103-104
        positions = gates.flip(-1).cumsum(dim=-1).flip(-1)                # :105
        positions = positions.clamp(max=npos - 1)                         # :106
        pos_logits_fixed = q @ pos_emb                                    # :111
        positions_ceil = positions.ceil().long()                          # :114
        positions_floor = positions.floor().long()                        # :115
        pos_logits_ceil = pos_logits_fixed.gather(-1, positions_ceil)     # :116
        pos_logits_floor = pos_logits_fixed.gather(-1, positions_floor)   # :117
        pos_ceil_weight = positions - positions_floor                     # :120
        pos_logits = pos_logits_ceil * pos_ceil_weight + pos_logits_floor * (1 - pos_ceil_weight)  # :121-123
        # :137-139 adds pos_logits to q.k and divides the sum by sqrt(hs); the scores here
        # are q.k / sqrt(hs) already
        return pos_logits / math.sqrt(hs)


class TransformerXL(Encoding):
    """Transformer-XL's relative encoding as the DAPE repository computes it
    (chuanyang-Zheng/DAPE, megatron/model/positional_embeddings.py, PositionalEmbedding
    :710-726 and RelativePositionalEncodingLayer :727-789, its scale_factor 1/sqrt(hs) from
    megatron/model/transformer.py:462-468, called instead of the scores at :609-610),
    transcribed here with its rel-shift on the full (T, T) matrices:
      AC = (q + r_w) k^T, BD = (q + r_r) (W_r R(pos_seq))_h^T with pos_seq = T-1, ..., 0,
      BD rel-shifted so that BD[i, j] uses R(i - j); scores = (AC + BD) / sqrt(hs),
    R(n) = [sin(n w), cos(n w)], w = 1 / 10000^(arange(0, C, 2) / C); r_w, r_r (NH, hs) and
    W_r (C, C, no bias: r_net) per layer. No position embedding."""
    kind = "attn"
    @staticmethod
    def tensors(cfg):
        L, NH, C = cfg.num_layers, cfg.num_heads, cfg.channels
        return {"txl_wr": (L, C, C), "txl_rw": (L, NH, C // NH), "txl_rr": (L, NH, C // NH)}

    @staticmethod
    def rel_shift(x):
        """_rel_shift (:743-756) on the last two axes (the official's first two): a zero
        column in front, the (T, T + 1) rows read as (T + 1, T), the first dropped."""
        T1, T2 = x.shape[-2:]
        zero_pad = torch.zeros(*x.shape[:-1], 1, dtype=x.dtype, device=x.device)
        x_padded = torch.cat([zero_pad, x], dim=-1).view(*x.shape[:-2], T2 + 1, T1)
        return x_padded[..., 1:, :].reshape(x.shape)

    def score_bias(self, model, l, q, k, pos):
        B, NH, T, hs = q.shape
        C = model.cfg.channels
        pos_seq = torch.arange(T - 1, -1, -1.0, dtype=q.dtype, device=q.device)              # :761
        inv_freq = 1 / (10000 ** (torch.arange(0.0, C, 2.0, dtype=q.dtype, device=q.device) / C))  # :716
        sinusoid_inp = torch.outer(pos_seq, inv_freq)                                           # :720
        pos_emb = torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)                   # :721
        rw_head_q = q + model.txl_rw[l][None, :, None, :]                                       # :772
        AC = rw_head_q @ k.transpose(2, 3)                                                      # :773
        rr_head_q = q + model.txl_rr[l][None, :, None, :]                                       # :774
        r_head_k = (pos_emb @ model.txl_wr[l].T).view(T, NH, hs)                                # :775-776
        BD = torch.einsum("bnid,jnd->bnij", rr_head_q, r_head_k)                                # :778
        BD = self.rel_shift(BD)                                                                 # :779
        # :785 scales AC + BD by 1/sqrt(hs); the scores here are q.k / sqrt(hs) already, so
        # this term is the rest: AC - q k^T = r_w k^T, and BD
        return (AC - q @ k.transpose(2, 3) + BD) * (1 / math.sqrt(hs))


class ComplexOrder(Encoding):
    """Complex-order embeddings (Wang et al. 2020) in their official language model's complex
    network (iclr-complex-order/complex-order, LANGUAGE MODELING/pytorch-complex/
    complex_mem_transformer.py; pe/complex_order.h says where this differs): x = wte[token]
    e^{i p w}, p = t + 1, w [C] one frequency per channel (schema 2, :792-809); the real and
    imaginary parts as two residual streams of GPT-2 blocks, the imaginary one with tensors of
    its own (complex_qkvw, ...) and the real one's ln1; scores |q k| / sqrt(hs) of the complex
    q = q_re + i q_im, k likewise (no conjugate), one softmax for both streams' values
    (:293-339, without the Transformer-XL terms, b = q_re.k_im + q_im.k_re); the classifier
    reads sqrt(lnf(x_re)^2 + complex_lnf(x_im)^2) / 1.5 (:903)."""
    kind = "attn"
    stream_prefix = COMPLEX_PREFIX

    @staticmethod
    def tensors(cfg):
        gpt2 = gpt2_tensors(cfg)
        return {"complex_w": (cfg.channels,), **{COMPLEX_PREFIX + n: gpt2[n] for n in BLOCK_TENSORS + ["lnfw", "lnfb"]}}

    def embed_streams(self, model, x, pos, training_key):
        phase = (pos[..., None] + 1).to(x.dtype) * model.complex_w
        return [x * torch.cos(phase), x * torch.sin(phase)]

    def scores(self, model, q, k, others):
        (qi, ki), = others
        a = q @ k.transpose(2, 3) - qi @ ki.transpose(2, 3)
        b = q @ ki.transpose(2, 3) + qi @ k.transpose(2, 3)
        return torch.sqrt(a * a + b * b) * (1 / math.sqrt(q.shape[-1]))

    def classifier_input(self, model, zs):
        return torch.sqrt(zs[0] * zs[0] + zs[1] * zs[1]) / COMPLEX_OUT_DIV


class Tisa(Encoding):
    """TISA (the official module, ulmewennberg/tisa model/tisa.py): b(i, j) = f_h(i - j - 1),
    f_h(r) = sum_k a_kh exp(-|c_kh| (mu_kh - r)^2), per layer the official [R, NH] tensors of
    offsets mu, amplitudes a and sharpness c, R = 5 (i, j: the positions)."""
    kind = "bias"
    rp = True

    @staticmethod
    def tensors(cfg):
        shape = (cfg.num_layers, TISA_KERNELS, cfg.num_heads)
        return {"tisa_mu": shape, "tisa_a": shape, "tisa_c": shape}

    def bias(self, model, l, h, ev, pos):
        r = (pos[:, None] - pos[None, :] - 1).to(h.dtype)  # (T, T); above the diagonal masked anyway
        mu, a, c = (t[l][:, :, None, None] for t in (model.tisa_mu, model.tisa_a, model.tisa_c))  # (R, NH, 1, 1)
        return (a * torch.exp(-c.abs() * (mu - r) ** 2)).sum(0)


class Shaw(Encoding):
    """Relative position representations (Shaw et al. 2018) as tensor2tensor computes them
    (common_attention.py dot_product_attention_relative :1739-1827): per layer two tables a^K,
    a^V (k + 1, hs) shared by the heads, row r of the clipped distance r = min(pos_i - pos_j, k)
    (the official [2k + 1, hs] tables' row k - r); the scores gain q_i . a^K[r] / sqrt(hs) (q
    scaled for both terms), the output sum_j P_ij a^V[r]; keys only (shaw_values 0): no a^V.
    Computed here as the trainer does, a row's k + 1 dot products gathered by row, its
    probabilities summed by row (python/test_model.py holds it to a transcription of the
    official module)."""
    kind = "attn"
    rp = True

    @staticmethod
    def tensors(cfg):
        shape = (cfg.num_layers, cfg.shaw_k + 1, cfg.channels // cfg.num_heads)
        return {"shaw_ak": shape, "shaw_av": shape} if cfg.shaw_values else {"shaw_ak": shape}

    @staticmethod
    def rows(model, pos):
        """(B, 1, T, T) the table row of every pair, min(pos_i - pos_j, k) (0 above the diagonal)."""
        return (pos[:, :, None] - pos[:, None, :]).clamp(min=0, max=model.cfg.shaw_k)[:, None]

    def score_bias(self, model, l, q, k, pos):
        g = q @ model.shaw_ak[l].T * (1 / math.sqrt(q.shape[-1]))   # (B, NH, T, k + 1): each row's key term
        return g.gather(-1, self.rows(model, pos).expand(*g.shape[:2], -1, -1))

    def value_term(self, model, l, att, pos):
        if not model.cfg.shaw_values:
            return None
        c = torch.zeros(*att.shape[:3], model.cfg.shaw_k + 1, dtype=att.dtype, device=att.device)
        c = c.scatter_add(-1, self.rows(model, pos).expand_as(att), att)  # each row's probabilities summed by table row
        return c @ model.shaw_av[l]


ENCODINGS = {
    "learned": Learned(), "sinusoidal": Sinusoidal(), "rope": Rope(), "nope": Encoding(),
    "alibi": Alibi(), "t5": T5(), "kerple": Kerple(), "fire": Fire(),
    "cable_v1": Cable("cable_v1"), "cable_nw": Cable("cable_nw"), "cable": Cable("cable"), "kcable": Cable("kcable"),
    "xpos": Xpos(), "sandwich": Sandwich(), "kerple_power": KerplePower(), "cope": Cope(), "txl": TransformerXL(),
    "tisa": Tisa(), "shape": Shape(), "cape": Cape(), "bipe_rope": BipeRope(), "bipe_alibi": BipeAlibi(),
    "shaw": Shaw(), "floater": Floater(), "complex_order": ComplexOrder(),
}
# header word 8: the PE id, the index in this list (the registry's order, llmc/pe_list.h)
PE_NAMES = list(ENCODINGS)
# the encodings with randomized positions, and those that draw once per forward pass (the
# embeddings) rather than once per layer (llmc/pe.h rp_draws)
RP_SUPPORTED = tuple(name for name, e in ENCODINGS.items() if e.rp)
# the encodings that take rope's frequency table (llmc/pe.h rope_table_supported: not xpos)
ROPE_TABLE_PES = ("rope",)
RP_ONE_DRAW = tuple(name for name, e in ENCODINGS.items() if e.rp and e.kind == "embed")

# ----------------------------------------------------------------------------
# the model


class GPT(nn.Module):
    """GPT-2 (pre-layernorm, tanh GELU, tied classifier) with the parameters as the
    checkpoint stores them: one tensor per name, layers stacked on the first axis."""

    def __init__(self, cfg, tensors=None, dtype=torch.float32):
        super().__init__()
        self.cfg = cfg
        self.pe = ENCODINGS[cfg.pe]
        self.cape = CapeAugment()  # cape's augmentation in training (a run setting, not the checkpoint's)
        for name, shape in checkpoint_layout(cfg):
            if tensors is None:
                value = torch.zeros(shape, dtype=dtype)
            elif isinstance(tensors[name], torch.Tensor):
                value = tensors[name].detach().to(dtype).clone()
            else:
                value = torch.tensor(np.array(tensors[name]), dtype=dtype)
            if tuple(value.shape) != tuple(shape):
                raise ValueError("tensor %s has shape %s, expected %s" % (name, tuple(value.shape), shape))
            self.register_parameter(name, nn.Parameter(value))

    @classmethod
    def from_checkpoint(cls, path, dtype=torch.float32):
        """A model from one of the trainer's checkpoints (fp32 or bf16)."""
        cfg, tensors = read_checkpoint(path)
        return cls(cfg, tensors, dtype)

    @classmethod
    def from_folder(cls, folder, dtype=torch.float32):
        """A model from a folder written by export_hf.py for an encoding Hugging Face's GPT-2
        does not have: config.json (this Config and the encoding's revision) and
        pytorch_model.bin (a state dict). Raises ValueError naming the file and the problem
        for a damaged one (not JSON, no valid configuration, a truncated or corrupt state
        dict, missing or misshapen tensors, NaN or infinite values)."""
        config_path, weights_path = os.path.join(folder, "config.json"), os.path.join(folder, "pytorch_model.bin")
        try:
            with open_regular(config_path) as f:
                config = json.loads(f.read())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError("%s is not valid JSON (%s)" % (config_path, e)) from None
        try:
            cfg = Config(**config["config"])
        except (KeyError, TypeError) as e:
            raise ValueError("%s: no valid \"config\" entry with the fields %s (%s)"
                             % (config_path, ", ".join(f.name for f in fields(Config)), e)) from None
        check_config(cfg, config_path)
        revision = config.get("pe_revision", 0)  # folders exported before revisions existed hold revision 0
        if revision != ENCODINGS[cfg.pe].revision:
            raise ValueError("%s holds revision %s of PE '%s', this model file implements revision %d"
                             % (folder, revision, cfg.pe, ENCODINGS[cfg.pe].revision))
        with open_regular(weights_path) as f:
            try:
                tensors = torch.load(f, map_location="cpu", weights_only=True)
            except Exception as e:  # the zip reader's and the unpickler's errors, whatever the damage
                raise ValueError("%s cannot be read as a state dict, truncated or corrupt (%s: %s)"
                                 % (weights_path, type(e).__name__, e)) from None
        if not isinstance(tensors, dict) or not all(isinstance(t, torch.Tensor) for t in tensors.values()):
            raise ValueError("%s is not a state dict (a dict of tensors)" % weights_path)
        missing = [name for name, _ in checkpoint_layout(cfg) if name not in tensors]
        if missing:
            raise ValueError("%s lacks the tensor(s) %s of this configuration" % (weights_path, ", ".join(missing)))
        for name, shape in checkpoint_layout(cfg):
            if tuple(tensors[name].shape) != tuple(shape):
                raise ValueError("%s: tensor %s has shape %s, expected %s" % (weights_path, name, tuple(tensors[name].shape), shape))
        check_finite({name: t.float().numpy() for name, t in tensors.items()}, weights_path)
        return cls(cfg, tensors, dtype)

    def save_checkpoint(self, path, version=CHECKPOINT_FP32):
        """Writes the parameters as a checkpoint of the C trainers (e.g. to evaluate at long lengths there)."""
        write_checkpoint(path, self.cfg, {name: p.detach().cpu().float().numpy() for name, p in self.named_parameters()}, version)

    def draw_positions(self, T, key):
        """The randomized positions of a forward pass over T tokens with this key (llmc/pe.h
        rp_key; the trainer's driver keys a training step as rp_key(1, step, 0)), as the trainer
        draws them from the checkpoint's range and seed: (draws, T), one row per layer, or one
        for the embedding (learned, sinusoidal)."""
        cfg = self.cfg
        if cfg.rp_len == 0:
            raise ValueError("the model has no randomized positions (header word %d is 0)" % HEADER_RP_LEN)
        if T > cfg.rp_len:
            raise ValueError("randomized positions: T = %d tokens cannot be drawn from the range [0, %d)" % (T, cfg.rp_len))
        draws = 1 if cfg.pe in RP_ONE_DRAW else cfg.num_layers
        return np.array([rp_draw(T, cfg.rp_len, cfg.rp_seed, key, d) for d in range(draws)], dtype=np.int64)

    def forward(self, idx, targets=None, pe_eval=None, positions=None, given_positions=None, training_key=None):
        """Logits (B, T, Vp) and the mean loss (None without targets; over the targets that are not
        -1, TARGET_UNSCORED) of token ids idx (B, T),
        under the evaluation variant pe_eval (a PEEval; None: the encoding as trained), at the
        positions `positions` (None: 0..T-1; a model with randomized positions: an array
        (draws, T) such as draw_positions makes, sorted rows within [0, rp_len)) or, for an
        encoding that takes positions, at given_positions (B, T): each row's own, >= 0 and never
        decreasing along the row (positions as data, llmc/model.h: PoSE's chunks, ...); then the
        encoding's own positions (SHAPE's offsets) of a training pass keyed training_key (the
        trainer's draw key of the pass), or of an evaluation (None)."""
        cfg = self.cfg
        B, T = idx.shape
        C, NH, V = cfg.channels, cfg.num_heads, cfg.vocab_size
        hs = C // NH
        if idx.min() < 0 or idx.max() >= V or (targets is not None and (targets.min() < TARGET_UNSCORED or targets.max() >= V)):
            raise ValueError("token id out of range [0, %d)" % V)
        draws = 1 if cfg.pe in RP_ONE_DRAW else cfg.num_layers
        if given_positions is not None:
            pos = torch.as_tensor(np.asarray(given_positions), dtype=torch.long, device=idx.device)
            if not self.pe.rp or tuple(pos.shape) != (B, T) or pos.min() < 0 or (pos[:, 1:] < pos[:, :-1]).any():
                raise ValueError("given positions: (%d, %d) values >= 0, never decreasing along a row, of an encoding that "
                                 "takes positions, got %s for PE '%s'" % (B, T, tuple(pos.shape), cfg.pe))
            pos, span = pos.expand(draws, B, T), int(pos.max()) + 1
        elif positions is None:
            pos, span = torch.arange(T, device=idx.device).expand(draws, B, T), T
        else:
            pos, span = torch.as_tensor(np.asarray(positions), dtype=torch.long, device=idx.device), cfg.rp_len
            if cfg.rp_len == 0 or tuple(pos.shape) != (draws, T) or (pos[:, 1:] <= pos[:, :-1]).any() or \
                    pos.min() < 0 or pos.max() >= cfg.rp_len:
                raise ValueError("positions: (%d, %d) sorted, distinct values in [0, rp_len = %d) of a model with "
                                 "randomized positions, got %s" % (draws, T, cfg.rp_len, tuple(pos.shape)))
            pos = pos[:, None, :].expand(draws, B, T)
        own = self.pe.own_positions(self, idx, pos, training_key)
        span += int((own - pos).max()) if own is not pos else 0
        pos = self.last_positions = own  # (draws, B, T): what the layers read (the trainer's model->positions)
        if span > self.pe.max_length(cfg) and given_positions is not None:
            raise ValueError("PE %s cannot take position %d (its range ends at %d)" % (cfg.pe, span - 1, self.pe.max_length(cfg)))
        if T > self.pe.max_length(cfg):
            if cfg.pe == "learned":
                raise ValueError("PE learned cannot process T = %d tokens: its position table ends at maxT = %d" % (T, cfg.max_seq_len))
            raise ValueError("PE %s cannot process T = %d tokens: its scale factors leave the floating-point range beyond %d"
                             % (cfg.pe, T, self.pe.max_length(cfg)))
        ev = pe_eval or PEEval()
        if ev.variant not in self.pe.eval_variants:
            raise ValueError("no evaluation variant '%s' for PE '%s' (it has: %s)" % (ev.variant, cfg.pe, ", ".join(self.pe.eval_variants)))
        ev = PEEval(ev.variant, ev.rope_factor, ev.train_len or cfg.train_len or cfg.max_seq_len)
        if ev.train_len < 2 or ev.rope_factor < 1:
            raise ValueError("evaluation variant: training length %d (at least 2) and RoPE factor %g (at least 1)"
                             % (ev.train_len, ev.rope_factor))
        causal = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()
        xs = self.pe.embed_streams(self, self.wte[idx], pos[0], training_key)  # GPT-2's stream (complex_order: two)
        def heads(t):
            return t.view(B, T, NH, hs).transpose(1, 2)  # (B, NH, T, hs)
        for l in range(cfg.num_layers):
            ws = [{n: self.stream_tensor(st, n)[l] for n in BLOCK_TENSORS} for st in range(len(xs))]
            hn = [F.layer_norm(x, (C,), self.ln1w[l], self.ln1b[l], LAYERNORM_EPS) for x in xs]  # every stream's ln1 is GPT-2's
            pos_l = pos[l if draws > 1 else 0]
            qkv = [[heads(t) for t in self.pe.project(self, l, *(h @ w["qkvw"].T + w["qkvb"]).split(C, dim=2), pos_l)]
                   for h, w in zip(hn, ws)]
            q, k, v = qkv[0]
            q, k = by_row(pos_l, lambda rows, p: self.pe.rotate(self, l, q[rows], k[rows], ev, p, span))
            scores = self.pe.scores(self, q, k, [(qs, ks) for qs, ks, _ in qkv[1:]])
            h = hn[0]
            def row_bias(rows, p):
                b = self.pe.bias(self, l, h[rows], ev, p)
                return None if b is None else torch.broadcast_to(b, (h[rows].shape[0], NH, T, T))
            for bias in (by_row(pos_l, row_bias), self.pe.score_bias(self, l, q, k, pos_l)):
                if bias is not None:
                    scores = scores + bias
            att = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
            value = self.pe.value_term(self, l, att, pos_l)
            for st, w in enumerate(ws):  # each stream: its values, projection, MLP and residuals
                y = att @ qkv[st][2]
                y = (y if value is None else y + value).transpose(1, 2).reshape(B, T, C)
                x = xs[st] + y @ w["attprojw"].T + w["attprojb"]
                h = F.layer_norm(x, (C,), w["ln2w"], w["ln2b"], LAYERNORM_EPS)
                h = F.gelu(h @ w["fcw"].T + w["fcb"], approximate="tanh")
                xs[st] = x + h @ w["fcprojw"].T + w["fcprojb"]
        zs = [F.layer_norm(x, (C,), self.stream_tensor(st, "lnfw"), self.stream_tensor(st, "lnfb"), LAYERNORM_EPS) for st, x in enumerate(xs)]
        x = self.pe.classifier_input(self, zs)
        logits = x @ self.wte.T  # (B, T, Vp); the padded entries take no part in the loss
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits[..., :V].reshape(B * T, V), targets.reshape(B * T), ignore_index=TARGET_UNSCORED)
        return logits, loss

    def stream_tensor(self, st, name):
        """Residual stream st's tensor of GPT-2's name (a block's or lnf's): GPT-2's (st 0), or
        the second stream's, under the encoding's stream_prefix (complex_order's imaginary one)."""
        return getattr(self, name if st == 0 else self.pe.stream_prefix + name)

    def flat_grads(self):
        """Every parameter's gradient concatenated in checkpoint order (the trainer's grads_memory)."""
        return torch.cat([getattr(self, name).grad.reshape(-1) for name, _ in checkpoint_layout(self.cfg)])
