#!/usr/bin/python3
"""Exact ground truth for near-duplicate detection (issue 14), by definition.

Similarity of two documents: the Jaccard index of their sets of character
n-grams (n = 3 unless --n) of the normalized text:

  norm(s) = collapse(NFKC(casefold(NFKC(s))))
    NFKC, casefold: Python's unicodedata.normalize('NFKC', .) and str.casefold()
      (Unicode full case folding). The second NFKC makes norm idempotent:
      casefold can produce sequences that NFKC changes again (e.g. U+0390 ΐ
      casefolds to ι + combining diaeresis + acute, which NFKC recomposes).
      ICU's nfkc_cf differs in places: it maps default-ignorable code points
      (U+200B ZERO WIDTH SPACE, soft hyphen U+00AD, variation selectors) to
      nothing, which this definition keeps; the Unicode version is Python's
      (unicodedata.unidata_version, 14.0.0 on Debian 12's python3 3.11).
    collapse: every maximal run of white space (str.isspace(): Unicode
      White_Space plus the ASCII separators U+001C..U+001F) becomes one U+0020,
      and leading/trailing white space is removed. Punctuation is kept.
  grams(s) = the set of all substrings of n consecutive code points of norm(s);
    if norm(s) has fewer than n code points, the one-element set {norm(s)}
    (so the empty text has the shingle "" and two empty texts have J = 1).
  J(a, b) = |grams(a) & grams(b)| / |grams(a) | grams(b)|, compared with a
    threshold exactly (integers and fractions, no floating point).

Stream decision at threshold tau (first occurrence wins): walk the stream in
file order; a document is a duplicate iff some earlier KEPT document has
J >= tau with it; otherwise it is kept. A duplicate names "dup_of", the
EARLIEST kept document (in stream order) with J >= tau, and its "sim"; it
also names "best_of", the kept document with the highest J (ties: earliest),
and "best_sim".

The pairs (all pairs with J >= --min-sim, default 0.3) come from an exact
prefix-filtering join: n-grams are ranked by a fixed global order (ascending
document frequency in the stream, ties by the first 8 bytes of blake2b of the
n-gram); each document's probe prefix (its first |x| - ceil(t|x|) + 1 n-grams
in that order, t = --min-sim) is indexed in full (the stream is not sorted by
size), candidates share a prefix n-gram and pass the length filter
t|x| <= |y| <= |x|/t, and every candidate's intersection is counted exactly.
--check compares the join and the stream outcome against a brute-force double
loop over n-gram string sets on a random sample (<= 1,500 documents per file)
and exits 1 on any difference.

Usage:
  scripts/ground_truth.py FILE.jsonl... [--out DIR] [--n 3] [--taus 0.5,0.7,0.8]
  scripts/ground_truth.py --check FILE.jsonl...
Outputs per input X.jsonl: DIR/X.labels.jsonl, one line per document in stream
order: {"id": ..., "n": 3, "decisions": {"0.5": null | {"dup_of": id,
"sim": 0.812, "best_of": id, "best_sim": 0.9}, ...}}, and DIR/X.pairs.jsonl:
{"a": id (earlier), "b": id (later), "inter": I, "union": U, "j": I/U}.
"""
import argparse
import hashlib
import json
import os
import random
import re
import sys
import time
import unicodedata
from fractions import Fraction

import numpy as np

WS = re.compile(r"\s+")


def normalize(s):
    s = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", s).casefold())
    return WS.sub(" ", s).strip()


def grams(text, n):
    s = normalize(text)
    if len(s) < n:
        return {s}
    return {s[i:i + n] for i in range(len(s) - n + 1)}


def read_stream(path, id_field="id", text_field="text"):
    ids, texts = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            ids.append(r[id_field])
            texts.append(r[text_field])
    return ids, texts


def ceil_mul(t, k):
    """ceil(t * k) for a Fraction t and an int k, exactly."""
    return -((-t.numerator * k) // t.denominator)


def ge(inter, union, t):
    """inter / union >= t, exactly."""
    return inter * t.denominator >= t.numerator * union


# ---------------------------------------------------------------- the join
def ranges(starts, ends):
    """np.concatenate([np.arange(a, b) for a, b in zip(starts, ends)])."""
    lens = ends - starts
    offs = np.cumsum(lens) - lens
    return np.repeat(starts - offs, lens) + np.arange(lens.sum())


def join(sets, t):
    """All pairs (i, j, inter, union), i < j, with J >= t. sets: list of sets."""
    df = {}
    for s in sets:
        for g in s:
            df[g] = df.get(g, 0) + 1
    key = lambda g: (df[g], hashlib.blake2b(g.encode("utf-8"), digest_size=8).digest())
    order = sorted(df, key=key)
    rank = {g: i for i, g in enumerate(order)}
    V, N = len(order), len(sets)
    docs = [np.sort(np.fromiter((rank[g] for g in s), dtype=np.int64, count=len(s))) for s in sets]
    sizes = np.array([len(d) for d in docs], dtype=np.int64)
    plen = np.array([k - ceil_mul(t, k) + 1 for k in sizes], dtype=np.int64)
    # inverted index of the probe prefixes, CSR: token -> documents (ascending)
    tok = np.concatenate([d[:p] for d, p in zip(docs, plen)]) if N else np.zeros(0, np.int64)
    own = np.repeat(np.arange(N, dtype=np.int64), plen)
    o = np.lexsort((own, tok))
    post = own[o]
    indptr = np.zeros(V + 1, dtype=np.int64)
    np.add.at(indptr, tok + 1, 1)
    indptr = np.cumsum(indptr)
    dptr = np.concatenate([[0], np.cumsum(sizes)])
    alltok = np.concatenate(docs) if N else np.zeros(0, np.int64)
    mark = np.zeros(V, dtype=bool)
    seen = np.zeros(N, dtype=bool)
    out = []
    for x in range(N):
        px = docs[x][:plen[x]]
        lo, hi = indptr[px], indptr[px + 1]
        if (hi - lo).sum() == 0:
            continue
        seen[post[ranges(lo, hi)]] = True
        cand = np.flatnonzero(seen[x + 1:]) + (x + 1)
        seen[:] = False
        sx = sizes[x]
        sy = sizes[cand]
        # length filter: t*|x| <= |y| <= |x|/t
        cand = cand[(sy * t.denominator >= t.numerator * sx) & (sx * t.denominator >= t.numerator * sy)]
        if len(cand) == 0:
            continue
        mark[docs[x]] = True
        starts, ends = dptr[cand], dptr[cand + 1]
        idx = ranges(starts, ends)
        hits = mark[alltok[idx]].astype(np.int64)
        offs = np.concatenate([[0], np.cumsum(ends - starts)[:-1]])
        inter = np.add.reduceat(hits, offs)
        mark[docs[x]] = False
        union = sx + sizes[cand] - inter
        ok = inter * t.denominator >= t.numerator * union
        for y, i, u in zip(cand[ok].tolist(), inter[ok].tolist(), union[ok].tolist()):
            out.append((x, y, i, u))
    out.sort()
    return out


def stream_outcome(N, pairs, tau):
    """From pairs (i<j, inter, union) with J >= some t <= tau: per document
    None (kept) or (dup_of, inter, union, best_of, best_inter, best_union)."""
    nb = [[] for _ in range(N)]
    for i, j, a, u in pairs:
        if ge(a, u, tau):
            nb[j].append((i, a, u))
    kept = np.zeros(N, dtype=bool)
    res = []
    for j in range(N):
        ks = [(i, a, u) for i, a, u in sorted(nb[j]) if kept[i]]
        if not ks:
            kept[j] = True
            res.append(None)
            continue
        first = ks[0]
        best = first
        for c in ks[1:]:
            if Fraction(c[1], c[2]) > Fraction(best[1], best[2]):
                best = c
        res.append((first[0], first[1], first[2], best[0], best[1], best[2]))
    return res


# ---------------------------------------------------------------- brute force
def brute_pairs(sets, t):
    out = []
    fs = [frozenset(s) for s in sets]
    for i in range(len(fs)):
        a = fs[i]
        for j in range(i + 1, len(fs)):
            b = fs[j]
            inter = len(a & b)
            union = len(a) + len(b) - inter
            if ge(inter, union, t):
                out.append((i, j, inter, union))
    return out


def brute_stream(sets, tau):
    fs = [frozenset(s) for s in sets]
    kept, res = [], []
    for j, b in enumerate(fs):
        hit = None
        best = None
        for i in kept:
            a = fs[i]
            inter = len(a & b)
            union = len(a) + len(b) - inter
            if ge(inter, union, tau):
                if hit is None:
                    hit = (i, inter, union)
                if best is None or Fraction(inter, union) > Fraction(best[1], best[2]):
                    best = (i, inter, union)
        if hit is None:
            kept.append(j)
            res.append(None)
        else:
            res.append(hit + best)
    return res


def parse_taus(s):
    return [Fraction(x) for x in s.split(",")]


def tau_key(t):
    return str(float(t))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--taus", default="0.5,0.7,0.8")
    ap.add_argument("--min-sim", default="0.3")
    ap.add_argument("--out", default="out/truth")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--sample", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args()
    taus = parse_taus(args.taus)
    tmin = Fraction(args.min_sim)
    assert all(t >= tmin for t in taus)
    bad = 0
    for path in args.files:
        ids, texts = read_stream(path)
        if args.check:
            idx = list(range(len(ids)))
            if len(idx) > args.sample:
                idx = sorted(random.Random("%d:%s" % (args.seed, os.path.basename(path))).sample(idx, args.sample))
            sets = [grams(texts[i], args.n) for i in idx]
            t0 = time.time()
            jp = join(sets, tmin)
            t1 = time.time()
            bp = brute_pairs(sets, tmin)
            t2 = time.time()
            diff = len(set(jp) ^ set(bp))
            msg = "%s: sample %d, pairs J>=%s join %d brute %d diff %d (join %.2fs, brute %.2fs)" % (
                path, len(idx), args.min_sim, len(jp), len(bp), diff, t1 - t0, t2 - t1)
            for tau in taus:
                a = stream_outcome(len(sets), jp, tau)
                b = brute_stream(sets, tau)
                d = sum(1 for x, y in zip(a, b) if x != y)
                diff += d
                msg += "; tau %s: %d dup, %d diff" % (tau_key(tau), sum(x is not None for x in a), d)
            print(msg)
            bad += diff
            continue
        t0 = time.time()
        sets = [grams(t, args.n) for t in texts]
        pairs = join(sets, tmin)
        outs = {tau: stream_outcome(len(ids), pairs, tau) for tau in taus}
        dt = time.time() - t0
        base = os.path.splitext(os.path.basename(path))[0]
        sub = os.path.basename(os.path.dirname(os.path.abspath(path)))
        d = os.path.join(args.out, sub)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, base + ".pairs.jsonl"), "w", encoding="utf-8") as f:
            for i, j, a, u in pairs:
                f.write(json.dumps({"a": ids[i], "b": ids[j], "inter": a, "union": u,
                                    "j": round(a / u, 6)}, ensure_ascii=False) + "\n")
        with open(os.path.join(d, base + ".labels.jsonl"), "w", encoding="utf-8") as f:
            for k in range(len(ids)):
                dec = {}
                for tau in taus:
                    r = outs[tau][k]
                    dec[tau_key(tau)] = None if r is None else {
                        "dup_of": ids[r[0]], "sim": round(r[1] / r[2], 6),
                        "best_of": ids[r[3]], "best_sim": round(r[4] / r[5], 6)}
                f.write(json.dumps({"id": ids[k], "n": args.n, "decisions": dec}, ensure_ascii=False) + "\n")
        stats = {"file": path, "docs": len(ids), "seconds": round(dt, 2)}
        for tau in taus:
            stats["pairs@" + tau_key(tau)] = sum(1 for i, j, a, u in pairs if ge(a, u, tau))
            stats["dups@" + tau_key(tau)] = sum(r is not None for r in outs[tau])
        stats["pairs@" + str(float(tmin))] = len(pairs)
        print(json.dumps(stats))
    if args.check:
        print("check:", "FAILED" if bad else "OK")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
