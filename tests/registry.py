"""The registry of encodings (llmc/pe_list.h) against what must agree with it and cannot be
generated from it: every line's file pe/<file>.h exists and NAME is name in capitals, the
ids run 0, 1, 2, ... in order; python/model.py's ENCODINGS hold the same names in the same
order with the same kind, randomized positions and revision (when PyTorch is there to import
it); the README's table of encodings names each one once.

usage: python3 tests/registry.py  (from anywhere; make test runs it)"""
import os
import re
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
    if failures:
        print("FAIL: %d disagreements with the registry" % len(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
