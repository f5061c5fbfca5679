"""
The PyTorch model (python/model.py) and the exporter (python/export_hf.py) against the C
trainer, for every encoding, in float64 (make test-python):

  1. `build/gradcheck_<pe> torch-reference` (the fp64 build of test_gpt2.c) writes a tiny
     model's checkpoint (fp32) and one batch's logits, loss and every parameter gradient;
     python/model.py loads the checkpoint in float64 and must give the same logits at
     every position, the same loss and the same gradient of every parameter tensor;
  2. the same after a round trip through a bf16 checkpoint (version 5) written here, which
     the C trainer and python/model.py both read;
  3. the same under each evaluation variant the encoding has (rope: the three RoPE scaling
     methods static at s = 4 and dynamic, s = T / L = 2; xpos: blockwise causal attention;
     training length L = T / 2), from `torch-reference PREFIX MODEL.bin VARIANT`; each
     variant must also change the logits;
  4. randomized positions (-rp), for every encoding that has them: a new model with
     positions from [0, 2T) and one fixed draw (`torch-reference PREFIX - rp`); the PyTorch
     model's own draw (model.draw_positions, the trainer's generator ported) must give the
     C trainer's positions, and with them the same logits, loss and gradients; and given
     positions, each row its own (`torch-reference PREFIX - pos`: shifted, in two chunks,
     gapped), fed to the PyTorch model as given_positions: the same logits, loss and gradients;
  4b. rope's frequency table (rope only): checkpoints written here with header words 15-17
     set (base 500000, truncation at 100, resonance, all three), read by the C trainer and
     model.py, each alone and all three under every RoPE scaling variant (YaRN's among them),
     the base with NTK and YaRN and resonance with YaRN too; each must change the logits; the
     base 10000 written is the default file, word 15 = 0;
  5. answer-only data: two of every three targets -1 (TARGET_UNSCORED), the loss the mean
     over the others (`torch-reference PREFIX MODEL.bin mask`), for the first encoding: the
     same loss and gradients, and another loss than the plain one;
  6. the export: for `learned`, the Hugging Face GPT-2 folder, run by an independent
     re-implementation of Hugging Face's GPT-2 forward (Conv1D: x @ W + b) from the
     exported state dict, must give the C trainer's logits; for the other encodings the
     exported folder, loaded through its own copy of model.py, must too;
  7. bad checkpoints (truncated, wrong magic, wrong version, a DAPE model in header words 9
     and 10, another revision of the encoding's definition in word 11, randomized positions
     on an encoding without them in word 12, a negative training length in word 14, rope's
     frequency table on another encoding in word 15, resonance 2 in word 17, shaw's k on
     another encoding or k = 0 on shaw in word 19, floater's refresh R on another encoding or
     R = 0 on floater in word 21) and variants the encoding does not have are refused with a
     clear message;
  8. the tools hold the trainer's rules on bad input: export_hf.py refuses a checkpoint with
     a NaN and a FIFO (one line on stderr naming the file, exit status 1, within seconds);
     GPT.from_folder refuses a config.json that is not JSON or holds no valid configuration and
     a truncated, incomplete or NaN-holding pytorch_model.bin with a ValueError naming the file;
     write_checkpoint leaves a user's "<name>.tmp" alone and no temporary file behind;
  9. with COPE_OFFICIAL=path/to/context_position.py (facebookresearch/RAM's
     projects/cope/src/cope/context_position.py, not part of this repository): the official
     CoPE layer against model.py's transcription on random q, k, v, E (3 heads of 8, T = 50,
     P = 21, so positions clamp), in float64: the attention output and the gradients of q,
     k, v and E;
 10. with TISA_OFFICIAL=path/to/tisa.py (ulmewennberg/tisa's model/tisa.py, not part of this
     repository): the official Tisa module against model.py's Tisa (3 heads, T = 50, offsets
     within the sequence), in float64: the bias of every pair j <= i and the gradients of the
     offsets, amplitudes and sharpness;
 11. with SHAPE_OFFICIAL=path/to/embeddings.py (butsugiri/shape's onmt/modules/embeddings.py, its
     onmt imports stubbed): the official PositionalEncoding against model.py's Shape at
     evaluation (offset K) and its table at every training offset, within 1e-4 (the official
     table is float32, model.py's double);
 12. shaw: a keys-only checkpoint (header word 20 = 0, no a^V) written here, read by the C
     trainer and model.py: the same logits, loss and gradients, other logits than with a^V;
     and tensor2tensor's dot_product_attention_relative, transcribed from TensorFlow into
     PyTorch (t2t_relative_attention: common_attention.py at bafdc1b, line by line), against
     model.py's Shaw on random q, k, v and official [2k + 1, hs] tables (3 heads of 8, T = 40,
     k = 7, so that distances clip; keys and values, and keys only), in float64: the attention
     output and the gradients of q, k, v and both tables (the official rows of keys after the
     query, k + 1..2k, get none).
 13. floater: with zero dynamics and P0 = 0 the sinusoidal model (logits bit for bit), with zero
     dynamics P0 folded into the qkv bias; the transcription of its official flow and solver
     (FloaterOfficial: flow_funcs.py's Linear_t and flow_func_linear, flow_transformer.py's grid
     and odeint call, the authors' torchdiffeq's rk4 and fixed-grid solver) against model.py's
     Floater in float64: the positions of every layer's q, k, v and the gradients of every
     official tensor through the solver.

Tolerance: every compared tensor must satisfy max |torch - C| <= 1e-9 max |C| + 1e-14:
both sides compute in float64 from the same fp32 (or bf16) parameters and differ only in
the order of sums (measured: below 1e-13 relative to the tensor's largest entry); a float32
rounding anywhere would show as 1e-7. The absolute 1e-14 is for a gradient that is zero in
exact arithmetic, FIRE's b2 (a per-head constant bias cancels in the softmax), where both
sides hold rounding noise of 1e-17.

usage: python3 python/test_model.py [BUILD_DIR] [PE ...]   (default: build, every encoding)
Without PyTorch the test prints one line and succeeds.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("test_model: PyTorch not found (Debian: apt-get install python3-torch), skipped")
    sys.exit(0)
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_hf  # noqa: E402
import model as M  # noqa: E402

TOL = 1e-9
ATOL = 1e-14
TORCH_REF_MAGIC = 20240329
failures = 0


def check(what, got, want, tol=TOL):
    """max |got - want| <= tol * max |want| + ATOL over the tensor, printed as the error
    relative to the tensor's largest entry next to the tolerance relative to it."""
    global failures
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    scale = float(np.max(np.abs(want)))
    err = float(np.max(np.abs(got - want)))
    ok = got.shape == want.shape and err <= tol * scale + ATOL
    print("  %-52s %s  (%.3g, tolerance %.3g; max |C| %.2g)" % (what, "ok  " if ok else "FAIL", err / scale,
                                                                (tol * scale + ATOL) / scale, scale))
    if not ok:
        failures += 1


def expect_error(what, fn, fragment):
    """fn must raise ValueError whose message contains fragment."""
    global failures
    try:
        fn()
        msg = None
    except ValueError as e:
        msg = str(e)
    ok = msg is not None and fragment in msg
    print("  %-52s %s  (%s)" % (what, "ok  " if ok else "FAIL", msg))
    if not ok:
        failures += 1


def read_reference(path, cfg):
    """The C trainer's PREFIX_ref.bin (test_gpt2.c: write_torch_reference): inputs, targets,
    logits, loss, gradients, the evaluation variant they were computed under, the positions
    (draws, B, T), drawn or given (None: 0..T-1), with the draws' key, and cape's augmentation
    (words 16-18: a run setting, which the checkpoint does not hold)."""
    data = open(path, "rb").read()
    h = np.frombuffer(data[:1024], dtype=np.int32)
    assert h[0] == TORCH_REF_MAGIC and h[1] == 1, "%s: not a reference file" % path
    B, T, real = int(h[2]), int(h[3]), {4: np.float32, 8: np.float64}[int(h[5])]
    num_params = int(np.frombuffer(data[32:40], dtype=np.uint64)[0])
    pe_eval = M.PEEval(M.PE_EVAL_NAMES[h[6]], float(np.frombuffer(data[40:48], dtype=np.float64)[0]), int(h[7]))
    key, draws = int(np.frombuffer(data[48:56], dtype=np.uint64)[0]), int(h[14])
    cape = M.CapeAugment(*(float(v) for v in np.frombuffer(data[64:72], dtype=np.float32)), int(h[18]))
    off = 1024
    def take(dtype, n):
        nonlocal off
        a = np.frombuffer(data, dtype=dtype, count=n, offset=off)
        off += n * np.dtype(dtype).itemsize
        return a
    x = take(np.int32, B * T).reshape(B, T)
    y = take(np.int32, B * T).reshape(B, T)
    logits = take(real, B * T * cfg.padded_vocab_size).reshape(B, T, cfg.padded_vocab_size)
    loss = take(real, 1)[0]
    grads = take(real, num_params)
    positions = take(np.int32, draws * B * T).reshape(draws, B, T) if draws > 0 else None
    assert off == len(data), "%s: %d bytes, read %d" % (path, len(data), off)
    return x, y, logits, loss, grads, pe_eval, (positions, key), cape


def c_reference(build, pe, prefix, checkpoint=None, variant=None):
    cmd = [os.path.join(build, "gradcheck_" + pe), "torch-reference", prefix, checkpoint or "-"] + ([variant] if variant else [])
    subprocess.run(cmd, check=True)


def compare_model(label, model, ref, positions=None, given_positions=None):
    """Logits, loss and every parameter gradient of the PyTorch model against the C trainer's,
    under the reference's evaluation variant, at the positions drawn or given (None: 0..T-1),
    in a training pass of the reference's key (the encoding's own positions: SHAPE's offsets);
    the positions the layers read equal the trainer's where the reference holds them."""
    global failures
    x, y, logits, loss, grads, pe_eval, (stored, key), model.cape = ref
    model.zero_grad()
    out, tloss = model(torch.tensor(x, dtype=torch.long), torch.tensor(y, dtype=torch.long), pe_eval=pe_eval,
                       positions=positions, given_positions=given_positions, training_key=key)
    if stored is not None:
        ok = tuple(model.last_positions.shape) == stored.shape and (model.last_positions.cpu().numpy() == stored).all()
        print("  %-52s %s" % ("%s: the positions the layers read" % label, "ok  " if ok else "FAIL"))
        failures += 0 if ok else 1
    tloss.backward()
    check("%s: logits (B x T x Vp)" % label, out.detach().numpy(), logits)
    check("%s: loss" % label, tloss.item(), loss)
    offset = 0
    for name, shape in M.checkpoint_layout(model.cfg):
        n = int(np.prod(shape))
        grad = getattr(model, name).grad  # None where no gradient reached the tensor: zeros
        check("%s: d %s" % (label, name), np.zeros(n) if grad is None else grad.numpy().reshape(-1), grads[offset:offset + n])
        offset += n
    assert offset == len(grads)


def hf_gpt2_logits(folder, idx):
    """Hugging Face GPT-2's forward (modeling_gpt2: GPT2LMHeadModel, eval mode), written
    from the exported folder alone: Conv1D is x @ W + b with W as [in, out], the tanh GELU
    ("gelu_new"), attention scaled by 1/sqrt(head size), the classifier tied to wte."""
    cfg = json.load(open(os.path.join(folder, "config.json")))
    sd = {k: v.to(torch.float64) for k, v in torch.load(os.path.join(folder, "pytorch_model.bin")).items()}
    C, NH, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    assert cfg["activation_function"] == "gelu_new" and cfg["model_type"] == "gpt2"
    B, T = idx.shape

    def ln(x, p):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + eps) * sd[p + ".weight"] + sd[p + ".bias"]

    def conv1d(x, p):
        return x @ sd[p + ".weight"] + sd[p + ".bias"]

    def gelu_new(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    x = sd["transformer.wte.weight"][idx] + sd["transformer.wpe.weight"][torch.arange(T)]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(cfg["n_layer"]):
        p = "transformer.h.%d." % i
        q, k, v = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn").split(C, dim=2)
        q, k, v = (t.reshape(B, T, NH, C // NH).permute(0, 2, 1, 3) for t in (q, k, v))
        w = q @ k.transpose(-1, -2) / (C // NH) ** 0.5
        w = torch.where(mask, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        a = (torch.softmax(w, dim=-1) @ v).permute(0, 2, 1, 3).reshape(B, T, C)
        x = x + conv1d(a, p + "attn.c_proj")
        x = x + conv1d(gelu_new(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    return ln(x, "transformer.ln_f") @ sd["lm_head.weight"].T


def check_hf_folder(folder, cfg, ref):
    global failures
    sd = torch.load(os.path.join(folder, "pytorch_model.bin"))
    C, L, V = cfg.channels, cfg.num_layers, cfg.vocab_size
    want = {"transformer.wte.weight": (V, C), "transformer.wpe.weight": (cfg.max_seq_len, C),
            "transformer.ln_f.weight": (C,), "transformer.ln_f.bias": (C,), "lm_head.weight": (V, C)}
    for i in range(L):
        p = "transformer.h.%d." % i
        want.update({p + "ln_1.weight": (C,), p + "ln_1.bias": (C,), p + "ln_2.weight": (C,), p + "ln_2.bias": (C,),
                     p + "attn.c_attn.weight": (C, 3 * C), p + "attn.c_attn.bias": (3 * C,),
                     p + "attn.c_proj.weight": (C, C), p + "attn.c_proj.bias": (C,),
                     p + "mlp.c_fc.weight": (C, 4 * C), p + "mlp.c_fc.bias": (4 * C,),
                     p + "mlp.c_proj.weight": (4 * C, C), p + "mlp.c_proj.bias": (C,)})
    got = {k: tuple(v.shape) for k, v in sd.items()}
    ok = got == want
    print("  %-52s %s  (%d tensors)" % ("hf: state dict names and Conv1D shapes", "ok  " if ok else "FAIL", len(got)))
    failures += 0 if ok else 1
    config = json.load(open(os.path.join(folder, "config.json")))
    ok = (config["vocab_size"], config["n_positions"], config["n_embd"], config["n_layer"], config["n_head"]) == \
         (V, cfg.max_seq_len, C, L, cfg.num_heads)
    print("  %-52s %s" % ("hf: config.json shape", "ok  " if ok else "FAIL"))
    failures += 0 if ok else 1
    x, _, logits, _, _, _, _, _ = ref
    check("hf: GPT-2 forward of the export, logits (B x T x V)",
          hf_gpt2_logits(folder, torch.tensor(x, dtype=torch.long)).numpy(), logits[..., :V])


def check_model_folder(folder, ref):
    """The exported folder, loaded with its own copy of model.py (not this directory's)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("exported_model", os.path.join(folder, "model.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.GPT.from_folder(folder, dtype=torch.float64)
    x, _, logits, _, _, _, (_, key), model.cape = ref
    with torch.no_grad():  # the reference's training pass (the encoding's own positions: SHAPE's offsets)
        out, _ = model(torch.tensor(x, dtype=torch.long), training_key=key)
    check("export: folder's model.py, logits (B x T x Vp)", out.numpy(), logits)
    config = json.load(open(os.path.join(folder, "config.json")))
    config["pe_revision"] += 1
    json.dump(config, open(os.path.join(folder, "config.json"), "w"))
    expect_error("export: folder of another revision", lambda: mod.GPT.from_folder(folder), "revision")


def check_variants(build, model, ckpt, prefix, plain):
    """The C trainer and the PyTorch model under each evaluation variant of the encoding; a
    variant must change the logits (else it would test nothing), and one the encoding does not
    have is refused."""
    global failures
    for variant in model.pe.eval_variants[1:]:
        c_reference(build, model.cfg.pe, prefix + "_" + variant, ckpt, variant)
        ref = read_reference(prefix + "_" + variant + "_ref.bin", model.cfg)
        compare_model(variant, model, ref)
        change = float(np.max(np.abs(ref[2] - plain[2]))) / float(np.max(np.abs(plain[2])))
        ok = change > 1e-6
        print("  %-52s %s  (%.3g relative, at least 1e-6)" % ("%s: changes the logits" % variant, "ok  " if ok else "FAIL", change))
        failures += 0 if ok else 1
    other = "bca" if model.cfg.pe != "xpos" else "yarn"
    expect_error("variant %s refused" % other, lambda: model(torch.zeros(1, 4, dtype=torch.long), pe_eval=M.PEEval(other)),
                 "no evaluation variant")


def check_masked(build, model, ckpt, prefix, plain):
    """The loss over the targets that are not -1 (answer-only data) and its gradients."""
    global failures
    c_reference(build, model.cfg.pe, prefix + "_mask", ckpt, "mask")
    ref = read_reference(prefix + "_mask_ref.bin", model.cfg)
    compare_model("two thirds of the targets -1", model, ref)
    change = abs(float(ref[3]) - float(plain[3])) / abs(float(plain[3]))
    ok = change > 1e-6 and (ref[1] == -1).sum() == ref[1].size * 2 // 3
    print("  %-52s %s  (%.3g relative, at least 1e-6)" % ("masked: another loss than the plain one", "ok  " if ok else "FAIL", change))
    failures += 0 if ok else 1


def check_random_positions(build, pe, prefix):
    """A model with randomized positions from [0, 2T) and one draw: the PyTorch model's own draw
    is the trainer's, and with it the logits, loss and gradients are; plain positions change
    the logits."""
    global failures
    c_reference(build, pe, prefix, None, "rp")
    model = M.GPT.from_checkpoint(prefix + "_model.bin", dtype=torch.float64)
    ref = read_reference(prefix + "_ref.bin", model.cfg)
    positions, key = ref[6]
    T = ref[0].shape[1]
    mine = model.draw_positions(T, key)
    own = type(model.pe).own_positions is not M.Encoding.own_positions  # its own positions come on top of the draw
    ok = positions is not None and mine.shape == positions[:, 0].shape and not (mine == np.arange(T)).all() and \
        (own or ((positions == positions[:, :1]).all() and (mine == positions[:, 0]).all()))
    print("  %-52s %s  (%d draw(s) of %d from [0, %d))" % ("rp: draw_positions = the trainer's draw", "ok  " if ok else "FAIL",
                                                            len(mine), T, model.cfg.rp_len))
    failures += 0 if ok else 1
    compare_model("rp", model, ref, mine)
    check_changes_logits("rp: the draw changes the logits", model, ref)


def check_changes_logits(label, model, ref):
    """The model at plain positions 0..T-1 against the reference's logits at other positions:
    they must differ (by more than 1e-6 of the largest), else the positions tested nothing."""
    global failures
    with torch.no_grad():
        plain, _ = model(torch.tensor(ref[0], dtype=torch.long))
    change = float(np.max(np.abs(plain.numpy() - ref[2]))) / float(np.max(np.abs(ref[2])))
    ok = change > 1e-6
    print("  %-52s %s  (%.3g relative, at least 1e-6)" % (label, "ok  " if ok else "FAIL", change))
    failures += 0 if ok else 1


def debug_positions(B, T):
    """The C tests' given positions (llmc/debug_state.h debug_positions): row 0 shifted by 5,
    row 1 in two chunks (t, then t + 11 from the middle on), the others gapped (2t + b)."""
    t = np.arange(T)
    return np.array([t + 5 if b == 0 else t + np.where(t >= T // 2, 11, 0) if b == 1 else 2 * t + b for b in range(B)])


def check_given_positions(build, pe, prefix):
    """A model given positions, each row its own (shifted, in two chunks, gapped: the C tests'
    debug_positions): the logits, loss and gradients at them; they change the logits."""
    global failures
    c_reference(build, pe, prefix, None, "pos")
    model = M.GPT.from_checkpoint(prefix + "_model.bin", dtype=torch.float64)
    ref = read_reference(prefix + "_ref.bin", model.cfg)
    compare_model("given positions", model, ref, given_positions=debug_positions(*ref[0].shape))
    check_changes_logits("given positions change the logits", model, ref)


def check_rope_table(build, model, ckpt, prefix, plain):
    """rope's frequency table (header words 15-17) written into a copy of the checkpoint here,
    read by the C trainer and model.py: the same logits, loss and gradients under each option
    and all three, also under every scaling variant; each changes the logits."""
    global failures
    cfg, tensors = M.read_checkpoint(ckpt)
    hs = cfg.channels // cfg.num_heads  # 8: theta_k = 1, 0.1, 0.01, 0.001; truncation at 100 keeps two, 0.01 -> 2 pi / 1600, 0.001 -> 0
    tables = [("base 500000", dict(rope_base=500000), ["plain", "ntk", "yarn"]), ("truncation 100", dict(rope_truncate=100), ["plain"]),
              ("resonance", dict(rope_resonance=1), ["plain", "yarn"]),
              ("all three", dict(rope_base=500000, rope_truncate=100, rope_resonance=1), list(model.pe.eval_variants))]
    for label, options, variants in tables:
        path = "%s_table_%s.bin" % (prefix, label.replace(" ", "_"))
        M.write_checkpoint(path, M.Config(**dict(cfg.__dict__, **options)), tensors)
        table_model = M.GPT.from_checkpoint(path, dtype=torch.float64)
        for variant in variants:
            c_reference(build, cfg.pe, path[:-4], path, None if variant == "plain" else variant)
            ref = read_reference(path[:-4] + "_ref.bin", table_model.cfg)
            name = "%s%s (hs %d)" % (label, "" if variant == "plain" else " + " + variant, hs)
            compare_model(name, table_model, ref)
            if variant == "plain":
                change = float(np.max(np.abs(ref[2] - plain[2]))) / float(np.max(np.abs(plain[2])))
                ok = change > 1e-6
                print("  %-52s %s  (%.3g relative, at least 1e-6)" % ("%s: changes the logits" % label, "ok  " if ok else "FAIL", change))
                failures += 0 if ok else 1
    path = prefix + "_table_10000.bin"
    M.write_checkpoint(path, M.Config(**dict(cfg.__dict__, rope_base=10000)), tensors)
    ok = open(path, "rb").read() == open(ckpt, "rb").read()
    print("  %-52s %s" % ("base 10000 written: the default file (word 15 = 0)", "ok  " if ok else "FAIL"))
    failures += 0 if ok else 1


def test_bad_files(good, tmp, pe, all_cases):
    """Damaged copies of a good checkpoint must be refused; the revision of the encoding's
    definition for every encoding, the rest (all_cases) once."""
    data = open(good, "rb").read()
    def variant(name, blob):
        path = os.path.join(tmp, name)
        open(path, "wb").write(blob)
        return lambda: M.read_checkpoint(path)
    header = np.frombuffer(data[:1024], dtype=np.int32).copy()
    def with_word(word, value):
        h = header.copy()
        h[word] = value
        return h.tobytes() + data[1024:]
    revision = M.ENCODINGS[pe].revision
    for other in sorted({0, revision + 1} - {revision}):
        expect_error("bad file: revision %d of %s (word 11)" % (other, pe), variant("rev.bin", with_word(11, other)),
                     "holds revision %d of PE '%s'" % (other, pe))
    if pe not in M.RP_SUPPORTED or pe == "learned":  # learned: more positions than rows of wpe
        L = int(header[2]) + 1 if pe == "learned" else 100
        expect_error("bad file: randomized positions [0, %d) on %s (word 12)" % (L, pe), variant("rp.bin", with_word(12, L)),
                     "randomized positions from [0, %d)" % L)
    if pe in M.ROPE_TABLE_PES:
        expect_error("bad file: resonance 2 (word 17)", variant("rr.bin", with_word(17, 2)), "bad RoPE frequency table: base 0 (0 for 10000, or >= 2), "
                     "truncation length 0 (0: off, up to 16777216), resonance 2 (0 or 1)")
    else:
        expect_error("bad file: rope's base on %s (word 15)" % pe, variant("rb.bin", with_word(15, 500000)),
                     "RoPE frequency table options (base 500000, truncation 0, resonance 0) on PE '%s'" % pe)
    if pe == "shaw":
        expect_error("bad file: shaw's k 0 (word 19)", variant("sk.bin", with_word(19, 0)), "bad tables of shaw: clipping distance k 0")
    else:
        expect_error("bad file: shaw's k on %s (word 19)" % pe, variant("sk.bin", with_word(19, 16)), "bad tables of shaw")
    if pe == "floater":
        expect_error("bad file: floater's R 0 (word 21)", variant("fr.bin", with_word(21, 0)), "bad refresh R 0 of floater")
    else:
        expect_error("bad file: floater's R on %s (word 21)" % pe, variant("fr.bin", with_word(21, 400)), "bad refresh R 400 of floater")
    if not all_cases:
        return
    expect_error("bad file: truncated", variant("trunc.bin", data[:-4]), "truncated or corrupt")
    expect_error("bad file: shorter than the header", variant("short.bin", data[:100]), "shorter than the header")
    expect_error("bad file: wrong magic", variant("magic.bin", with_word(0, 1234)), "bad magic")
    expect_error("bad file: version 4", variant("version.bin", with_word(1, 4)), "unsupported checkpoint version")
    expect_error("bad file: unknown PE id", variant("pe.bin", with_word(8, 99)), "unknown positional encoding")
    expect_error("bad file: a DAPE model (word 9)", variant("dape.bin", with_word(9, 1)), "header word 9 (DAPE variant) is 1")
    expect_error("bad file: DAPE width (word 10)", variant("dape_w.bin", with_word(10, 32)), "header word 10 (DAPE width) is 32")
    expect_error("bad file: a negative training length (word 14)", variant("tl.bin", with_word(14, -5)), "bad training length -5")


def expect_cli_error(what, args, fragment):
    """python3 ARGS must exit nonzero within 60 s with one line on stderr containing fragment."""
    global failures
    try:
        r = subprocess.run([sys.executable] + args, capture_output=True, text=True, timeout=60)
        lines = r.stderr.splitlines()
        ok = r.returncode != 0 and len(lines) == 1 and fragment in lines[0]
        said = "exit %d: %s" % (r.returncode, r.stderr.strip()[-300:])
    except subprocess.TimeoutExpired:
        ok, said = False, "still running after 60 s"
    print("  %-52s %s  (%s)" % (what, "ok  " if ok else "FAIL", said))
    if not ok:
        failures += 1


def test_tool_errors(ckpt, tmp):
    """Bad input to export_hf.py and GPT.from_folder (a checkpoint of an encoding other than
    learned, whose export is a folder for GPT.from_folder), and write_checkpoint's temporary file."""
    global failures
    exporter = os.path.join(os.path.dirname(os.path.abspath(__file__)), "export_hf.py")
    data = bytearray(open(ckpt, "rb").read())
    data[1024 + 4 * 7:1024 + 4 * 8] = np.float32(np.nan).tobytes()  # one parameter
    nan = os.path.join(tmp, "nan.bin")
    open(nan, "wb").write(data)
    expect_cli_error("export: a checkpoint with a NaN", [exporter, nan, os.path.join(tmp, "nan_out")],
                     "nan.bin holds 1 NaN or infinite value(s) in tensor wte")
    fifo = os.path.join(tmp, "fifo.bin")
    os.mkfifo(fifo)
    expect_cli_error("export: a FIFO as the checkpoint", [exporter, fifo, os.path.join(tmp, "fifo_out")],
                     "fifo.bin is not a regular file")
    good = os.path.join(tmp, "folder_good")
    export_hf.export(ckpt, good)
    def damaged(name, file, content):
        """A copy of the exported folder with `file` replaced by content (bytes), loaded."""
        folder = os.path.join(tmp, "folder_" + name)
        os.makedirs(folder)
        for f in os.listdir(good):
            open(os.path.join(folder, f), "wb").write(open(os.path.join(good, f), "rb").read())
        open(os.path.join(folder, file), "wb").write(content)
        return lambda: M.GPT.from_folder(folder)
    config = json.load(open(os.path.join(good, "config.json")))
    def config_with(**change):
        c = json.loads(json.dumps(config))
        c["config"].update(change)
        return json.dumps(c).encode()
    weights = open(os.path.join(good, "pytorch_model.bin"), "rb").read()
    sd = torch.load(os.path.join(good, "pytorch_model.bin"))
    def weights_with(change):
        path = os.path.join(tmp, "weights.bin")
        torch.save(change(dict(sd)), path)
        return open(path, "rb").read()
    expect_error("from_folder: config.json not JSON", damaged("json", "config.json", b"{\"config\": "),
                 "config.json is not valid JSON")
    expect_error("from_folder: config.json without a configuration", damaged("noconfig", "config.json", b"{}"),
                 "config.json: no valid \"config\" entry")
    expect_error("from_folder: config.json with 0 layers", damaged("layers", "config.json", config_with(num_layers=0)),
                 "config.json: bad configuration")
    expect_error("from_folder: config.json with an unknown encoding", damaged("pe", "config.json", config_with(pe="nonsense")),
                 "config.json: unknown positional encoding 'nonsense'")
    expect_error("from_folder: truncated pytorch_model.bin", damaged("trunc", "pytorch_model.bin", weights[:len(weights) // 2]),
                 "pytorch_model.bin cannot be read as a state dict, truncated or corrupt")
    expect_error("from_folder: pytorch_model.bin without wte", damaged("missing", "pytorch_model.bin",
                 weights_with(lambda d: {k: v for k, v in d.items() if k != "wte"})), "pytorch_model.bin lacks the tensor(s) wte")
    expect_error("from_folder: pytorch_model.bin with a NaN", damaged("nan", "pytorch_model.bin",
                 weights_with(lambda d: dict(d, lnfw=d["lnfw"] * np.nan))), "pytorch_model.bin holds")
    # write_checkpoint: its temporary file is its own, and none is left
    out = os.path.join(tmp, "written.bin")
    open(out + ".tmp", "wb").write(b"a user's file")
    cfg, tensors = M.read_checkpoint(ckpt)
    M.write_checkpoint(out, cfg, tensors)
    ok = open(out + ".tmp", "rb").read() == b"a user's file" and M.read_checkpoint(out)[0] == cfg and \
        not [f for f in os.listdir(tmp) if f.startswith(".llmc-tmp.")]
    print("  %-52s %s" % ("write_checkpoint: a user's written.bin.tmp kept, none left", "ok  " if ok else "FAIL"))
    failures += 0 if ok else 1


def check_shaw_keys(build, ckpt, prefix, plain):
    """shaw keys-only (header word 20 = 0, the checkpoint without a^V) written here from the
    plain checkpoint's other tensors: the C trainer and model.py agree; the logits differ."""
    global failures
    cfg, tensors = M.read_checkpoint(ckpt)
    path = prefix + "_keys.bin"
    M.write_checkpoint(path, M.Config(**dict(cfg.__dict__, shaw_values=0)), {n: t for n, t in tensors.items() if n != "shaw_av"})
    keys = M.GPT.from_checkpoint(path, dtype=torch.float64)
    c_reference(build, cfg.pe, path[:-4], path)
    ref = read_reference(path[:-4] + "_ref.bin", keys.cfg)
    compare_model("keys only (no a^V)", keys, ref)
    change = float(np.max(np.abs(ref[2] - plain[2]))) / float(np.max(np.abs(plain[2])))
    ok = change > 1e-6
    print("  %-52s %s  (%.3g relative, at least 1e-6)" % ("keys only: other logits than with a^V", "ok  " if ok else "FAIL", change))
    failures += 0 if ok else 1


def t2t_relative_attention(q, k, v, bias, max_relative_position, keys_table, values_table):
    """tensor2tensor's dot_product_attention_relative (tensor2tensor/layers/common_attention.py at
    bafdc1b, :1739-1827, dropout 0, no cache or memory), transcribed from TensorFlow into PyTorch
    line by line with its helpers, on q, k, v (batch, heads, length, depth), q already scaled by
    depth^-0.5 (multihead_attention :4701-4702); keys_table and values_table are the variables
    "relative_positions_keys/embeddings" and "relative_positions_values/embeddings" [2k + 1,
    depth] (values_table None: the attention without the value term, tf.matmul(weights, v) as in
    dot_product_attention :1667, the keys-only variant)."""
    def generate_relative_positions_matrix(length_q, length_k, max_relative_position):  # :1670-1688
        range_vec_q = range_vec_k = torch.arange(length_q)                                   # :1675-1676
        distance_mat = range_vec_k[None, :] - range_vec_q[:, None]                           # :1680
        distance_mat_clipped = distance_mat.clamp(-max_relative_position, max_relative_position)  # :1683-1684
        return distance_mat_clipped + max_relative_position                                  # :1687-1688

    def generate_relative_positions_embeddings(length_q, length_k, embeddings_table):      # :1691-1702
        relative_positions_matrix = generate_relative_positions_matrix(length_q, length_k, max_relative_position)
        return embeddings_table[relative_positions_matrix]                                  # tf.gather :1701

    def relative_attention_inner(x, y, z, transpose):                                      # :1705-1736
        batch_size, heads, length = x.shape[0], x.shape[1], x.shape[2]
        xy_matmul = x @ (y.transpose(-1, -2) if transpose else y)                           # :1726
        x_t = x.permute(2, 0, 1, 3)                                                         # :1728
        x_t_r = x_t.reshape(length, heads * batch_size, -1)                                 # :1730
        x_tz_matmul = x_t_r @ (z.transpose(-1, -2) if transpose else z)                     # :1732
        x_tz_matmul_r = x_tz_matmul.reshape(length, batch_size, heads, -1)                  # :1734
        x_tz_matmul_r_t = x_tz_matmul_r.permute(1, 2, 0, 3)                                 # :1736
        return xy_matmul + x_tz_matmul_r_t

    length = k.shape[2]                                                                     # :1802-1803
    relations_keys = generate_relative_positions_embeddings(length, length, keys_table)      # :1804-1806
    logits = relative_attention_inner(q, k, relations_keys, True)                           # :1812
    logits = logits + bias                                                                  # :1813-1814
    weights = torch.softmax(logits, dim=-1)                                                 # :1815
    if values_table is None:
        return weights @ v
    relations_values = generate_relative_positions_embeddings(length, length, values_table)  # :1807-1809
    return relative_attention_inner(weights, v, relations_values, False)                    # :1827


def check_official_shaw():
    """Shaw against the transcription of tensor2tensor's module (t2t_relative_attention): random
    q, k, v and official tables, the causal bias of tensor2tensor's decoder (-1e9 above the
    diagonal, attention_bias_lower_triangle), model.py's tables the official rows k..0."""
    global failures
    import types
    print("=== shaw: tensor2tensor's dot_product_attention_relative (a transcription) against model.py (float64)")
    torch.manual_seed(0)
    B, NH, T, hs, k = 2, 3, 40, 8, 7
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    bias = torch.where(causal, 0.0, -1e9).to(torch.float64)
    for values in (1, 0):
        label = "keys and values" if values else "keys only"
        q, kk, v = (torch.randn(B, NH, T, hs, dtype=torch.float64, requires_grad=True) for _ in range(3))
        tK, tV = (torch.randn(2 * k + 1, hs, dtype=torch.float64, requires_grad=True) for _ in range(2))
        want = t2t_relative_attention(q * hs ** -0.5, kk, v, bias, k, tK, tV if values else None)
        aK, aV = (t.detach()[:k + 1].flip(0).clone().requires_grad_() for t in (tK, tV))  # row r = official row k - r
        owner = types.SimpleNamespace(cfg=types.SimpleNamespace(shaw_k=k, shaw_values=values), shaw_ak=[aK], shaw_av=[aV])
        pos = torch.arange(T).expand(B, T)
        scores = q @ kk.transpose(2, 3) / math.sqrt(hs) + M.Shaw().score_bias(owner, 0, q, kk, pos)
        att = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        extra = M.Shaw().value_term(owner, 0, att, pos)
        got = att @ v + (0 if extra is None else extra)
        check("official, %s: attention output" % label, got.detach().numpy(), want.detach().numpy())
        g = torch.randn_like(want)
        dwant = torch.autograd.grad((want * g).sum(), (q, kk, v, tK) + ((tV,) if values else ()))
        dgot = torch.autograd.grad((got * g).sum(), (q, kk, v, aK) + ((aV,) if values else ()))
        for name, a, b in zip(("q", "k", "v"), dgot, dwant):
            check("official, %s: d %s" % (label, name), a.numpy(), b.numpy())
        for name, a, b in zip(("a^K", "a^V"), dgot[3:], dwant[3:]):
            check("official, %s: d %s (official rows k..0)" % (label, name), a.numpy(), b[:k + 1].flip(0).numpy())
            rest = float(b[k + 1:].abs().max())
            ok = rest == 0
            print("  %-52s %s  (%.3g)" % ("official, %s: no d %s in its rows k + 1..2k" % (label, name), "ok  " if ok else "FAIL", rest))
            failures += 0 if ok else 1


def check_official_cope(path):
    """The official ContextPosSelfAttn (its defaults; dropout 0) against Cope.score_bias."""
    import importlib.util
    import types
    spec = importlib.util.spec_from_file_location("context_position", path)
    official = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(official)
    print("=== cope: the official code (%s) against model.py (float64)" % path)
    torch.manual_seed(0)
    B, NH, T, hs, maxT = 2, 3, 50, 8, 20
    cfg = types.SimpleNamespace(drop=0.0, cope_layers=1, cope_npos=None, block_size=maxT, head_dim=hs,
                                cope_val_gates=False, cope_sep_key=False, pos_emb="cope", cope_nodiv=False)
    layer = official.ContextPosSelfAttn(cfg, 0).double()
    E = torch.randn(maxT + 1, hs, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        layer.pos_emb.copy_(E.T[None])
    q, k, v = (torch.randn(B * NH, T, hs, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = torch.ones(T, T, dtype=torch.float64).tril()[None]
    want = layer(q, k, k, v, attn_mask=mask)
    owner = types.SimpleNamespace(cfg=types.SimpleNamespace(max_seq_len=maxT), cope_e=[E])
    qh, kh, vh = (t.view(B, NH, T, hs) for t in (q, k, v))
    scores = qh @ kh.transpose(2, 3) / math.sqrt(hs) + M.Cope().score_bias(owner, 0, qh, kh, None)
    got = (torch.softmax(scores.masked_fill(mask[0] == 0, float("-inf")), dim=-1) @ vh).view(B * NH, T, hs)
    check("official: attention output", got.detach().numpy(), want.detach().numpy())
    g = torch.randn_like(want)
    dwant = torch.autograd.grad((want * g).sum(), (q, k, v, layer.pos_emb))
    dgot = torch.autograd.grad((got * g).sum(), (q, k, v, E))
    for name, a, b in zip(("q", "k", "v"), dgot, dwant):
        check("official: d %s" % name, a.numpy(), b.numpy())
    check("official: d E (pos_emb transposed)", dgot[3].numpy(), dwant[3][0].T.numpy())


def check_official_tisa(path):
    """The official Tisa module (its defaults: 5 kernels) against Tisa.bias: the bias of every
    pair j <= i and the gradients of its three tensors."""
    import importlib.util
    import types
    spec = importlib.util.spec_from_file_location("tisa", path)
    official = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(official)
    print("=== tisa: the official code (%s) against model.py (float64)" % path)
    torch.manual_seed(0)
    NH, T = 3, 50
    module = official.Tisa(num_attention_heads=NH).double()
    with torch.no_grad():  # offsets within the sequence, so that every kernel has weight
        module.kernel_offsets.uniform_(-1, T)
    want = module(T)  # (NH, T, T)
    mu, a, c = (p.detach().clone().requires_grad_() for p in (module.kernel_offsets, module.kernel_amplitudes, module.kernel_sharpness))
    owner = types.SimpleNamespace(tisa_mu=[mu], tisa_a=[a], tisa_c=[c])
    got = M.Tisa().bias(owner, 0, torch.zeros(1, dtype=torch.float64), None, torch.arange(T))
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    check("official: the bias of every pair j <= i", got[:, causal].detach().numpy(), want[:, causal].detach().numpy())
    g = torch.randn(NH, T, T, dtype=torch.float64) * causal
    dwant = torch.autograd.grad((want * g).sum(), (module.kernel_offsets, module.kernel_amplitudes, module.kernel_sharpness))
    dgot = torch.autograd.grad((got * g).sum(), (mu, a, c))
    for name, x, y in zip(("offsets mu", "amplitudes a", "sharpness c"), dgot, dwant):
        check("official: d %s" % name, x.numpy(), y.numpy())


def check_official_shape(path):
    """The official PositionalEncoding (SHAPE's OpenNMT-py, its onmt imports stubbed) against
    Shape: at evaluation (offset K) the embedding of random token vectors; in training, where
    the official offsets are torch.randint's, the table at every offset it can draw. The
    official table is float32 (its angles rounded), model.py's double: within 1e-4."""
    import importlib.util
    import types
    for name in ("onmt", "onmt.modules", "onmt.modules.util_class", "onmt.utils", "onmt.utils.logging"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["onmt.modules.util_class"].Elementwise = torch.nn.ModuleList
    sys.modules["onmt.utils.logging"].logger = types.SimpleNamespace(info=lambda *a: None)
    spec = importlib.util.spec_from_file_location("shape_embeddings", path)
    official = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(official)
    print("=== shape: the official code (%s) against model.py (float64)" % path)
    C, T, B, K = 24, 50, 3, 7
    module = official.PositionalEncoding(0.0, C, max_len=5000, pe_noise_size=K).double().eval()
    emb = torch.randn(T, B, C, dtype=torch.float64)
    want = module(emb).transpose(0, 1)  # (B, T, C)
    owner = types.SimpleNamespace(cfg=types.SimpleNamespace(channels=C, shape_k=K))
    pos = M.Shape().own_positions(owner, None, torch.arange(T).expand(1, B, T), None)[0]
    got = torch.stack([M.Shape().embed(owner, emb.transpose(0, 1)[b], pos[b]) for b in range(B)])
    check("official: evaluation, offset K = %d" % K, got.numpy(), want.detach().numpy(), 1e-4)
    table = module.pe[:K + T, 0]  # (K + T, C): the rows of every training offset 0..K-1
    mine = M.Shape().embed(owner, torch.zeros(K + T, C, dtype=torch.float64), torch.arange(K + T))
    check("official: the table at positions 0..K + T - 1", mine.numpy(), table.numpy(), 1e-4)


def flashlight_cape(inp, train, aug, global_shift, shrink, uselocal, randu, input_scale=1.0, centre=True):
    """flashlight's SinusoidalPositionEmbedding (CAPE's official code: the `cape` branch at
    5fcb891, flashlight/fl/contrib/modules/SinusoidalPositionEmbedding.cpp), transcribed from
    C++ on ArrayFire line by line into float64: the input (C, T, B) as ArrayFire's dims, randu(shape)
    standing for af::randu (the caller's draws). centre=False leaves out lines 55-58, the
    mean-centring, which this project drops for a causal model (docs/encodings.md)."""
    C, T, B = inp.shape
    half_dim = C // 2 + (C // 2) % 2                                                           # 22-25
    scale = torch.exp(-2 * torch.arange(half_dim, dtype=torch.float64) * math.log(10000) / C)  # 27-28
    positions = torch.arange(T, dtype=torch.float64)[None, :, None].repeat(half_dim, 1, B)    # 46-47
    if aug and centre:                                                                         # 55-58
        positions = positions - positions.mean(dim=1, keepdim=True)
    if train and aug:                                                                          # 59-76
        positions = positions + randu((1, 1, B)) * global_shift - global_shift / 2.0            # 61-64
        if uselocal:                                                                           # 66-69
            positions = positions + (randu((1, T, B)) - 0.5)
        log_shrink = math.log(shrink)                                                          # 71-75
        positions = positions * torch.exp(randu((1, 1, B)) * 2 * log_shrink - log_shrink)
    half = C // 2                                                                              # 77
    sin = torch.sin(positions * scale[:, None, None])                                          # 78
    cos = torch.cos(positions * scale[:half, None, None])                                      # 79-80
    return inp * input_scale + torch.cat([sin, cos], dim=0)                                    # 81-86


def check_official_cape():
    """Cape against the transcription of its official code (flashlight_cape), C a multiple of 4
    as the official needs: at evaluation (no augmentation) the table at 0..T-1; in training,
    fed the trainer's draws (Cape.draws) in the official order (the rows' shifts, the tokens'
    shifts, the rows' scales), the augmented table without the mean-centring; and with it, at
    evaluation, the table at the centred positions t - (T - 1)/2, which this project does not
    use: the one step it leaves out."""
    import types
    C, T, B, key = 24, 40, 3, 12345
    print("=== cape: flashlight's SinusoidalPositionEmbedding (a transcription) against model.py (float64)")
    owner = types.SimpleNamespace(cfg=types.SimpleNamespace(channels=C), cape=M.CapeAugment(6.0, 3.0, 1))
    emb = torch.randn(B, T, C, dtype=torch.float64)
    inp = emb.permute(2, 1, 0)  # (C, T, B)
    from_official = lambda out: out.permute(2, 1, 0)
    got = M.Cape().embed_rows(owner, emb, torch.arange(T).expand(B, T), None)
    want = from_official(flashlight_cape(inp, False, True, 6, 3.0, True, None, math.sqrt(C), centre=False))
    check("official: evaluation, the table at 0..T-1", got.numpy(), want.numpy(), 1e-12)
    shift, scale, local = M.Cape.draws(B, T, key)
    draws = iter([torch.tensor(shift).view(1, 1, B), torch.tensor(local.T).reshape(1, T, B), torch.tensor(scale).view(1, 1, B)])
    got = M.Cape().embed_rows(owner, emb, torch.arange(T).expand(B, T), key)
    want = from_official(flashlight_cape(inp, True, True, 6, 3.0, True, lambda shape: next(draws), math.sqrt(C), centre=False))
    check("official: training, G = 6, S = 3, local shifts", got.numpy(), want.numpy(), 1e-12)
    centred = torch.tensor(M.Cape.table(np.arange(T) - (T - 1) / 2.0, C))
    want = from_official(flashlight_cape(torch.zeros(C, T, 1, dtype=torch.float64), False, True, 6, 3.0, True, None))[0]
    check("official: its centring, the table at t - (T - 1)/2", centred.numpy(), want.numpy(), 1e-12)


def official_bilevel_ids(ids, separators, train_scale):
    """BiPE's get_bilevel_ids (zhenyuhe00/BiPE at 3dddab3, my_modeling_llama_bipe_rope.py 632-650),
    transcribed line by line; the separators its Llama ids 869 and 13 unless given. Returns the
    positions within segments (clipped to train_scale - 1) and the segments' indices."""
    sep = torch.where(ids == separators[0], 1, 0)
    sep[ids == separators[1]] = 1
    pos1 = torch.cumsum(sep, dim=1)
    pos1 = torch.cat([torch.zeros((ids.shape[0], 1)), pos1[:, :-1]], dim=1)
    pos2 = torch.cat([sep, torch.ones((ids.shape[0], 1))], dim=1).reshape(-1)
    ones = torch.cat([torch.zeros((1)) - 1, torch.argwhere(pos2 == 1)[:, 0]])
    diff = (ones[1:] - ones[:-1])
    pos2[pos2 == 1] = diff
    pos2 = -torch.cumsum(torch.cat([torch.zeros((1)), pos2[:-1]]), dim=0)
    pos2 = pos2 + torch.arange(pos2.shape[-1])
    pos2 = pos2.reshape(ids.shape[0], -1)[:, :-1]
    pos2[pos2 >= train_scale] = train_scale - 1
    return pos2.long(), pos1.long()


def official_alibi_mul96_slopes(n):
    """_init_alibi_mul96's get_slopes (my_modeling_llama_bipe_alibi.py 197-212), transcribed."""
    def get_slopes_power_of_2(n):
        start = (2**(-2**-(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i * 96 for i in range(n)]
    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2**math.floor(math.log2(n))
    return get_slopes_power_of_2(closest_power_of_2) + official_alibi_mul96_slopes(2 * closest_power_of_2)[0::2][:n - closest_power_of_2]


def official_rope(q, k, position_ids, base=10000):
    """LlamaRotaryEmbedding, rotate_half and apply_rotary_pos_emb (my_modeling_llama_bipe_rope.py
    97-131, 180-195), transcribed in float64 (the official frequencies are float32's)."""
    dim = q.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    t = torch.arange(int(position_ids.max()) + 1, dtype=torch.float64)
    freqs = torch.einsum("i,j->ij", t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[position_ids].unsqueeze(1), emb.sin()[position_ids].unsqueeze(1)
    rotate_half = lambda x: torch.cat((-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]), dim=-1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def check_official_bipe():
    """BiPE against transcriptions of its official code (float64): the segments and positions
    within them of rows of Llama ids (the official separators 869 "\u2581." and 13 "\n") against
    model.py's of the same rows in GPT-2 ids (764 " .", 198 "\n"), with segments longer than the
    table; BiPE-ALiBi's attention probabilities, the official bias +96 m_h seg_j against -96 m_h
    (seg_i - seg_j) (8 heads: slopes exact in float32); BiPE-RoPE's scores q.k at the segments,
    the official rotate_half layout against model.py's pairs (2k, 2k + 1), the columns of q and
    k permuted accordingly (the same model: the projections absorb the permutation)."""
    import types
    print("=== bipe: the official code's bilevel ids, ALiBi x96 and rotary embedding (transcriptions) against model.py (float64)")
    B, T, rows, NH, hs = 3, 60, 8, 8, 16
    gen = torch.Generator().manual_seed(5)
    llama = torch.randint(100, 200, (B, T), generator=gen)
    llama[torch.rand(B, T, generator=gen) < 0.1] = 869
    llama[torch.rand(B, T, generator=gen) < 0.05] = 13
    llama[2, :] = 150  # one row of a single segment, longer than the table
    gpt2 = llama.clone()
    gpt2[llama == 869], gpt2[llama == 13] = 764, 198
    intra_official, seg_official = official_bilevel_ids(llama, (869, 13), rows)
    owner = types.SimpleNamespace(cfg=types.SimpleNamespace(max_seq_len=rows, channels=1),
                                  wpe=torch.arange(rows, dtype=torch.float64)[:, None])
    seg = M.BipeRope().own_positions(owner, gpt2, torch.arange(T).expand(1, B, T), None)[0]
    intra = M.BipeRope().embed_rows(owner, torch.zeros(B, T, 1, dtype=torch.float64), seg, None)[..., 0]
    check("official: segments (get_bilevel_ids' position_ids)", seg.numpy(), seg_official.numpy(), 0)
    check("official: positions within segments, clipped", intra.numpy(), intra_official.double().numpy(), 0)
    scores = torch.randn(B, NH, T, T, dtype=torch.float64, generator=gen)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    slopes = torch.tensor(official_alibi_mul96_slopes(NH), dtype=torch.float64)
    table = slopes[None, :] * torch.arange(T, dtype=torch.float64)[:, None]         # alibi (maxpos, heads), transposed
    want = scores + table[seg_official].transpose(2, 1).unsqueeze(2)                 # alibi.py 292: (B, NH, 1, T)
    owner.cfg.num_heads = NH
    got = scores + torch.stack([M.BipeAlibi().bias(owner, 0, scores, None, seg[b]) for b in range(B)])
    softmax = lambda a: torch.softmax(a.masked_fill(~causal, -math.inf), dim=-1)
    check("official: ALiBi x96 of the segments, attention probabilities", softmax(got).numpy(), softmax(want).numpy(), 1e-12)
    q, k = (torch.randn(B, NH, T, hs, dtype=torch.float64, generator=gen) for _ in range(2))
    qo, ko = official_rope(q, k, seg_official)
    perm = torch.stack([torch.arange(hs // 2), torch.arange(hs // 2) + hs // 2], dim=1).reshape(-1)  # pairs (k, k + hs/2) -> (2k, 2k + 1)
    owner.cfg = M.Config(max_seq_len=rows, vocab_size=2, padded_vocab_size=2, num_layers=1, num_heads=NH, channels=NH * hs, pe="bipe_rope")
    rotated = [M.BipeRope().rotate(owner, 0, q[b:b + 1, ..., perm], k[b:b + 1, ..., perm], M.PEEval(train_len=T), seg[b], T) for b in range(B)]
    got = torch.cat([qr @ kr.transpose(-1, -2) for qr, kr in rotated])
    check("official: rotary embedding at the segments, scores q.k", got.numpy(), (qo @ ko.transpose(-1, -2)).numpy(), 1e-12)


class FloaterOfficial:
    """FLOATER's official position flow (xuanqing94/FLOATER at d788b5e, a fairseq fork), with the
    solver of the authors' torchdiffeq fork (xuanqing94/torchdiffeq at 05d9ae1, which the README
    installs), transcribed line by line; file:line in the comments."""

    class Linear_t(torch.nn.Module):  # fairseq/modules/flow_funcs.py:25-41
        def __init__(self, in_f, out_f, bias=True):
            super().__init__()
            self.linear = torch.nn.Linear(in_f + 1, out_f, bias)

        def forward(self, t, x):
            b_x, c_x, h = x.size()
            time = torch.ones((b_x, c_x, 1)).to(x) * t
            x_aug = torch.cat([x, time], dim=2)
            return self.linear(x_aug)

    class flow_func_linear(torch.nn.Module):  # flow_funcs.py:101-133
        def __init__(self, nc, c_multiplier, embed_dim):
            super().__init__()
            self.layers = torch.nn.ModuleList([FloaterOfficial.Linear_t(embed_dim, embed_dim), torch.nn.ReLU(inplace=True),
                                               FloaterOfficial.Linear_t(embed_dim, embed_dim)])

        def forward(self, t, x):
            for idx, layer in enumerate(self.layers):
                x = layer(t, x) if idx % 2 == 0 else layer(x)
            return x

    @staticmethod
    def rk4_alt_step_func(func, t, dt, y):  # torchdiffeq/_impl/rk_common.py:72-78 (one tensor, no tuple)
        k1 = func(t, y)
        k2 = func(t + dt / 3, y + dt * k1 / 3)
        k3 = func(t + dt * 2 / 3, y + dt * (k1 / -3 + k2))
        k4 = func(t + dt, y + dt * (k1 - k2 + k3))
        return (k1 + 3 * k2 + 3 * k3 + k4) * (dt / 8)

    @staticmethod
    def odeint_rk4(func, y0, t, step_size):
        """odeint(func, y0, t, method="rk4", options={"step_size": step_size}) (odeint.py:20-76): the
        fixed-grid solver (solvers.py:36-108, fixed_grid.py:26-29)."""
        start_time, end_time = t[0], t[-1]  # _grid_constructor_from_step_size, solvers.py:57-66
        niters = torch.ceil((end_time - start_time) / step_size + 1).item()
        time_grid = torch.arange(0, niters).to(t) * step_size + start_time
        time_grid[-1] = t[-1]
        solution = [y0]  # integrate, solvers.py:86-99
        j = 1
        for t0, t1 in zip(time_grid[:-1], time_grid[1:]):
            dy = FloaterOfficial.rk4_alt_step_func(func, t0, t1 - t0, y0)
            y1 = y0 + dy
            y0 = y1
            while j < len(t) and t1 >= t[j]:
                solution.append(FloaterOfficial._linear_interp(t0, t1, y0, y1, t[j]))
                j += 1
        return torch.stack(solution)

    @staticmethod
    def _linear_interp(t0, t1, y0, y1, t):  # solvers.py:101-108 (handed the step's end twice, :92-96)
        if t == t0:
            return y0
        if t == t1:
            return y1
        slope = (y1 - y0) / (t1 - t0)
        return y0 + slope * (t - t0)

    def __init__(self, layers, embed_dim, dtype):
        self.proj_bias = torch.nn.Parameter(torch.randn(3, layers, embed_dim, dtype=dtype))  # flow_transformer.py:244-246
        torch.nn.init.xavier_uniform_(self.proj_bias)                                       # :272-273
        self.proj_flow = FloaterOfficial.flow_func_linear(layers, 2, embed_dim).to(dtype)   # :256
        for layer in (self.proj_flow.layers[0], self.proj_flow.layers[2]):                  # Linear_t.init_params, :31-33
            torch.nn.init.xavier_normal_(layer.linear.weight)
            torch.nn.init.zeros_(layer.linear.bias)
        self.time_dt = torch.tensor(0.01, dtype=dtype)                                      # :247

    def positions(self, T):
        """The encoder's bias_vec (flow_transformer.py:326-329): (T, 3, L, d), q, k, v of layer l at
        [:, 0..2, l] (flow_transformer_layer.py:100-102)."""
        time_grid = torch.arange(0, T).to(self.time_dt) * self.time_dt
        return self.odeint_rk4(self.proj_flow, self.proj_bias, time_grid, self.time_dt.item() / 5.0)


def check_floater_identity(ckpt):
    """floater with zero dynamics and P0 = 0 is the sinusoidal model: the logits of the C
    trainer's floater checkpoint with its five tensors zeroed equal, bit for bit, those of a
    sinusoidal model of the same GPT-2 tensors (model.py's; the C trainer's sinusoidal equals
    model.py's by its own comparison above); and with zero dynamics alone, P0 folded into the
    qkv bias gives the same logits (P(s) = P0 at every position)."""
    global failures
    cfg, tensors = M.read_checkpoint(ckpt)
    floater_names = [name for name in M.Floater.tensors(cfg)]
    idx = torch.tensor(np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 40)), dtype=torch.long)
    def logits(pe, change):
        c = M.Config(**dict(cfg.__dict__, pe=pe, floater_refresh=cfg.floater_refresh if pe == "floater" else 0))
        t = {name: np.array(tensors[name], dtype=np.float64) for name, _ in M.checkpoint_layout(c)}
        change(t)
        with torch.no_grad():
            return M.GPT(c, t, torch.float64)(idx)[0].numpy()
    def zero(t, names):
        for name in names:
            t[name] = np.zeros_like(t[name])
    sinusoidal = logits("sinusoidal", lambda t: None)
    floater = logits("floater", lambda t: zero(t, floater_names))
    ok = (sinusoidal == floater).all()
    print("  %-52s %s" % ("identity: zero dynamics, P0 = 0: sinusoidal's logits, bit for bit", "ok  " if ok else "FAIL"))
    failures += 0 if ok else 1
    def folded(t):
        t["qkvb"] = t["qkvb"] + t["floater_p0"].reshape(cfg.num_layers, 3 * cfg.channels)
        zero(t, floater_names)
    check("identity: zero dynamics: P0 folded into the qkv bias", logits("floater", lambda t: zero(t, floater_names[1:])),
          logits("floater", folded), 1e-12)


def check_official_floater():
    """Floater against the transcription of its official flow (FloaterOfficial), in float64: the
    positions of every layer's q, k and v over T = 60 positions from a random official module
    (its initialization, b1, b2 moved off 0), and the gradients of the official proj_bias and
    both Linear_t layers through the solver (autograd through the transcribed steps: the exact
    gradient of the computed positions, which the official's adjoint method approximates)."""
    import types
    L, C, T = 2, 16, 60
    print("=== floater: the official flow and its solver (a transcription) against model.py (float64)")
    torch.manual_seed(0)
    official = FloaterOfficial(L, C, torch.float64)
    lin1, lin2 = official.proj_flow.layers[0].linear, official.proj_flow.layers[2].linear
    with torch.no_grad():
        lin1.bias.normal_(0, 0.5)
        lin2.bias.normal_(0, 0.5)
    want = official.positions(T)  # (T, 3, L, C)
    mine = [t.detach().clone().requires_grad_() for t in (official.proj_bias.permute(1, 0, 2), lin1.weight, lin1.bias, lin2.weight, lin2.bias)]
    owner = types.SimpleNamespace(floater_p0=mine[0], floater_w1=mine[1], floater_b1=mine[2], floater_w2=mine[3], floater_b2=mine[4])
    got = M.Floater().solve(owner, T)  # (T, L, 3, C)
    check("official: P_{l,q/k/v}(p dt) at positions 0..59", got.permute(0, 2, 1, 3).detach().numpy(), want.detach().numpy(), 1e-12)
    g = torch.randn(T, 3, L, C, dtype=torch.float64)
    dwant = torch.autograd.grad((want * g).sum(), (official.proj_bias, lin1.weight, lin1.bias, lin2.weight, lin2.bias))
    dgot = torch.autograd.grad((got.permute(0, 2, 1, 3) * g).sum(), mine)
    names = ("proj_bias (floater_p0 transposed)", "Linear_t 0 weight (floater_w1)", "Linear_t 0 bias (floater_b1)",
             "Linear_t 2 weight (floater_w2)", "Linear_t 2 bias (floater_b2)")
    for name, a, b in zip(names, dgot, dwant):
        check("official: d %s" % name, (a.permute(1, 0, 2) if a.dim() == 3 else a).numpy(), b.numpy(), 1e-12)
def official_complex_lm_embedding(word_emb, period):
    """The official language model's complex embedding, schema 2 (iclr-complex-order/
    complex-order @ 4c4ec24, LANGUAGE MODELING/pytorch-complex/complex_mem_transformer.py,
    MemTransformerLM._forward), transcribed line by line: word_emb (qlen, bsz, d), period (d)."""
    qlen, bsz = word_emb.shape[:2]
    pos_seq = torch.arange(1, qlen + 1, 1.0, dtype=word_emb.dtype)                         # 779
    pos_seq = torch.unsqueeze(pos_seq, -1)                                                   # 780
    pos_seq = torch.unsqueeze(pos_seq, -1)                                                   # 781
    pos_seq = pos_seq.repeat([1, bsz, word_emb.size()[-1]])                                  # 783
    dimension_multiplier = torch.unsqueeze(period, -2)                                       # 793
    dimension_multiplier = torch.unsqueeze(dimension_multiplier, -2)                         # 794
    emb_peroid = dimension_multiplier.repeat([qlen, bsz, 1])                                 # 795
    emb_phase = torch.mul(pos_seq, emb_peroid)                                               # 803
    cos = torch.cos(emb_phase)                                                               # 805
    sin = torch.sin(emb_phase)                                                               # 806
    return word_emb * cos, word_emb * sin                                                    # 808-809


def official_complex_lm_attention(q_real, k_real, v_real, q_phase, k_phase, v_phase, scale, slip):
    """RelPartialLearnableMultiHeadAttn.forward (complex_mem_transformer.py), the heads
    (qlen, bsz, n_head, d_head) on, transcribed line by line without its Transformer-XL terms
    (r_w_bias, r_r_bias: 290-291, 298-305, 311-312; AC alone in 314), a causal mask as
    _forward's (761-762). slip: line 296 as written, the product (q_real + r_w_bias) . k_phase
    of 295 again; otherwise the complex product's q_phase . k_real there."""
    qlen = q_real.size(0)
    AC_real = torch.einsum('ibnd,jbnd->ijbn', (q_real, k_real)) - torch.einsum('ibnd,jbnd->ijbn', (q_phase, k_phase))  # 293-294
    AC_phase = torch.einsum('ibnd,jbnd->ijbn', (q_real, k_phase)) + (                                                   # 295
        torch.einsum('ibnd,jbnd->ijbn', (q_real, k_phase)) if slip else torch.einsum('ibnd,jbnd->ijbn', (q_phase, k_real)))  # 296
    AC = AC_real * AC_real + AC_phase * AC_phase                                             # 308
    AC = torch.sqrt(AC)                                                                      # 309
    attn_score = AC                                                                          # 314
    attn_score = attn_score * scale                                                          # 323
    attn_mask = torch.triu(torch.ones(qlen, qlen), diagonal=1).bool()[:, :, None]            # 761-762
    attn_score = attn_score.masked_fill(attn_mask[:, :, :, None], -float('inf'))            # 329-331 (float64 here)
    attn_prob = torch.softmax(attn_score, dim=1)                                             # 334
    attn_vec_real = torch.einsum('ijbn,jbnd->ibnd', (attn_prob, v_real))                     # 338
    attn_vec_phase = torch.einsum('ijbn,jbnd->ibnd', (attn_prob, v_phase))                   # 339
    return attn_vec_real, attn_vec_phase


def official_complex_mt_attention(q_real, k_real, v_real, q_phase, k_phase, v_phase, temperature, mask):
    """The translation model's ScaledDotProductAttention.forward with continue_complex=False,
    the branch its MultiHeadAttention runs (TRANSLATION/transformer/Modules.py:14-57,
    SubLayers.py:116), transcribed line by line: (n*b, len, d) heads, softmax over dim 2, no
    dropout."""
    attn_real = torch.bmm(q_real, k_real.transpose(1, 2)) - torch.bmm(q_phase, k_phase.transpose(1, 2))  # 16
    attn_phase = torch.bmm(q_real, k_phase.transpose(1, 2)) + torch.bmm(q_phase, k_real.transpose(1, 2))  # 18
    attn = attn_real * attn_real + attn_phase * attn_phase                                   # 40
    attn = torch.sqrt(attn)                                                                  # 42
    attn = attn / temperature                                                                # 43
    attn = attn.masked_fill(mask, -np.inf)                                                   # 45-46
    attn = torch.softmax(attn, dim=2)                                                        # 48
    output_real = torch.bmm(attn, v_real)                                                    # 51
    output_phase = torch.bmm(attn, v_phase)                                                  # 53
    return output_real, output_phase


def check_official_complex_order():
    """ComplexOrder's hooks against the transcriptions of the official code in float64, values
    and gradients: its embedding against the language model's (schema 2); its attention
    (scores, one softmax, both streams' values) against the translation model's attention as
    it runs, at the language model's scale 1/sqrt(d_head), and against the language model's
    own attention without its Transformer-XL terms, with line 296's slip put right, and, as
    written, the one place where it differs; its classifier input against line 903."""
    import types
    print("=== complex_order: the official code (transcriptions) against model.py (float64)")
    gen = torch.Generator().manual_seed(0)
    B, NH, T, hs = 2, 3, 17, 8
    C = NH * hs
    owner = types.SimpleNamespace(complex_w=(torch.rand(C, dtype=torch.float64, generator=gen) * 2).requires_grad_())
    emb = torch.randn(B, T, C, dtype=torch.float64, generator=gen, requires_grad=True)
    got = M.ComplexOrder().embed_streams(owner, emb, torch.arange(T).expand(B, T), None)
    want = official_complex_lm_embedding(emb.transpose(0, 1), owner.complex_w)
    g = [torch.randn(B, T, C, dtype=torch.float64, generator=gen) for _ in range(2)]
    for part, a, b in zip(("real", "imaginary"), got, want):
        check("official LM embedding: the %s part" % part, a.detach().numpy(), b.transpose(0, 1).detach().numpy())
    grad_got = torch.autograd.grad(sum((a * gg).sum() for a, gg in zip(got, g)), (emb, owner.complex_w))
    grad_want = torch.autograd.grad(sum((b.transpose(0, 1) * gg).sum() for b, gg in zip(want, g)), (emb, owner.complex_w))
    check("official LM embedding: d wte[token]", grad_got[0].numpy(), grad_want[0].numpy())
    check("official LM embedding: d w (period)", grad_got[1].numpy(), grad_want[1].numpy())

    qkv = [torch.randn(B, NH, T, hs, dtype=torch.float64, generator=gen, requires_grad=True) for _ in range(6)]
    q, k, v, qi, ki, vi = qkv
    att = torch.softmax(M.ComplexOrder().scores(None, q, k, [(qi, ki)]).masked_fill(
        ~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")), dim=-1)
    got = (att @ v, att @ vi)  # (B, NH, T, hs): model.py's attention output of each stream
    gout = [torch.randn(B, NH, T, hs, dtype=torch.float64, generator=gen) for _ in range(2)]
    def compare(label, want):
        for part, a, b in zip(("real", "imaginary"), got, want):
            check("%s: the %s output" % (label, part), a.detach().numpy(), b.detach().numpy())
        dgot = torch.autograd.grad(sum((a * gg).sum() for a, gg in zip(got, gout)), qkv, retain_graph=True)
        dwant = torch.autograd.grad(sum((b * gg).sum() for b, gg in zip(want, gout)), qkv, retain_graph=True)
        for name, a, b in zip(("q_re", "k_re", "v_re", "q_im", "k_im", "v_im"), dgot, dwant):
            check("%s: d %s" % (label, name), a.numpy(), b.numpy())
    mt = [t.reshape(B * NH, T, hs) for t in (q, k, v, qi, ki, vi)]
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1).expand(B * NH, T, T)
    want = official_complex_mt_attention(*mt, math.sqrt(hs), mask)
    compare("official MT attention (temperature sqrt(hs))", [w.view(B, NH, T, hs) for w in want])
    lm = [t.permute(2, 0, 1, 3) for t in (q, k, v, qi, ki, vi)]  # (qlen, bsz, n_head, d_head)
    want = official_complex_lm_attention(*lm, 1 / math.sqrt(hs), slip=False)
    compare("official LM attention, line 296 put right", [w.permute(1, 2, 0, 3) for w in want])
    literal = official_complex_lm_attention(*lm, 1 / math.sqrt(hs), slip=True)
    err = float((got[0] - literal[0].permute(1, 2, 0, 3)).abs().max() / literal[0].abs().max())
    global failures
    print("  %-52s %s  (%.3g, at least 1e-3)" % ("official LM attention as written differs (line 296)", "ok  " if err > 1e-3 else "FAIL", err))
    failures += 0 if err > 1e-3 else 1

    zs = [torch.randn(B, T, C, dtype=torch.float64, generator=gen) for _ in range(2)]
    want = torch.sqrt(torch.mul(zs[0], zs[0]) + torch.mul(zs[1], zs[1])) / 1.5              # 903
    check("official LM output: norms (line 903)", M.ComplexOrder().classifier_input(None, zs).numpy(), want.numpy())


def main():
    args = sys.argv[1:]
    build = args[0] if args else "build"
    pes = args[1:] or M.PE_NAMES
    with tempfile.TemporaryDirectory(prefix="test_model_") as tmp:
        for pe in pes:
            print("=== %s: PyTorch model against the C trainer (float64)" % pe)
            prefix = os.path.join(tmp, pe)
            c_reference(build, pe, prefix)
            ckpt = prefix + "_model.bin"
            model = M.GPT.from_checkpoint(ckpt, dtype=torch.float64)
            ref = read_reference(prefix + "_ref.bin", model.cfg)
            compare_model("fp32 checkpoint", model, ref)
            check_variants(build, model, ckpt, prefix, ref)
            if pe == pes[0]:
                check_masked(build, model, ckpt, prefix, ref)
            if pe in M.RP_SUPPORTED:
                check_random_positions(build, pe, prefix + "_rp")
                check_given_positions(build, pe, prefix + "_pos")
            if pe in M.ROPE_TABLE_PES:
                check_rope_table(build, model, ckpt, prefix, ref)
            if pe == "shaw":
                check_shaw_keys(build, ckpt, prefix, ref)
            if pe == "floater":
                check_floater_identity(ckpt)
            # bf16: written here, read by both
            cfg, tensors = M.read_checkpoint(ckpt)
            M.write_checkpoint(prefix + "_bf16.bin", cfg, tensors, M.CHECKPOINT_BF16)
            c_reference(build, pe, prefix + "_bf16", prefix + "_bf16.bin")
            compare_model("bf16 checkpoint", M.GPT.from_checkpoint(prefix + "_bf16.bin", dtype=torch.float64),
                          read_reference(prefix + "_bf16_ref.bin", cfg))
            folder = prefix + "_export"
            export_hf.export(ckpt, folder)
            if pe == "learned":
                check_hf_folder(folder, cfg, ref)
            else:
                check_model_folder(folder, ref)
            test_bad_files(ckpt, tmp, pe, pe == pes[0])
            if pe == next(p for p in pes + ["cable"] if p != "learned"):
                test_tool_errors(ckpt, tmp)
    if os.environ.get("COPE_OFFICIAL"):
        check_official_cope(os.environ["COPE_OFFICIAL"])
    if os.environ.get("TISA_OFFICIAL"):
        check_official_tisa(os.environ["TISA_OFFICIAL"])
    if os.environ.get("SHAPE_OFFICIAL"):
        check_official_shape(os.environ["SHAPE_OFFICIAL"])
    if "cape" in pes:
        check_official_cape()
    if "bipe_rope" in pes:
        check_official_bipe()
    if "shaw" in pes:
        check_official_shaw()
    if "floater" in pes:
        check_official_floater()
    if "complex_order" in pes:
        check_official_complex_order()
    print("all PyTorch comparisons passed (%d encodings)" % len(pes) if failures == 0 else "%d FAILURES" % failures)
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
