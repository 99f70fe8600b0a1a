#!/usr/bin/python3
"""Offline checker of a recorded service history (issue 16, in the style of Jepsen).

A history (JSON lines, written by scripts/history/record.py) holds:
  {"type": "header", "namespace": ..., "threshold": T, "shingle_size": N, "recheck": true, ...}
  {"type": "op", "id": ..., "text": ..., "f": "check"|"batch", "instance": ..., "t0": s, "t1": s,
   "status": HTTP status or null (no answer: timeout, reset), "answer": {...} or null}
  {"type": "fault", "t": s, "what": "..."}
  {"type": "read", "id": ..., "status": 200|404|null, "t": s}   (final reads, after healing)

Verified, for the namespace's rule (exact Jaccard of character n-grams, scripts/ground_truth.py):
  lost            an answer said stored (200, "stored": true) and the final read does not find it
  unreadable      an answer named a match that the final read does not find
  near-dup kept   two documents of one trial found by the final reads are near-duplicates
                  (J >= T): variants released together, so a race or a fault let both in. When
                  either text has more than 256 distinct n-grams the service estimates J from
                  a bottom-256 sketch (docs/ACCURACY.md): a pair only counts as a violation when
                  J >= T + Z * sqrt(J(1-J)/256) (Z = --z, 4); nearer pairs are listed as
                  "within the estimate's error" and do not fail the run. Two such documents of
                  different trials (trials run one after another, so one was answered before
                  the other was sent) are "across trials": a miss of the candidate generators
                  (fingerprint radius, anchors; the embedded store has them too, ACCURACY.md)
                  or of the store; listed, and violations only with --strict
  stored dup      an answer said duplicate and not stored, and the final read finds the id
  bad match       an answer said duplicate without naming a match, or named a match with
                  "similarity_exact": true whose similarity is not the exact J (or is < T)
  unread          an id that the history touched but the final reads did not resolve (200/404)
A history without final reads cannot be checked (exit 2).

Usage: check.py HISTORY.jsonl [--z 4] [--json OUT]   -> exit 0 valid, 1 violations, 2 unusable
       check.py --self-test                          -> builds histories with each violation
                                                        and checks that every one is caught
"""
import argparse
import json
import math
import os
import sys
from fractions import Fraction

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ground_truth as gt  # noqa: E402

SKETCH_SIZE = 256  # values kept per sketch: sets up to this size are compared exactly


def load(path):
    header, ops, faults, reads = None, [], [], {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{n}: not JSON ({e})")
            t = r.get("type")
            if t == "header":
                header = r
            elif t == "op":
                ops.append(r)
            elif t == "fault":
                faults.append(r)
            elif t == "read":
                reads[r["id"]] = r.get("status")
    return header, ops, faults, reads


class Checker:
    def __init__(self, header, ops, reads, z=4.0, strict=False):
        self.tau = Fraction(str(header["threshold"]))
        self.n = int(header["shingle_size"])
        self.ops, self.reads, self.z, self.strict = ops, reads, z, strict
        self.texts, self.trial = {}, {}
        for op in ops:
            self.texts.setdefault(op["id"], op["text"])
            self.trial.setdefault(op["id"], op.get("trial"))
        self._grams = {}
        self.violations = []
        self.near_misses = []
        self.across_trials = []

    def grams(self, doc_id):
        g = self._grams.get(doc_id)
        if g is None:
            g = self._grams[doc_id] = gt.grams(self.texts[doc_id], self.n)
        return g

    def jaccard(self, a, b):
        ga, gb = self.grams(a), self.grams(b)
        inter = len(ga & gb)
        return Fraction(inter, len(ga) + len(gb) - inter)

    def exact_pair(self, a, b):
        return len(self.grams(a)) <= SKETCH_SIZE and len(self.grams(b)) <= SKETCH_SIZE

    def violate(self, kind, **detail):
        self.violations.append({"kind": kind, **detail})

    def present(self, doc_id):
        return self.reads.get(doc_id) == 200

    def check_answers(self):
        for op in self.ops:
            a = op.get("answer")
            if op.get("status") != 200 or not isinstance(a, dict):
                continue
            doc = op["id"]
            if a.get("stored") and not self.present(doc):
                self.violate("lost", id=doc, t1=op["t1"], instance=op.get("instance"))
            if a.get("duplicate") and not a.get("stored") and self.present(doc):
                self.violate("stored dup", id=doc, t1=op["t1"])
            if a.get("duplicate") and not a.get("matches"):
                self.violate("bad match", id=doc, why="duplicate without a match")
            for m in a.get("matches", []):
                self.check_match(op, m)

    def check_match(self, op, m):
        mid = m.get("id")
        if mid not in self.reads or not self.present(mid):
            self.violate("unreadable", id=op["id"], match=mid, t1=op["t1"])
            return
        if mid not in self.texts or not m.get("similarity_exact"):
            return
        j = self.jaccard(op["id"], mid)
        if abs(float(j) - float(m.get("similarity", -1))) > 1e-6 or (
                op["answer"].get("duplicate") and j < self.tau):
            self.violate("bad match", id=op["id"], match=mid, reported=m.get("similarity"),
                         exact=float(j))

    def check_kept_pairs(self):
        kept = sorted(d for d in self.texts if self.present(d))
        sets = [self.grams(d) for d in kept]
        for x, y, inter, union in gt.join(sets, self.tau):
            a, b, j = kept[x], kept[y], inter / union
            pair = {"a": a, "b": b, "j": round(j, 6)}
            if not (self.exact_pair(a, b) or j >= float(self.tau) + self.z * math.sqrt(j * (1 - j) / SKETCH_SIZE)):
                self.near_misses.append(pair)
            elif self.trial[a] == self.trial[b] or self.strict:
                self.violate("near-dup kept" if self.trial[a] == self.trial[b] else "near-dup kept across trials",
                             **pair)
            else:
                self.across_trials.append(pair)

    def check_reads(self):
        for d in self.texts:
            if self.reads.get(d) not in (200, 404):
                self.violate("unread", id=d, status=self.reads.get(d))

    def run(self):
        self.check_reads()
        self.check_answers()
        self.check_kept_pairs()
        return self.violations


def summarize(header, ops, faults, reads, checker):
    statuses = {}
    for op in ops:
        key = str(op.get("status"))
        statuses[key] = statuses.get(key, 0) + 1
    acked = sum(1 for op in ops if op.get("status") == 200 and (op.get("answer") or {}).get("stored"))
    kinds = {}
    for v in checker.violations:
        kinds[v["kind"]] = kinds.get(v["kind"], 0) + 1
    return {
        "namespace": header.get("namespace"),
        "threshold": header["threshold"],
        "shingle_size": header["shingle_size"],
        "trials": len({op.get("trial") for op in ops}),
        "requests": len(ops),
        "documents": len(checker.texts),
        "statuses": statuses,
        "acknowledged_stored": acked,
        "present": sum(1 for d in checker.texts if checker.present(d)),
        "faults": len(faults),
        "violations": len(checker.violations),
        "violations_by_kind": kinds,
        "within_estimate_error": len(checker.near_misses),
        "across_trials": len(checker.across_trials),
        "valid": not checker.violations,
    }


def check_file(path, z=4.0, strict=False):
    header, ops, faults, reads = load(path)
    if header is None:
        raise SystemExit(f"{path}: no header line")
    if not reads:
        print(f"{path}: no final reads: the history cannot be checked", file=sys.stderr)
        sys.exit(2)
    c = Checker(header, ops, reads, z, strict)
    c.run()
    return summarize(header, ops, faults, reads, c), c


# ------------------------------------------------------------------ self-test
def _op(doc, text, answer, status=200, trial=0):
    return {"type": "op", "id": doc, "text": text, "f": "check", "instance": "i0", "trial": trial,
            "t0": 0.0, "t1": 0.1, "status": status, "answer": answer}


def _answer(doc, stored, dup, matches=()):
    return {"id": doc, "duplicate": dup, "stored": stored, "replay": False, "matches": list(matches)}


def self_test():
    """Each case is a tiny history; the checker must report exactly the expected kinds."""
    base = "the quick brown fox jumps over the lazy dog near the river bank today"
    edit = base.replace("today", "toda")
    other = "an entirely different sentence about cooking rice with green tea"
    j = float(Fraction(len(gt.grams(base, 3) & gt.grams(edit, 3)),
                       len(gt.grams(base, 3) | gt.grams(edit, 3))))
    good = [_op("a", base, _answer("a", True, False)),
            _op("b", edit, _answer("b", False, True, [{"id": "a", "similarity": j,
                                                       "similarity_exact": True}])),
            _op("c", other, _answer("c", True, False))]
    cases = {
        "valid": (good, {"a": 200, "b": 404, "c": 200}, set()),
        "lost": (good, {"a": 200, "b": 404, "c": 404}, {"lost"}),
        "unreadable": (good, {"a": 404, "b": 404, "c": 200}, {"unreadable", "lost"}),
        "near-dup kept": ([good[0], _op("b", edit, _answer("b", True, False)), good[2]],
                          {"a": 200, "b": 200, "c": 200}, {"near-dup kept"}),
        "stored dup": (good, {"a": 200, "b": 200, "c": 200}, {"stored dup", "near-dup kept"}),
        "bad match": ([good[0], _op("b", edit, _answer("b", False, True, [
            {"id": "a", "similarity": 0.99, "similarity_exact": True}])), good[2]],
            {"a": 200, "b": 404, "c": 200}, {"bad match"}),
        "unread": (good, {"a": 200, "b": None, "c": 200}, {"unread"}),
        "across trials": ([good[0], _op("b", edit, _answer("b", True, False), trial=1), good[2]],
                          {"a": 200, "b": 200, "c": 200}, set()),
        "strict": ([good[0], _op("b", edit, _answer("b", True, False), trial=1), good[2]],
                   {"a": 200, "b": 200, "c": 200}, {"near-dup kept across trials"}),
        "indeterminate": ([good[0], _op("b", edit, None, status=None), good[2]],
                          {"a": 200, "b": 404, "c": 200}, set()),
    }
    header = {"type": "header", "threshold": 0.7, "shingle_size": 3}
    assert j >= 0.7, j
    failed = 0
    for name, (ops, reads, want) in cases.items():
        got = {v["kind"] for v in Checker(header, ops, reads, strict=name == "strict").run()}
        ok = got == want
        failed += not ok
        print(f"self-test {name:14s} {'ok' if ok else 'FAILED'}: want {sorted(want)} got {sorted(got)}")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("history", nargs="?")
    ap.add_argument("--z", type=float, default=4.0)
    ap.add_argument("--json", help="write the summary and the violations here")
    ap.add_argument("--strict", action="store_true", help="near-duplicates kept across trials fail the run too")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        sys.exit(self_test())
    if not args.history:
        ap.error("HISTORY is required")
    summary, c = check_file(args.history, args.z, args.strict)
    print(json.dumps(summary, ensure_ascii=False))
    for v in c.violations[:20]:
        print("VIOLATION", json.dumps(v, ensure_ascii=False))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"summary": summary, "violations": c.violations,
                       "within_estimate_error": c.near_misses, "across_trials": c.across_trials},
                      f, ensure_ascii=False, indent=1)
    sys.exit(1 if c.violations else 0)


if __name__ == "__main__":
    main()
