#!/usr/bin/python3
"""Offline checker of a `neardup dedup` run's outputs, for runs too large to compare with an
oracle (the 200M run of docs/SCALING.md). It trusts nothing the run wrote about itself.

Checked, for the default keep policy (`--keep first`) and JSONL input:
  partition      every input line is, in order, either the next line of --kept byte for byte,
                 or the document of the next record of --duplicates (same id), or a bad line
                 (not a JSON object, no string "text", no string or number "id"), which the run
                 skips; nothing is left over in either output. So no document is lost, none is
                 kept twice, and none is both kept and a duplicate.
  match          every duplicate's "duplicate_of" is the id of a kept document before it.
  similarity     on a random sample of duplicates (--sample), recomputed from the two texts by
                 the definition (scripts/ground_truth.py: Jaccard of character n-grams of the
                 normalized texts): a record with "similarity_exact": true must report that
                 similarity (to its 4 decimals) and reach --threshold.
  kept pairs     (with --neardup) no two kept documents are near-duplicates that the
                 fingerprint path must find: the kept file is fingerprinted
                 (`neardup fingerprint`, with --fingerprint-args as the run had them), every
                 pair within --radius bits (the run's -k) is listed (`neardup pairs`), and a
                 pair whose texts both have at most 256 distinct n-grams (so the run computed
                 their similarity exactly) and a Jaccard of at least --threshold is a
                 violation. Other pairs are counted, not judged (the run estimated theirs).
Not checked: that a duplicate names the *best* match, and near-duplicates that only the
anchors would find (recall, measured by `neardup eval` on labelled data, docs/ACCURACY.md).
Skipped in the similarity checks: texts with default-ignorable code points (category Cf: ICU's
normalization removes them, the definition keeps them), and a duplicate whose match's id is
held by several kept documents before it (ids need not be unique; which one is meant is not
known). Texts are compared as dedup analyzed them: their first --max-text-bytes.
Lines dedup skips as bad are skipped here too (not JSON, NaN or Infinity, a lone surrogate
escape, no string text, no string or number id); a byte order mark before a file's first line
is dropped. A line too deeply nested for Python's json makes the check unusable (exit 2).

Inputs are read in the order given; a directory or a pattern expands to its files sorted by
path, as `dedup --input` does (a directory: every regular file below it whose name does not
start with '.'). gzip and zstd are recognized by content (zstd through the `zstd` program).

Usage:
  scripts/check_dedup_output.py --self-test --neardup BIN   -> breaks outputs in each way above
  scripts/check_dedup_output.py -i INPUT... --kept K --duplicates D [--neardup BIN]
      [--sample 20000] [--threshold 0.7] [--n 3] [--radius 3]
      [--fingerprint-args '...'] [--id-field id] [--text-field text] [--max-text-bytes 1048576]
      [--work DIR] [--json OUT] [--seed 1]
Exit: 0 no violation, 1 violations (listed on stderr, at most 20 of each kind), 2 unusable.
"""
import argparse
import array
import glob
import gzip
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
import unicodedata
from fractions import Fraction

try:
    import numpy as np
except ImportError:
    print("check_dedup_output: needs numpy (Debian's python3-numpy; run it as /usr/bin/python3)", file=sys.stderr)
    sys.exit(2)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ground_truth import grams  # noqa: E402


# ---------------------------------------------------------------- reading
def unusable(message):
    """Exit 2: the check could not be made (exit 1 is for violations)."""
    print(f"check_dedup_output: {message}", file=sys.stderr)
    sys.exit(2)


def expand(inputs):
    files = []
    for arg in inputs:
        if os.path.isdir(arg):
            found = []
            for d, subdirs, names in os.walk(arg):
                subdirs[:] = [s for s in subdirs if not s.startswith(".")]
                found += [os.path.join(d, f) for f in names if not f.startswith(".")]
            files += sorted(found)
        elif any(c in arg for c in "*?["):
            matched = []
            for m in glob.glob(arg):
                matched += expand([m]) if os.path.isdir(m) else [m]
            if not matched:
                unusable(f"{arg}: matches no file")
            files += sorted(matched)
        else:
            files.append(arg)
    return files


def lines_of(path):
    """The file's lines as bytes, without their line ends; gzip and zstd by content."""
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == b"\x28\xb5\x2f\xfd":
        proc = subprocess.Popen(["zstd", "-dcq", "--", path], stdout=subprocess.PIPE, bufsize=1 << 20)
        stream = proc.stdout
    elif magic[:2] == b"\x1f\x8b":
        proc, stream = None, gzip.open(path, "rb")
    else:
        proc, stream = None, open(path, "rb", buffering=1 << 20)
    with stream:
        for line in stream:
            yield line[:-1] if line.endswith(b"\n") else line
    if proc is not None and proc.wait() != 0:
        unusable(f"{path}: zstd exited {proc.returncode}")


def input_lines(files):
    for path in files:
        first = True
        for line in lines_of(path):
            # dedup drops a byte order mark before a file's first line (docs/cli.md).
            yield line[3:] if first and line.startswith(b"\xef\xbb\xbf") else line
            first = False


def id_key(value):
    """A 63-bit key of a raw id, equal for equal JSON values (1 and 1.0 alike)."""
    return hash((isinstance(value, str), value)) & 0x7FFFFFFFFFFFFFFF


def no_constant(name):
    raise ValueError(f"{name} is not JSON")  # Python's json reads NaN and Infinity; JSON has neither


FIELDS = ["id", "text"]  # set from --id-field and --text-field
MAX_TEXT_BYTES = [1 << 20]  # set from --max-text-bytes


def parse_doc(line, where="a line"):
    """(id, text) of a document line, or None for a line the run skips as bad."""
    try:
        obj = json.loads(line, parse_constant=no_constant)
    except ValueError:
        return None
    except RecursionError:
        unusable(f"{where} is nested too deeply for Python's json: cannot check")
    if not isinstance(obj, dict):
        return None
    doc_id, text = obj.get(FIELDS[0]), obj.get(FIELDS[1])
    if not isinstance(text, str) or isinstance(doc_id, bool) or not isinstance(doc_id, (str, int, float)):
        return None
    try:  # a lone surrogate escape ("\ud800") is no text: a bad line to dedup
        text.encode("utf-8")
        if isinstance(doc_id, str):
            doc_id.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return doc_id, text


def analyzed(text, max_bytes):
    """The part of a text dedup analyzes: at most max_bytes of UTF-8, cut at a character."""
    if not max_bytes or len(text) * 4 <= max_bytes:
        return text
    return text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")


# ---------------------------------------------------------------- report
class Report:
    def __init__(self):
        self.counts = {}
        self.violations = {}

    def count(self, name, n=1):
        self.counts[name] = self.counts.get(name, 0) + n

    def violation(self, kind, detail):
        v = self.violations.setdefault(kind, [0, []])
        v[0] += 1
        if len(v[1]) < 20:
            v[1].append(detail)


# ---------------------------------------------------------------- pass 1
PARTITION_KINDS = ("lost", "kept a bad line", "kept lines not in the input (in order)",
                   "duplicates not in the input (in order)")


def partition(files, kept_path, dups_path, sample_size, rng, rep):
    """Walks the input, the kept file and the duplicates in step. Returns the kept documents'
    input positions and id keys, and a sample of duplicates (position, record, match key)."""
    kept = lines_of(kept_path)
    dups = lines_of(dups_path)
    kept_pos, kept_key = array.array("q"), array.array("q")
    dup_pos, dup_match = array.array("q"), array.array("q")
    sample = []
    next_kept = next(kept, None)
    next_dup = next(dups, None)
    dup_record = None
    n_dups = 0
    pos = -1
    for pos, line in enumerate(input_lines(files)):
        if next_kept is not None and line == next_kept:
            doc = parse_doc(line, f"input line {pos + 1}")
            if doc is None:
                rep.violation("kept a bad line", f"input line {pos + 1}")
            else:
                kept_pos.append(pos)
                kept_key.append(id_key(doc[0]))
            next_kept = next(kept, None)
            continue
        doc = parse_doc(line, f"input line {pos + 1}")
        if doc is None:
            rep.count("bad input lines")
            continue
        if dup_record is None and next_dup is not None:
            try:
                dup_record = json.loads(next_dup)
            except ValueError:
                unusable(f"{dups_path}: record {n_dups + 1} is not JSON")
        if dup_record is None or dup_record.get("id") != doc[0] or "duplicate_of" not in dup_record:
            rep.violation("lost", f"input line {pos + 1} (id {doc[0]!r}) is neither the next kept line "
                          f"nor the next duplicate ({'none left' if dup_record is None else dup_record.get('id')!r})")
            continue
        n_dups += 1
        dup_pos.append(pos)
        dup_match.append(id_key(dup_record["duplicate_of"]))
        item = (pos, dup_record, len(dup_match) - 1)
        if len(sample) < sample_size:
            sample.append(item)
        else:
            j = rng.randrange(n_dups)
            if j < sample_size:
                sample[j] = item
        dup_record = None
        next_dup = next(dups, None)
    rep.count("input lines", pos + 1)
    rep.count("kept", len(kept_pos))
    rep.count("duplicates", n_dups)
    extra_kept = (next_kept is not None) + sum(1 for _ in kept)
    extra_dups = (next_dup is not None) + sum(1 for _ in dups)
    if extra_kept:
        rep.violation("kept lines not in the input (in order)", f"{extra_kept} left over in {kept_path}")
    if extra_dups:
        rep.violation("duplicates not in the input (in order)", f"{extra_dups} left over in {dups_path}")
    return (np.frombuffer(kept_pos, dtype=np.int64), np.frombuffer(kept_key, dtype=np.int64),
            np.frombuffer(dup_pos, dtype=np.int64), np.frombuffer(dup_match, dtype=np.int64), sample)


def check_matches(kept_pos, kept_key, dup_pos, dup_match, rep):
    """Each duplicate's match is a kept document before it. Returns, per duplicate, the input
    position of its match: -1 when there is none, -2 when several kept documents before it
    have the match's id (ids need not be unique: the match is then not known)."""
    order = np.lexsort((kept_pos, kept_key))  # by id key, then position
    keys, poss = kept_key[order], kept_pos[order]
    rep.count("kept ids given twice", int(np.count_nonzero(keys[1:] == keys[:-1])) if len(keys) else 0)
    lo = np.searchsorted(keys, dup_match, "left")
    hi = np.searchsorted(keys, dup_match, "right")
    match_pos = np.where(hi > lo, poss[np.minimum(lo, len(poss) - 1)] if len(poss) else -1, -1)
    # With one kept document of the id its position is the match; with several, the
    # ones before the duplicate decide (a short loop: repeated ids are rare).
    for i in np.flatnonzero(hi - lo > 1):
        before = int(np.searchsorted(poss[lo[i]:hi[i]], dup_pos[i]))
        match_pos[i] = poss[lo[i]] if before <= 1 else -2
        rep.count("duplicates whose match's id is repeated")
    missing = np.flatnonzero(hi == lo)
    late = np.flatnonzero((hi > lo) & (match_pos >= dup_pos))
    for kind, where in (("match is not a kept document", missing), ("match is not before the duplicate", late)):
        for i in where:
            rep.violation(kind, f"duplicate at input line {dup_pos[i] + 1}")
    match_pos[late] = -1
    return match_pos


# ---------------------------------------------------------------- texts
def texts_at(files, positions):
    """{input position: text} for the given positions, in one pass."""
    want = set(int(p) for p in positions)
    out = {}
    if not want:
        return out
    last = max(want)
    for pos, line in enumerate(input_lines(files)):
        if pos in want:
            out[pos] = analyzed(parse_doc(line)[1], MAX_TEXT_BYTES[0])
        if pos >= last:
            break
    return out


def comparable(text):
    return not any(unicodedata.category(c) == "Cf" for c in text)


def jaccard(a, b, n):
    ga, gb = grams(a, n), grams(b, n)
    return Fraction(len(ga & gb), len(ga | gb))


def check_sample(sample, match_pos, texts, args, rep):
    t = Fraction(str(args.threshold))
    for pos, rec, i in sample:
        m = int(match_pos[i])
        if m < 0:
            continue  # no match to compare with (a violation above) or several with its id
        a, b = texts[m], texts[pos]
        if not (comparable(a) and comparable(b)):
            rep.count("sampled duplicates skipped (default-ignorable code points)")
            continue
        rep.count("sampled duplicates checked")
        where = f"duplicate at input line {pos + 1} of line {m + 1}"
        if not rec.get("similarity_exact"):
            rep.count("sampled duplicates with an estimated similarity")
            continue
        j = jaccard(a, b, args.n)
        if j < t:
            rep.violation("duplicate below the threshold", f"{where}: J = {float(j):.4f}")
        if abs(float(j) - float(rec.get("similarity", -1))) > 0.00005 + 1e-9:
            rep.violation("reported similarity is not the exact one",
                          f"{where}: reported {rec.get('similarity')}, exact {float(j):.6f}")


# ---------------------------------------------------------------- kept pairs
def kept_pairs(kept_path, args, work):
    fps = os.path.join(work, "kept.fp")
    pairs = os.path.join(work, "kept.pairs")
    fp_cmd = [args.neardup, "fingerprint", "-q", "-i", "-", "--id-field", "", "--text-field", args.text_field,
              "--max-text-bytes", str(args.max_text_bytes), "-o", fps]
    fp_cmd += shlex.split(args.fingerprint_args)
    # The kept file may be compressed; fingerprint reads one plain stream.
    with subprocess.Popen(fp_cmd, stdin=subprocess.PIPE) as proc:
        for line in lines_of(kept_path):
            proc.stdin.write(line + b"\n")
        proc.stdin.close()
        if proc.wait() != 0:
            unusable(f"{' '.join(fp_cmd)} exited {proc.returncode}")
    # Texts without features ('-') have no fingerprint to pair.
    with open(fps) as f, open(fps + ".hex", "w") as g:
        for line in f:
            if not line.rstrip("\n").endswith("\t-"):
                g.write(line)
    if subprocess.run([args.neardup, "pairs", "-i", fps + ".hex", "-o", pairs, "-k", str(args.radius)]).returncode:
        unusable("neardup pairs failed")
    with open(pairs) as f:
        return [(int(a) - 1, int(b) - 1) for a, b, _ in (line.split("\t") for line in f)]


def check_kept_pairs(pairs, kept_pos, texts, args, rep):
    t = Fraction(str(args.threshold))
    for a, b in pairs:
        pa, pb = int(kept_pos[a]), int(kept_pos[b])
        ta, tb = texts[pa], texts[pb]
        if not (comparable(ta) and comparable(tb)):
            rep.count("kept pairs skipped (default-ignorable code points)")
            continue
        ga, gb = grams(ta, args.n), grams(tb, args.n)
        if max(len(ga), len(gb)) > 256:
            rep.count("kept pairs with an estimated similarity (not judged)")
            continue
        rep.count("kept pairs judged")
        j = Fraction(len(ga & gb), len(ga | gb))
        if j >= t:
            rep.violation("two near-duplicates kept", f"input lines {min(pa, pb) + 1} and {max(pa, pb) + 1}: J = {float(j):.4f}")



# ---------------------------------------------------------------- self-test
def run_check(inputs, kept, dups, neardup, threshold=0.7):
    """The checker's violation kinds for one set of files (a fresh process: a real run)."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        cmd = [sys.executable, os.path.abspath(__file__), "-i", *inputs, "--kept", kept, "--duplicates", dups,
               "--neardup", neardup, "--threshold", str(threshold), "--json", out.name]
        rc = subprocess.run(cmd, stderr=subprocess.DEVNULL).returncode
        try:
            got = set(json.load(out)["violations"])
        except ValueError:  # it died before its report
            got = {f"exit {rc} without a report"}
    return rc, got


def kept_positions(inputs, kept):
    kept_lines = list(lines_of(kept))
    out, k = [], 0
    for pos, line in enumerate(input_lines(inputs)):
        if k < len(kept_lines) and line == kept_lines[k]:
            out.append(pos)
            k += 1
    return out


def self_test(neardup):
    """Runs dedup on the sample and the natural corpus (in memory, and in rounds with gzip and
    zstd inputs), checks that the checker passes them, then breaks the outputs in each way it
    must catch and checks that it names that violation (and the clean runs none)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    srcs = [os.path.join(root, "data/sample/docs.jsonl")] + sorted(glob.glob(os.path.join(root, "data/natural/dev/*-short.jsonl")))
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        inputs = []
        for i, src in enumerate(srcs):
            dst = os.path.join(d, f"in{i}.jsonl")
            with open(src, "rb") as f, open(dst, "wb") as g:
                g.write(f.read())
            if i == 1:
                subprocess.run(["gzip", dst], check=True)
                dst += ".gz"
            elif i == 2:
                subprocess.run(["zstd", "-q", "--rm", dst], check=True)
                dst += ".zst"
            inputs.append(dst)
        k, dp = os.path.join(d, "kept.jsonl"), os.path.join(d, "dups.jsonl")
        base = [neardup, "dedup", "-q", "-o", k, "-d", dp] + [a for i in inputs for a in ("-i", i)]
        rounds_k, rounds_d = os.path.join(d, "rk.jsonl.zst"), os.path.join(d, "rd.jsonl.gz")
        subprocess.run(base, check=True)
        subprocess.run(base[:3] + ["-o", rounds_k, "-d", rounds_d, "--memory-limit", "1", "--spill-dir", d]
                       + base[7:], check=True)
        low_k, low_d = os.path.join(d, "lk.jsonl"), os.path.join(d, "ld.jsonl")
        subprocess.run(base[:3] + ["-o", low_k, "-d", low_d, "--threshold", "0.5"] + base[7:], check=True)

        kept = list(lines_of(k))
        dups = [json.loads(x) for x in lines_of(dp)]
        in_lines = list(input_lines(inputs))
        kpos = kept_positions(inputs, k)
        by_line = {}
        for pos, line in enumerate(in_lines):
            doc = parse_doc(line)
            if doc is not None:
                by_line.setdefault(id_key(doc[0]), pos)
        # A duplicate within the radius whose similarity was exact, and its input line.
        near = next(i for i, r in enumerate(dups) if r["similarity_exact"] and 0 < r["distance"] <= 3)
        near_pos = by_line[id_key(dups[near]["id"])]
        later_kept = kept[-1]

        def write(name, lines):
            path = os.path.join(d, name)
            with open(path, "wb") as f:
                f.write(b"".join(x + b"\n" for x in lines))
            return path

        def dup_lines(records):
            return [json.dumps(r).encode() for r in records]

        def edit(i, **kw):
            return [dict(r, **kw) if j == i else r for j, r in enumerate(dups)]

        with_near = [in_lines[p] for p in sorted(kpos + [near_pos])]
        cases = [
            ("clean", inputs, k, dp, 0.7, set()),
            ("clean, rounds, compressed", inputs, rounds_k, rounds_d, 0.7, set()),
            ("a kept line dropped", inputs, write("k1", kept[:10] + kept[11:]), dp, 0.7, {"lost"}),
            ("a duplicate dropped", inputs, k, write("d1", dup_lines(dups[:5] + dups[6:])), 0.7, {"lost"}),
            ("a kept line changed", inputs, write("k2", kept[:7] + [kept[7].replace(b"}", b', "x": 1}', 1)] + kept[8:]),
             dp, 0.7, {"lost", "kept lines not in the input (in order)"}),
            ("a kept line twice", inputs, write("k3", kept[:3] + [kept[3]] + kept[3:]), dp, 0.7,
             {"kept lines not in the input (in order)"}),
            ("a match not kept", inputs, k, write("d2", dup_lines(edit(3, duplicate_of="no such id"))), 0.7,
             {"match is not a kept document"}),
            ("a match after its duplicate", inputs, k,
             write("d3", dup_lines(edit(0, duplicate_of=json.loads(later_kept)["id"]))), 0.7,
             {"match is not before the duplicate"}),
            ("a similarity misreported", inputs, k,
             write("d4", dup_lines(edit(near, similarity=round(dups[near]["similarity"] - 0.01, 4)))), 0.7,
             {"reported similarity is not the exact one"}),
            ("duplicates below the threshold", inputs, low_k, low_d, 0.7, {"duplicate below the threshold"}),
            ("two near-duplicates kept", inputs, write("k4", with_near),
             write("d5", dup_lines(dups[:near] + dups[near + 1:])), 0.7, {"two near-duplicates kept"}),
        ]
        # Lines dedup reads in its own way, each once a false violation: a byte order mark,
        # lines Python's json reads but JSON has not (NaN, a lone surrogate), ids given twice
        # (a duplicate of the second "x"), texts equal in their first --max-text-bytes only.
        messy = os.path.join(d, "messy.jsonl")
        shared = "lorem ipsum dolor sit amet " * 40000
        with open(messy, "w", encoding="utf-8") as f:
            f.write("\ufeff" + json.dumps({"id": "x", "text": "apples and pears and plums, a fruit bowl"}) + "\n")
            f.write('{"id": NaN, "text": "not a number"}\n{"id": 3, "text": "half \\ud800 a pair"}\n')
            f.write(json.dumps({"id": "x", "text": "quantum chromodynamics of the strong force"}) + "\n")
            f.write(json.dumps({"id": "z", "text": "quantum chromodynamics of the strong force!"}) + "\n")
            f.write(json.dumps({"id": "l1", "text": shared + "one ending"}) + "\n")
            f.write(json.dumps({"id": "l2", "text": shared + "a wholly different ending, " * 90000}) + "\n")
        messy_k, messy_d = os.path.join(d, "mk.jsonl"), os.path.join(d, "md.jsonl")
        subprocess.run([neardup, "dedup", "-q", "-i", messy, "-o", messy_k, "-d", messy_d], check=True)
        cases.insert(2, ("clean, messy input", [messy], messy_k, messy_d, 0.7, set()))

        for name, ins, kk, dd, t, want in cases:
            rc, got = run_check(ins, kk, dd, neardup, t)
            # A break may cause others (a changed kept line also loses the lines after it).
            ok = want <= got and rc == 1 if want else not got and rc == 0
            failures += not ok
            print(f"self-test {name:32s} {'ok' if ok else 'FAILED'}: want {sorted(want)} got {sorted(got)} (exit {rc})")
    return 1 if failures else 0


# ---------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-i", "--input", nargs="+")
    ap.add_argument("--kept")
    ap.add_argument("--duplicates")
    ap.add_argument("--self-test", action="store_true", help="with --neardup: break outputs in each way, expect each caught")
    ap.add_argument("--neardup", help="the neardup binary, for the kept-pairs check")
    ap.add_argument("--sample", type=int, default=20000)
    ap.add_argument("--threshold", type=float, default=0.7)
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--radius", type=int, default=3)
    ap.add_argument("--fingerprint-args", default="", help="the run's fingerprint options, e.g. '--tokenizer icu-words'")
    ap.add_argument("--id-field", default="id")
    ap.add_argument("--text-field", default="text")
    ap.add_argument("--max-text-bytes", type=int, default=1 << 20, help="the run's (0 = no limit)")
    ap.add_argument("--work", help="directory for the kept file's fingerprints and pairs")
    ap.add_argument("--json", help="write the counts and violations here")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.self_test:
        if not args.neardup:
            ap.error("--self-test needs --neardup")
        return self_test(args.neardup)
    if not (args.input and args.kept and args.duplicates):
        ap.error("-i, --kept and --duplicates are required")
    if not args.id_field:
        ap.error("--id-field '' (line numbers as ids) is not supported")
    FIELDS[:] = [args.id_field, args.text_field]
    MAX_TEXT_BYTES[0] = args.max_text_bytes

    files = expand(args.input)
    for p in files + [args.kept, args.duplicates]:
        if not os.path.exists(p):
            print(f"check_dedup_output: {p}: no such file", file=sys.stderr)
            return 2
    rep = Report()
    t0 = time.time()
    kept_pos, kept_key, dup_pos, dup_match, sample = partition(
        files, args.kept, args.duplicates, args.sample, random.Random(args.seed), rep)
    match_pos = check_matches(kept_pos, kept_key, dup_pos, dup_match, rep)
    del kept_key, dup_match
    print(f"check_dedup_output: partition and matches checked in {time.time() - t0:.0f} s", file=sys.stderr)

    pairs = []
    # The kept file's line i is input line kept_pos[i] only when the partition holds.
    partitioned = not any(k in rep.violations for k in PARTITION_KINDS)
    if args.neardup and not partitioned:
        rep.count("kept pairs not checked (the partition failed)")
    elif args.neardup:
        with tempfile.TemporaryDirectory(dir=args.work) as work:
            pairs = kept_pairs(args.kept, args, work)
        rep.count("kept pairs within the radius", len(pairs))
    need = [p for p, _, i in sample if match_pos[i] >= 0] + [int(match_pos[i]) for _, _, i in sample if match_pos[i] >= 0]
    need += [int(kept_pos[a]) for a, _ in pairs] + [int(kept_pos[b]) for _, b in pairs]
    texts = texts_at(files, need)
    check_sample(sample, match_pos, texts, args, rep)
    check_kept_pairs(pairs, kept_pos, texts, args, rep)
    rep.count("seconds", round(time.time() - t0))

    for kind, (n, examples) in sorted(rep.violations.items()):
        print(f"VIOLATION {kind}: {n}", file=sys.stderr)
        for e in examples:
            print(f"  {e}", file=sys.stderr)
    print(json.dumps(rep.counts), file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"counts": rep.counts, "violations": {k: {"count": n, "examples": e}
                                                            for k, (n, e) in rep.violations.items()}}, f, indent=1)
    return 1 if rep.violations else 0


if __name__ == "__main__":
    sys.exit(main())
