#!/usr/bin/env python3
"""Greedy decoding of a task file's examples by the PyTorch model (python/model.py), token by
token as the papers decode: each example's prompt (up to SEP), then the model's most likely
token appended again and again until the answer's length and EOS. Prints the number of
examples and of those decoded exactly: the count that the trainer's teacher-forced exact
match (llmc/task_eval.h) must reproduce (tests/tasks.sh).

    python3 tests/greedy.py MODEL.bin TASKFILE
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from model import GPT  # noqa: E402

SEP = 2  # llmc/tasks.h


def main():
    model_path, task_path = sys.argv[1], sys.argv[2]
    model = GPT.from_checkpoint(model_path)
    V = model.cfg.vocab_size
    header = np.fromfile(task_path, dtype=np.int32, count=256)
    ntok, R = int(header[2]), int(header[3])
    tokens = np.fromfile(task_path, dtype=np.uint16, count=ntok, offset=1024).astype(np.int64)
    mask = np.fromfile(task_path, dtype=np.uint8, count=ntok, offset=1024 + 2 * ntok)
    rows, exact = (ntok - 1) // R, 0
    with torch.no_grad():
        for r in range(rows):
            row, m = tokens[r * R:(r + 1) * R], mask[r * R:(r + 1) * R]
            sep = int(np.argmax(row == SEP))
            answer = row[m == 1]  # the answer's tokens and EOS
            seq = list(row[:sep + 1])
            right = True
            for want in answer:
                logits, _ = model(torch.tensor([seq]))
                token = int(torch.argmax(logits[0, -1, :V]))  # the first of equals, as the trainer's
                seq.append(token)
                if token != want:
                    right = False
                    break
            exact += right
    print(rows, exact)


if __name__ == "__main__":
    main()
