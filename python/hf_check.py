"""
The HF export of a `learned` checkpoint (python/export_hf.py) loaded by transformers' own
GPT2LMHeadModel, against the C trainer on the same batch:

    python3 python/hf_check.py HF_DIR PREFIX

PREFIX_model.bin and PREFIX_state.bin are a reference of `test_gpt2_learned debug-state PREFIX`
(llmc/debug_state.h: the batch, the C trainer's logits and loss), HF_DIR the export of
PREFIX_model.bin. Prints one line 'hf_check: ... ok' and exits 0 when loading reports no
missing, unexpected or mismatched weights and transformers' loss on the batch is the C
trainer's within 1e-4 (its logits within 1e-4, relative L2); 'hf_check: ... FAIL' and exit 1
otherwise; 'hf_check: skipped (<why>)' and exit 0 without transformers (dev/gpu_checks.sh runs
it where transformers is installed).
"""
import os
import shutil
import sys

import numpy as np

TOL = 1e-4


def read_reference(prefix):
    """The batch, the logits (B, T, Vp) and the loss of a debug state (llmc/debug_state.h)."""
    Vp = int(np.fromfile(prefix + "_model.bin", dtype=np.int32, count=256)[7])
    raw = np.fromfile(prefix + "_state.bin", dtype=np.uint8)
    h = raw[:1024].view(np.int32)
    B, T = int(h[2]), int(h[3])
    ints = raw[1024:1024 + 8 * B * T].view(np.int32)
    x, y = ints[:B * T].reshape(B, T), ints[B * T:].reshape(B, T)
    floats = raw[1024 + 8 * B * T:1024 + 8 * B * T + 4 * (B * T * Vp + 1)].view(np.float32)
    return x, y, floats[:-1].reshape(B, T, Vp), float(floats[-1])


def load(transformers, folder):
    """GPT2LMHeadModel from the export; if this transformers no longer reads pytorch_model.bin,
    from the same weights as model.safetensors (the tied lm_head left out)."""
    try:
        return transformers.GPT2LMHeadModel.from_pretrained(folder, output_loading_info=True) + ("pytorch_model.bin",)
    except Exception as e:
        import torch
        from safetensors.torch import save_file
        print("hf_check: pytorch_model.bin not loaded (%s); trying model.safetensors" % str(e).splitlines()[0])
        alt = folder.rstrip("/") + "_safetensors"
        os.makedirs(alt, exist_ok=True)
        shutil.copy(os.path.join(folder, "config.json"), alt)
        sd = torch.load(os.path.join(folder, "pytorch_model.bin"), map_location="cpu", weights_only=True)
        sd.pop("lm_head.weight", None)
        save_file({k: v.contiguous() for k, v in sd.items()}, os.path.join(alt, "model.safetensors"), metadata={"format": "pt"})
        model, info = transformers.GPT2LMHeadModel.from_pretrained(alt, output_loading_info=True)
        info["missing_keys"] = [k for k in info.get("missing_keys", []) if k != "lm_head.weight"]
        return model, info, "model.safetensors"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: hf_check.py HF_DIR PREFIX")
    folder, prefix = sys.argv[1], sys.argv[2]
    try:
        import torch
        import transformers
    except ImportError as e:
        print("hf_check: skipped (%s)" % e)
        return
    x, y, ref_logits, ref_loss = read_reference(prefix)
    model, info, source = load(transformers, folder)
    model = model.float().eval()
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    with torch.no_grad():
        logits = model(torch.from_numpy(x.astype(np.int64))).logits.double()
    V = logits.shape[-1]
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), torch.from_numpy(y.astype(np.int64)).reshape(-1)).item()
    ref = torch.from_numpy(ref_logits[..., :V].astype(np.float64))
    rel = ((logits - ref).norm() / ref.norm()).item()
    ok = not bad and abs(loss - ref_loss) <= TOL and rel <= TOL
    print("hf_check: transformers %s GPT2LMHeadModel from %s, loading %s: loss %.6f vs C %.6f, logits relative L2 %.2e: %s"
          % (transformers.__version__, source, bad or "clean", loss, ref_loss, rel, "ok" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
