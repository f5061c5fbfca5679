#!/usr/bin/env python3
"""The tasks' baselines (./tasks baseline, data/tasks.c) against brute force: every input of a
small length enumerated with its probability under the generator's draws, the answers computed
here again (Python's own arithmetic, not the automata of data/tasks.c), and the best reader of
the first a and the last w - a symbols found by grouping the inputs by what it sees.

    python3 tests/task_baselines.py ./tasks

Prints a line per case and exits 1 if ./tasks differs from brute force by more than 1e-9 (an
exact value) or gives less than brute force (add's upper bound).
"""
import itertools
import subprocess
import sys
from collections import defaultdict


def inputs(task, n):
    """every input of length n as (symbols, probability); a symbol is a string of characters"""
    if task == "sum":  # the value kept in 0..9: each step one of the 11 terms that keep it there
        def walk(xs, v, p, k):
            if k == n:
                yield tuple(xs), p
                return
            steps = [(o, d) for o in "+-" for d in range(10) if 0 <= (v + d if o == "+" else v - d) <= 9]
            for o, d in steps:
                yield from walk(xs + [o + str(d)], v + d if o == "+" else v - d, p / len(steps), k + 1)
        for v in range(10):
            yield from walk([str(v)], v, 0.1, 1)
    elif task == "mod":
        digits, ops = "01234", "+-*"
        later = [o + d for o in ops for d in digits]
        for first in digits:
            for rest in itertools.product(later, repeat=n - 1):
                yield (first,) + rest, 1 / (len(digits) * len(later) ** (n - 1))
    elif task == "add":  # one operand of n digits, the other of 1..n, either order; LSD first, no leading zero
        def operands(k):
            for ds in itertools.product("0123456789", repeat=k):
                if k > 1 and ds[-1] == "0":
                    continue
                yield "".join(ds), 1 / (10 ** (k - 1) * (9 if k > 1 else 10))
        for other in range(1, n + 1):
            for first_long in (0, 1):
                for a, pa in operands(n if first_long else other):
                    for b, pb in operands(other if first_long else n):
                        yield tuple(a) + ("+",) + tuple(b), pa * pb / (2 * n)
    else:
        alphabet = {"copy": "abcdefghijklmnopqrstuvwxyz", "reverse": "abcdefghijklmnopqrstuvwxyz", "sort": "abcdefghijklmnopqrstuvwxyz",
                    "bucket": "01234", "cycle": "-0+"}.get(task, "01")
        for xs in itertools.product(alphabet, repeat=n):
            yield xs, 1 / len(alphabet) ** n


def answer(task, xs):
    s = "".join(xs)
    if task == "sum":  # each operator, and the running value after its term
        return "".join((s[i - 1] if i else "") + str(eval(s[:i + 1])) for i in range(0, len(s), 2))
    if task == "mod":
        return str(eval(s) % 5)
    if task == "copy":
        return s
    if task == "reverse":
        return s[::-1]
    if task in ("sort", "bucket"):
        return "".join(sorted(s))
    if task == "parity":
        return str(s.count("1") % 2)
    if task == "even":
        return str(sum(s[i] != s[i + 1] for i in range(len(s) - 1)) % 2)
    if task == "dup":
        return s + s
    if task == "cycle":
        return str((s.count("+") - s.count("-")) % 5)
    a, b = s.split("+")
    return str(int(a[::-1]) + int(b[::-1]))[::-1]


def best_reader(task, n, w):
    """the exact match of the best reader of the first a and last w - a symbols (the best a)"""
    cases = list(inputs(task, n))
    best = 0
    for a in range(w + 1):
        seen = defaultdict(lambda: defaultdict(float))
        for xs, p in cases:
            view = (xs[:a], xs[len(xs) - (w - a):] if w > a else ()) if w < n else xs
            seen[view][answer(task, xs)] += p
        best = max(best, sum(max(by.values()) for by in seen.values()))
    return best


CASES = [("sum", 4, 2), ("sum", 4, 3), ("sum", 3, 0), ("mod", 4, 2), ("mod", 4, 3), ("cycle", 6, 3), ("cycle", 5, 0), ("parity", 7, 3),
         ("even", 7, 2), ("even", 6, 0), ("copy", 3, 1), ("reverse", 3, 2), ("sort", 3, 1), ("bucket", 5, 2), ("dup", 6, 3),
         ("add", 2, 1), ("add", 2, 0)]


def main():
    tasks_bin = sys.argv[1]
    failures = 0
    for task, n, w in CASES:
        out = subprocess.run([tasks_bin, "-w", str(w), "baseline", task, str(n)], check=True, capture_output=True, text=True).stdout
        row = out.splitlines()[1].split(",")
        got, bound = float(row[4]), row[5] == "1"
        want = best_reader(task, n, w)
        ok = got >= want - 1e-12 if bound else abs(got - want) <= 1e-9
        failures += not ok
        print("  %s  %s length %d, %d symbols seen: ./tasks %s%.6g, brute force %.6g" % (
            "ok  " if ok else "FAIL", task, n, w, "<= " if bound else "", got, want))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
