"""
Exports a checkpoint of the trainer for use in PyTorch tools.

    python3 python/export_hf.py MODEL.bin OUTDIR [--dtype float32|bfloat16]

`learned` checkpoints (GPT-2 itself) become a Hugging Face GPT-2 folder, as llm.c's
dev/eval/export_hf.py makes: config.json and pytorch_model.bin, a state dict with Hugging
Face's names and its Conv1D layout (weights as [in, out]), the vocabulary cut from Vp to V
rows, the classifier tied to wte. transformers.GPT2LMHeadModel.from_pretrained(OUTDIR)
loads it (and so does lm-eval-harness with `--model hf --model_args pretrained=OUTDIR`);
the tokenizer is GPT-2's (AutoTokenizer.from_pretrained("gpt2")).

Every other encoding has no Hugging Face class, so OUTDIR gets the weights under this
project's names (pytorch_model.bin), config.json (the model's Config and the revision of
its encoding's definition) and a copy of python/model.py, which loads them:

    import sys; sys.path.insert(0, OUTDIR)
    from model import GPT
    model = GPT.from_folder(OUTDIR)

A checkpoint the trainer refuses (not a regular file, a bad header or size, a NaN or an
infinity in a parameter) is refused here too: one line on stderr naming the file and the
problem, exit status 1. Every file is written crash-safely (a temporary file, renamed).
"""
import argparse
import json
import os
from dataclasses import asdict

import torch

import model as M

GPT2_EOT = 50256


def hf_state_dict(cfg, w, dtype):
    """Hugging Face GPT-2's state dict from the checkpoint's tensors: Conv1D weights are
    the transpose of the trainer's (out, in) matrices; wte loses its padded rows."""
    def t(a, transpose=False):
        x = torch.tensor(a.T.copy() if transpose else a.copy())
        return x.to(dtype)
    sd = {"transformer.wte.weight": t(w["wte"][:cfg.vocab_size]), "transformer.wpe.weight": t(w["wpe"])}
    for i in range(cfg.num_layers):
        p = "transformer.h.%d." % i
        sd[p + "ln_1.weight"], sd[p + "ln_1.bias"] = t(w["ln1w"][i]), t(w["ln1b"][i])
        sd[p + "attn.c_attn.weight"], sd[p + "attn.c_attn.bias"] = t(w["qkvw"][i], True), t(w["qkvb"][i])
        sd[p + "attn.c_proj.weight"], sd[p + "attn.c_proj.bias"] = t(w["attprojw"][i], True), t(w["attprojb"][i])
        sd[p + "ln_2.weight"], sd[p + "ln_2.bias"] = t(w["ln2w"][i]), t(w["ln2b"][i])
        sd[p + "mlp.c_fc.weight"], sd[p + "mlp.c_fc.bias"] = t(w["fcw"][i], True), t(w["fcb"][i])
        sd[p + "mlp.c_proj.weight"], sd[p + "mlp.c_proj.bias"] = t(w["fcprojw"][i], True), t(w["fcprojb"][i])
    sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"] = t(w["lnfw"]), t(w["lnfb"])
    sd["lm_head.weight"] = sd["transformer.wte.weight"]  # tied (saved once: the same storage)
    return sd


def hf_config(cfg, dtype_name):
    """config.json of a Hugging Face GPT-2 with this shape: the tanh GELU ("gelu_new"),
    layernorm eps 1e-5, no dropout (the trainer uses none), tied embeddings."""
    eot = min(GPT2_EOT, cfg.vocab_size - 1)
    return {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": cfg.vocab_size, "n_positions": cfg.max_seq_len, "n_ctx": cfg.max_seq_len,
        "n_embd": cfg.channels, "n_layer": cfg.num_layers, "n_head": cfg.num_heads, "n_inner": None,
        "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "initializer_range": 0.02,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "scale_attn_weights": True,
        "tie_word_embeddings": True, "use_cache": True, "bos_token_id": eot, "eos_token_id": eot,
        "torch_dtype": dtype_name,
    }


def export(checkpoint, outdir, dtype_name="float32"):
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype_name]
    cfg, w = M.read_checkpoint(checkpoint)
    os.makedirs(outdir, exist_ok=True)
    if cfg.pe == "learned":
        sd, config = hf_state_dict(cfg, w, dtype), hf_config(cfg, dtype_name)
    else:
        sd = {name: torch.tensor(a.copy()).to(dtype) for name, a in w.items()}
        config = {"config": asdict(cfg), "pe_revision": M.ENCODINGS[cfg.pe].revision, "torch_dtype": dtype_name,
                  "load_with": "sys.path.insert(0, folder); from model import GPT; GPT.from_folder(folder)"}
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "model.py"), "rb") as f:
            source = f.read()
        M.atomic_write(os.path.join(outdir, "model.py"), lambda f: f.write(source))
    M.atomic_write(os.path.join(outdir, "pytorch_model.bin"), lambda f: torch.save(sd, f))
    M.atomic_write(os.path.join(outdir, "config.json"), lambda f: f.write(json.dumps(config, indent=2).encode()))
    return cfg


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("checkpoint", help="a checkpoint of the trainer (.bin, fp32 or bf16)")
    parser.add_argument("outdir", help="the folder to write")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = parser.parse_args()
    try:  # a bad checkpoint or folder: one line on stderr that names the file, and exit 1
        cfg = export(args.checkpoint, args.outdir, args.dtype)
    except (OSError, ValueError) as e:
        raise SystemExit("error: %s" % e)
    kind = "Hugging Face GPT-2 folder" if cfg.pe == "learned" else "folder for python/model.py (PE %s)" % cfg.pe
    print("wrote %s: %s" % (args.outdir, kind))
