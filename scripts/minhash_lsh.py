#!/usr/bin/python3
"""MinHash-LSH baseline (issue 14) and the scorer of decision files.

Baseline, the way datasketch users deduplicate a stream: 128 permutations
(datasketch's: sha1 32-bit hash of the UTF-8 n-gram, (a*h + b) mod 2^61-1
& 0xffffffff in wrapping uint64, a and b from numpy RandomState(1)), bands x
rows chosen per tau as datasketch's _optimal_param (minimise the false-
positive and false-negative integrals, weights 0.5/0.5, b*r <= 128). Over the
same n-gram sets as scripts/ground_truth.py. Query before insert; a candidate
is accepted iff its MinHash estimate (share of equal hash values) >= tau; the
document is a duplicate of the earliest accepted kept candidate, otherwise it
is kept and inserted.

  scripts/minhash_lsh.py run FILE.jsonl --tau 0.5 [--n 3] --out DUPS.jsonl
      writes {"id", "duplicate_of", "estimate"} per duplicate, prints docs/s
  scripts/minhash_lsh.py score --truth LABELS.jsonl --tau 0.5 DUPS.jsonl
      precision/recall/F1 of a decision file (any JSONL with "id" per
      duplicate: this baseline's or neardup's --duplicates) against the exact
      stream outcome: a positive is a document decided duplicate; a true
      positive iff the ground truth says duplicate too (whichever document it
      names).
"""
import argparse
import hashlib
import json
import struct
import sys
import time

import numpy as np

sys.path.insert(0, __import__("os").path.dirname(__file__))
from ground_truth import grams, read_stream  # noqa: E402

MERSENNE = np.uint64((1 << 61) - 1)
MAXH = np.uint64((1 << 32) - 1)


def integrate(f, a, b, n=1000):
    xs = np.linspace(a, b, n + 1)
    ys = f(xs)
    return float(np.trapz(ys, xs))


def optimal_param(tau, num_perm=128, fp_w=0.5, fn_w=0.5):
    best, opt = float("inf"), (0, 0)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp = integrate(lambda s: 1 - (1 - s ** r) ** b, 0.0, tau)
            fn = integrate(lambda s: 1 - (1 - (1 - s ** r) ** b), tau, 1.0)
            err = fp * fp_w + fn * fn_w
            if err < best:
                best, opt = err, (b, r)
    return opt


class MinHasher:
    def __init__(self, num_perm=128):
        gen = np.random.RandomState(seed=1)
        perms = np.array([(gen.randint(1, MERSENNE, dtype=np.uint64), gen.randint(0, MERSENNE, dtype=np.uint64))
                          for _ in range(num_perm)], dtype=np.uint64).T
        self.a, self.b = perms[0][:, None], perms[1][:, None]
        self.cache = {}

    def h32(self, g):
        v = self.cache.get(g)
        if v is None:
            v = struct.unpack("<I", hashlib.sha1(g.encode("utf-8")).digest()[:4])[0]
            self.cache[g] = v
        return v

    def __call__(self, gs):
        hv = np.array([self.h32(g) for g in gs], dtype=np.uint64)[None, :]
        with np.errstate(over="ignore"):
            phv = np.bitwise_and((hv * self.a + self.b) % MERSENNE, MAXH)
        return phv.min(axis=1)


def run(path, tau, n, out):
    ids, texts = read_stream(path)
    b, r = optimal_param(tau)
    mh = MinHasher()
    t0 = time.time()
    tables = [dict() for _ in range(b)]
    sigs = []
    ndup = 0
    with open(out, "w", encoding="utf-8") as f:
        for k, text in enumerate(texts):
            sig = mh(grams(text, n))
            keys = [sig[i * r:(i + 1) * r].tobytes() for i in range(b)]
            cands = set()
            for t, key in zip(tables, keys):
                cands.update(t.get(key, ()))
            hit = None
            for c in sorted(cands):
                est = float(np.mean(sigs[c][1] == sig))
                if est >= tau:
                    hit = (c, est)
                    break
            if hit is not None:
                ndup += 1
                f.write(json.dumps({"id": ids[k], "duplicate_of": ids[sigs[hit[0]][0]],
                                    "estimate": round(hit[1], 6)}, ensure_ascii=False) + "\n")
                continue
            idx = len(sigs)
            sigs.append((k, sig))
            for t, key in zip(tables, keys):
                t.setdefault(key, []).append(idx)
    dt = time.time() - t0
    print(json.dumps({"file": path, "tau": tau, "bands": b, "rows": r, "docs": len(ids), "duplicates": ndup,
                      "seconds": round(dt, 2), "docs_per_s": round(len(ids) / dt, 1)}))


def score(truth, tau, dups):
    key = str(float(tau))
    truth_dup, all_ids = set(), []
    with open(truth, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            all_ids.append(json.dumps(r["id"], ensure_ascii=False))
            if r["decisions"][key] is not None:
                truth_dup.add(all_ids[-1])
    pred = set()
    with open(dups, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                pred.add(json.dumps(json.loads(line)["id"], ensure_ascii=False))
    tp = len(pred & truth_dup)
    p = tp / len(pred) if pred else 1.0
    rc = tp / len(truth_dup) if truth_dup else 1.0
    f1 = 2 * p * rc / (p + rc) if p + rc else 0.0
    return {"tau": tau, "docs": len(all_ids), "true_dups": len(truth_dup), "decided_dups": len(pred), "tp": tp,
            "precision": round(p, 4), "recall": round(rc, 4), "f1": round(f1, 4)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("run")
    a.add_argument("file")
    a.add_argument("--tau", type=float, required=True)
    a.add_argument("--n", type=int, default=3)
    a.add_argument("--out", required=True)
    s = sub.add_parser("score")
    s.add_argument("dups")
    s.add_argument("--truth", required=True)
    s.add_argument("--tau", type=float, required=True)
    p = sub.add_parser("params")
    p.add_argument("--tau", type=float, required=True)
    args = ap.parse_args()
    if args.cmd == "run":
        run(args.file, args.tau, args.n, args.out)
    elif args.cmd == "score":
        print(json.dumps(score(args.truth, args.tau, args.dups)))
    else:
        print(optimal_param(args.tau))


if __name__ == "__main__":
    main()
