#!/usr/bin/env python3
"""Offline checker of a recorded service history (issue 16.2, in the style of Jepsen).

Reads the JSONL history that `scripts/cluster_failover.py --history FILE` writes: one line per
/check request ({"kind": "check", id, text, port, t0, t1, status, stored, duplicate, named})
and one per document read back once the run is over ({"kind": "read", id, status}). Verifies,
whatever faults the run injected:

  1. no two stored documents are near-duplicates by the namespace's rule (Jaccard of the
     character 3-gram sets >= the threshold, the definition of docs/ACCURACY.md and of
     scripts/ground_truth.py, computed exactly by a prefix-filter join: every pair at or above
     the threshold shares one of the first |x| - ceil(t|x|) + 1 grams of each set in a fixed
     global order, and every such candidate is counted exactly). "Stored" = readable at the
     end, acknowledged or not: a check answered 503 may still have been kept.
  2. every acknowledged document (an answer with stored = true) is readable at the end;
  3. every document an answer named as its match is readable at the end.

Caveat for 1: the rule is the one the stores apply to the candidates they find; a pair that
neither fingerprint nor anchors find is not a violation of the service's contract. The failover
workload's near-duplicates are exact reposts (always found by the equal-text path), so there
any such pair is a violation.

  scripts/history_check.py HISTORY.jsonl [--threshold 0.7]
Exit 0 when nothing is violated; prints every violation otherwise.
"""
import argparse
import json
import re
import sys
import unicodedata
from fractions import Fraction

WS = re.compile(r"\s+")


def grams(text, n):
    """scripts/ground_truth.py's n-gram set (no numpy needed here)."""
    s = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    s = WS.sub(" ", s).strip()
    return {s} if len(s) < n else {s[i:i + n] for i in range(len(s) - n + 1)}


def join(sets, t):
    """All pairs (i, j, inter, union), i < j, with Jaccard >= t (a Fraction), exactly."""
    df = {}
    for s in sets:
        for g in s:
            df[g] = df.get(g, 0) + 1
    order = lambda g: (df[g], g)  # noqa: E731  rare grams first: short posting lists
    index, out = {}, []
    for j, s in enumerate(sets):
        k = len(s)
        prefix = sorted(s, key=order)[:k - (-(-t.numerator * k // t.denominator)) + 1]
        cands = set()
        for g in prefix:
            cands.update(index.get(g, ()))
        for i in sorted(cands):
            inter = len(sets[i] & s)
            union = len(sets[i]) + k - inter
            if inter * t.denominator >= t.numerator * union:
                out.append((i, j, inter, union))
        for g in prefix:
            index.setdefault(g, []).append(j)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("history")
    ap.add_argument("--threshold", default="0.7")
    ap.add_argument("--n", type=int, default=3)
    args = ap.parse_args()
    texts, acknowledged, named, reads, answers = {}, set(), set(), {}, {}
    with open(args.history) as f:
        for line in f:
            rec = json.loads(line)
            if rec["kind"] == "check":
                texts[rec["id"]] = rec["text"]
                answers[rec["status"]] = answers.get(rec["status"], 0) + 1
                if rec["status"] == 200 and rec["stored"]:
                    acknowledged.add(rec["id"])
                if rec["status"] == 200 and rec["duplicate"] and rec["named"]:
                    named.add(rec["named"])
            elif rec["kind"] == "read":
                reads[rec["id"]] = rec["status"]
    violations = []
    stored = sorted(i for i, st in reads.items() if st == 200 and i in texts)
    tau = Fraction(args.threshold)
    for x, y, inter, union in join([grams(texts[i], args.n) for i in stored], tau):
        violations.append(f"two stored near-duplicates: {stored[x]} and {stored[y]} (J = {inter}/{union})")
    for i in sorted(acknowledged):
        if reads.get(i) != 200:
            violations.append(f"acknowledged document {i} is not readable (GET {reads.get(i)})")
    for i in sorted(named):
        if reads.get(i) != 200:
            violations.append(f"named match {i} is not readable (GET {reads.get(i)})")
    for v in violations:
        print(v)
    print(f"checks: {sum(answers.values())} {answers}; stored: {len(stored)}, acknowledged: {len(acknowledged)}, "
          f"named: {len(named)}; violations: {len(violations)}")
    sys.exit(1 if violations else 0)


if __name__ == "__main__":
    main()
