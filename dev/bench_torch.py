#!/usr/bin/env python3
"""The CPU trainer against a PyTorch model of it (python/model.py), side by side: the same
model (a preset, `task` by default, learned positions), the same starting weights (a
checkpoint of the trainer), the same batches of a task file (answer-only loss), the same optimizer (AdamW,
betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the matrices, gradients clipped at norm 1,
constant learning rate), on the same number of threads. The trainer runs twice: as it
trains by default, each row computed only up to its last scored target (length buckets,
-lb), and on whole rows (-lb -1), the same computation as the PyTorch model's. Rounds
alternate the three; each gives the median time of its steps after the first. Prints
tokens per second (every token of the B x T window, as the trainer's step line counts them)
and the losses of the first steps, which must agree. A ratio is the median of the rounds'
own ratios (a round's runs are back to back, so a machine whose speed drifts between rounds
moves them all), with the lowest and highest beside it.

    /usr/bin/python3 dev/bench_torch.py [--model task] [--threads 1,2] [--steps 60] [--rounds 3] [--task copy] [-n 10] [-b 32]

Needs ./tasks and build/train_gpt2_learned (make tasks build/train_gpt2_learned), and PyTorch.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from model import GPT, TARGET_UNSCORED  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TRAINER = os.path.join(ROOT, "build", "train_gpt2_learned")
DECAY = ("wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw")  # llmc/model.h PARAM_DECAY, learned's tensors


def read_masked_shard(path):
    """tokens (rows, R + 1): each row's window and the next row's first token; mask: scored targets"""
    header = np.fromfile(path, dtype=np.int32, count=256)
    assert header[0] == 20240520 and header[1] == 2, "%s is no masked shard" % path
    ntok, R = int(header[2]), int(header[3])
    tokens = np.fromfile(path, dtype=np.uint16, count=ntok, offset=1024).astype(np.int64)
    mask = np.fromfile(path, dtype=np.uint8, count=ntok, offset=1024 + 2 * ntok)
    rows = (ntok - 1) // R
    idx = np.arange(rows)[:, None] * R + np.arange(R + 1)[None, :]
    return tokens[idx], mask[idx], R


def run_trainer(checkpoint, train, val, B, steps, lr, threads, extra=()):
    """the trainer's step times (ms, steps 2..) and losses"""
    out = subprocess.run([TRAINER, "-e", checkpoint, "-i", train, "-j", val, "-b", str(B), "-x", str(steps), "-l", str(lr),
                          "-u", "0", "-q", "1", "-c", "0.1", "-v", "0", "-m", "1", "-s", "0", *extra],
                         env=dict(os.environ, OMP_NUM_THREADS=str(threads)), capture_output=True, text=True, check=True).stdout
    steps_seen = re.findall(r"^step +\d+/\d+ \| loss ([0-9.]+) .*\| ([0-9.]+) ms \|", out, re.M)
    return [float(ms) for _, ms in steps_seen[1:]], [float(loss) for loss, _ in steps_seen]


def run_torch(checkpoint, tokens, mask, B, steps, lr, threads):
    """PyTorch's step times (ms, steps 2..) and losses: the trainer's step, batch for batch"""
    torch.set_num_threads(threads)
    model = GPT.from_checkpoint(checkpoint)
    groups = [{"params": [p for n, p in model.named_parameters() if n in DECAY], "weight_decay": 0.1},
              {"params": [p for n, p in model.named_parameters() if n not in DECAY], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)
    times, losses = [], []
    for step in range(steps):
        t0 = time.perf_counter()
        rows = slice(step * B, (step + 1) * B)
        x = torch.from_numpy(tokens[rows, :-1])
        y = torch.from_numpy(np.where(mask[rows, 1:] == 1, tokens[rows, 1:], TARGET_UNSCORED))
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        times.append((time.perf_counter() - t0) * 1000)
    return times[1:], losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="task", help="the trainer's preset (task, nano, cpu, ...)")
    ap.add_argument("--threads", default="1", help="comma list of thread counts")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--task", default="copy")
    ap.add_argument("-n", type=int, default=10, help="training lengths 1..n (the window: the task's row)")
    ap.add_argument("-b", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        subprocess.run([os.path.join(ROOT, "tasks"), "write", "-n", str(args.n), "-e", str(args.b * args.steps + args.b), "-v", "64",
                        "-x", "8", "-l", str(args.n), data, args.task], check=True, capture_output=True)
        train, val = os.path.join(data, args.task, "train.bin"), os.path.join(data, args.task, "val.bin")
        # the starting weights: the trainer's initialization, one step in (a checkpoint both read)
        subprocess.run([TRAINER, "-e", args.model, "-i", val, "-j", val, "-b", "8", "-x", "1", "-v", "0", "-s", "0",
                        "-o", os.path.join(tmp, "init")], check=True, capture_output=True)
        checkpoint = os.path.join(tmp, "init", "model_00000001.bin")
        tokens, mask, R = read_masked_shard(train)
        cfg = GPT.from_checkpoint(checkpoint).cfg
        print("%s model (%d layers, %d heads, %d channels, learned positions), %s rows of T = %d tokens, B = %d: "
              "%d tokens a step; %d steps a run, median of steps 2..%d; %d rounds alternating; load average %.1f"
              % (args.model, cfg.num_layers, cfg.num_heads, cfg.channels, args.task, R, args.b, args.b * R, args.steps,
                 args.steps, args.rounds, os.getloadavg()[0]))
        print("torch %s, %s" % (torch.__version__, os.environ.get("OPENBLAS_CORETYPE", "OpenBLAS's own kernel choice")))
        print("| threads | C trainer tok/s | C, whole rows (-lb -1) | PyTorch tok/s | ratio (lowest, highest) | "
              "whole rows: ratio | rounds (C, C whole rows, PyTorch: ms/step) |")
        print("|---:|---:|---:|---:|---:|---:|---|")
        tokens_step = args.b * R
        for threads in [int(t) for t in args.threads.split(",")]:
            c_ms, w_ms, t_ms, detail = [], [], [], []
            for _ in range(args.rounds):
                c_times, c_losses = run_trainer(checkpoint, train, val, args.b, args.steps, args.lr, threads)
                w_times, w_losses = run_trainer(checkpoint, train, val, args.b, args.steps, args.lr, threads, ("-lb", "-1"))
                t_times, t_losses = run_torch(checkpoint, tokens, mask, args.b, args.steps, args.lr, threads)
                c_ms.append(statistics.median(c_times))
                w_ms.append(statistics.median(w_times))
                t_ms.append(statistics.median(t_times))
                detail.append("%.1f, %.1f, %.1f" % (c_ms[-1], w_ms[-1], t_ms[-1]))
                for name, losses in (("C", c_losses), ("C whole rows", w_losses)):
                    worst = max(abs(a - b) for a, b in zip(losses[:5], t_losses[:5]))
                    if worst > 1e-3:
                        sys.exit("the first losses differ by %.2e: %s %s, PyTorch %s" % (worst, name, losses[:5], t_losses[:5]))
            ratios = [b / a for a, b in zip(c_ms, t_ms)]
            whole = [b / a for a, b in zip(w_ms, t_ms)]
            print("| %d | %.0f | %.0f | %.0f | %.2fx (%.2f, %.2f) | %.2fx (%.2f, %.2f) | %s |" % (
                threads, tokens_step / statistics.median(c_ms) * 1000, tokens_step / statistics.median(w_ms) * 1000,
                tokens_step / statistics.median(t_ms) * 1000, statistics.median(ratios), min(ratios), max(ratios),
                statistics.median(whole), min(whole), max(whole), "; ".join(detail)))
        print("first 5 losses, C: %s; PyTorch: %s" % (" ".join("%.4f" % v for v in c_losses[:5]), " ".join("%.4f" % v for v in t_losses[:5])))


if __name__ == "__main__":
    main()
