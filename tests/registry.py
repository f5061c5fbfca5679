"""The registry of encodings (llmc/pe_list.h) against what must agree with it and cannot be
generated from it: every line's file pe/<file>.h exists and NAME is name in capitals, the
ids run 0, 1, 2, ... in order; python/model.py's ENCODINGS hold the same names in the same
order with the same kind, randomized positions and revision (when PyTorch is there to import
it); the README's table of encodings names each one once; make refuses a build whose names
are not the registry's (PE, DAPE, DAPE_D of several words or out of range, and a binary named
directly with such a stem) with one error naming the valid ones, and builds the valid ones.

usage: python3 tests/registry.py  (from anywhere; make test runs it)"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
failures = []


def fail(msg):
    failures.append(msg)
    print("  FAIL  " + msg)


def registry():
    text = open(os.path.join(ROOT, "llmc", "pe_list.h")).read()
    rows = re.findall(r"^\s*X\(\s*(\d+),\s*(\w+),\s*(\w+),\s*(\w+),\s*(\w+),\s*([01]),\s*([01]),\s*(\d+)\)", text, re.M)
    if not rows:
        fail("no lines X(id, NAME, name, file, kind, rp, dape, rev) in llmc/pe_list.h")
    return [dict(id=int(r[0]), NAME=r[1], name=r[2], file=r[3], kind=r[4].lower(), rp=r[5] == "1", dape=r[6] == "1", rev=int(r[7]))
            for r in rows]


def make_dry(args):
    """make -n -B ARGS in the repository (without the calling make's flags; -B: the commands of a
    binary that is there already, as make test builds them first): its exit status and output"""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    p = subprocess.run(["make", "-n", "-B", "--no-print-directory", "-C", ROOT] + args, env=env, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def make_checks(names):
    """the build's names checked at make time (Makefile, dape.mk): one error, with the valid names"""
    valid = "valid names: " + " ".join(names)
    refused = [
        (["train_gpt2", "PE=nonsense"], "unknown PE 'nonsense'; " + valid),
        (["train_gpt2", "PE=nonsense learned"], "unknown PE 'nonsense learned'; " + valid),
        (["train_gpt2", "PE=kerple learned"], "unknown PE 'kerple learned'; " + valid),
        (["train_gpt2", "PE=%"], "unknown PE '%'; " + valid),
        (["train_gpt2", "PE=kerple", "DAPE=1x3 mlp"], "unknown DAPE '1x3 mlp'; valid: mlp 1x3 1x5 1x7"),
        (["train_gpt2", "PE=cable", "DAPE=1x3"], "DAPE runs on the bases"),
        (["train_gpt2", "PE=kerple", "DAPE=1x3", "DAPE_D=2000"], "DAPE_D must be a width from 1 to 1024, not '2000'"),
        (["train_gpt2", "PE=kerple", "DAPE=1x3", "DAPE_D=1025"], "DAPE_D must be a width from 1 to 1024, not '1025'"),
        (["train_gpt2", "PE=kerple", "DAPE=1x3", "DAPE_D=64 32"], "DAPE_D must be a width from 1 to 1024, not '64 32'"),
        (["train_gpt2", "PE=kerple", "DAPE=1x3", "DAPE_EDGE_EXACT=0 1"], "DAPE_EDGE_EXACT must be 0 or 1"),
        (["build/train_gpt2_kerple_dape1x3_d0"], "kerple_dape1x3_d0: DAPE_D must be a width from 1 to 1024, not '0'"),
        (["build/test_gpt2_kerple_dape1x3_d2000"], "kerple_dape1x3_d2000: DAPE_D must be a width from 1 to 1024, not '2000'"),
        (["build/train_gpt2_nonsense"], "nonsense: unknown PE 'nonsense'; " + valid),
        (["build/gradcheck_cable_dape1x3"], "cable_dape1x3: DAPE runs on the bases"),
        (["build/train_gpt2_kerple_dape1x3_foo"], "kerple_dape1x3_foo: not a binary's name (its names make kerple_dape1x3)"),
    ]
    for args, text in refused:
        rc, out = make_dry(args)
        errors = [line for line in out.splitlines() if "***" in line]
        if rc == 0 or len(errors) != 1 or text not in errors[0]:
            fail("make %s: exit %d, expected one error with \"%s\"; got: %s" % (" ".join(args), rc, text, out.strip()[-300:]))
    accepted = [
        (["train_gpt2", "PE=kerple", "DAPE=1x3", "DAPE_D=1024"], "-DPE_KERPLE -DDAPE_KERNEL=3 -DDAPE_WIDTH=1024"),
        (["build/test_gpt2_nope_dape1x5_d64_edge0"], "-DPE_NOPE -DDAPE_KERNEL=5 -DDAPE_WIDTH=64 -DDAPE_EDGE_EXACT=0"),
        (["build/train_gpt2_" + names[-1]], "-DPE_" + names[-1].upper() + " "),
    ]
    for args, text in accepted:
        rc, out = make_dry(args)
        if rc != 0 or text not in out:
            fail("make %s: exit %d, expected a build with %s; got: %s" % (" ".join(args), rc, text, out.strip()[-300:]))
    if not failures:
        print("  ok    make: %d bad builds refused with one error naming the valid names, %d valid ones built" % (len(refused), len(accepted)))


def main():
    reg = registry()
    for k, e in enumerate(reg):
        if e["id"] != k:
            fail("%s: id %d on line %d of the registry (the ids run 0, 1, 2, ... in order)" % (e["name"], e["id"], k))
        if e["NAME"] != e["name"].upper():
            fail("%s: NAME %s is not the name in capitals" % (e["name"], e["NAME"]))
        if not os.path.isfile(os.path.join(ROOT, "pe", e["file"] + ".h")):
            fail("%s: its file pe/%s.h does not exist" % (e["name"], e["file"]))
        if e["kind"] not in ("embed", "qk", "bias", "attn", "none"):
            fail("%s: kind %s is none of EMBED, QK, BIAS, ATTN, NONE" % (e["name"], e["kind"]))
    names = [e["name"] for e in reg]
    print("  ok    %d encodings in llmc/pe_list.h: %s" % (len(reg), ", ".join(names)) if not failures else "")

    try:
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import model as M
    except ImportError as err:
        print("  python/model.py not imported (%s): its names are not checked here" % err)
    else:
        if list(M.ENCODINGS) != names:
            fail("python/model.py ENCODINGS %s, the registry %s" % (list(M.ENCODINGS), names))
        for e in reg:
            enc = M.ENCODINGS.get(e["name"])
            if enc is None:
                continue
            for field, want in (("kind", e["kind"]), ("rp", e["rp"]), ("revision", e["rev"])):
                if getattr(enc, field) != want:
                    fail("python/model.py %s: %s = %r, the registry says %r" % (e["name"], field, getattr(enc, field), want))
        if not failures:
            print("  ok    python/model.py: the same names in the same order, kinds, randomized positions, revisions")

    readme = open(os.path.join(ROOT, "README.md")).read()
    table = re.search(r"^\| encoding \|.*?\n((?:\|.*\n)+)", readme, re.M)
    if table is None:
        fail("README.md has no table whose header starts with '| encoding |'")
    else:
        listed = re.findall(r"^\| `(\w+)`", table.group(1), re.M)
        if sorted(listed) != sorted(names) or len(listed) != len(set(listed)):
            fail("README.md's table of encodings names %s, the registry %s" % (listed, names))
        else:
            print("  ok    README.md: one row for each encoding")
    rp_lists(reg)
    make_checks(names)
    if failures:
        print("FAIL: %d disagreements with the registry" % len(failures))
        sys.exit(1)


def rp_lists(reg):
    """The lists of the encodings that take randomized positions written out in prose (the
    README's bullet, docs/encodings.md's sentence) name those of the registry's rp column."""
    want = sorted(e["name"] for e in reg if e["rp"])
    for path, pattern in (("README.md", r"\*\*Randomized positions\*\* \(`-rp L`, Ruoss et al\. 2023; ([^)]*)\)"),
                          ("docs/encodings.md", r"Randomized positions \(`-rp L`, Ruoss et al\. 2023\) run on (.*?): each step"),
                          ("docs/randomized-positions.md", r"A run-time option of\s+(.*?), on both trainers"),
                          ("docs/positions.md", r"registry's `rp` column: (.*?)\) reads")):
        m = re.search(pattern, open(os.path.join(ROOT, path)).read(), re.S)
        if m is None:
            fail("%s: no list of the encodings with randomized positions (%s)" % (path, pattern))
            continue
        listed = sorted(re.findall(r"\w+", m.group(1).replace(" and ", " ")))
        if listed != want:
            fail("%s lists %s as taking randomized positions, the registry %s" % (path, listed, want))
        else:
            print("  ok    %s: the encodings with randomized positions" % path)


if __name__ == "__main__":
    main()
