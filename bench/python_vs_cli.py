#!/usr/bin/env python3
"""Fingerprinting and dedup throughput: the Python package's batch calls
against the `neardup` CLI on the same documents, one thread each (per core),
runs interleaved (run r starts at method r mod 4), medians (docs/BENCHMARKS.md,
"Python package (issue 18)").

    PYTHONPATH=build/python /usr/bin/python3 bench/python_vs_cli.py --runs 7

The CLI is timed from outside (wall time of the process: start-up, reading
and parsing the JSONL, writing its output to /dev/null); Python is timed
twice: the batch calls alone (texts already in memory), and with the
reading and JSON parsing of the same file ("py+read")."""

import argparse
import json
import pathlib
import statistics
import subprocess
import tempfile
import time

import neardup

ROOT = pathlib.Path(__file__).resolve().parent.parent


def corpus(path):
    """data/natural (both splits, all buckets) as one JSONL file."""
    with open(path, "w", encoding="utf-8") as out:
        for f in sorted((ROOT / "data" / "natural").glob("*/*.jsonl")):
            out.write(f.read_text(encoding="utf-8"))


def read(path):
    ids, texts = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            ids.append(doc["id"])
            texts.append(doc["text"])
    return ids, texts


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def py_dedup(ids, texts, threads):
    d = neardup.Deduplicator(threads=threads)
    return sum(r.duplicate for r in d.dedup(zip(ids, texts), batch_size=4096))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default=str(ROOT / "build" / "neardup"))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="neardup-pybench-"))
    data = tmp / "corpus.jsonl"
    corpus(data)
    ids, texts = read(data)
    mb = data.stat().st_size / 1e6
    t = str(args.threads)
    stats = tmp / "stats.json"

    def cli_fp():
        subprocess.run([args.cli, "fingerprint", "--input", str(data), "--output", "/dev/null", "-q",
                        "--threads", t], check=True)

    def cli_dedup():
        subprocess.run([args.cli, "dedup", "--input", str(data), "--output", "/dev/null", "--duplicates",
                        "/dev/null", "-q", "--threads", t, "--stats-json", str(stats)], check=True)
        return json.loads(stats.read_text())["duplicates"]

    methods = {
        "cli fingerprint": cli_fp,
        "py fingerprints": lambda: neardup.fingerprints(texts, threads=args.threads),
        "py+read fingerprints": lambda: neardup.fingerprints(read(data)[1], threads=args.threads),
        "cli dedup": cli_dedup,
        "py dedup": lambda: py_dedup(ids, texts, args.threads),
        "py+read dedup": lambda: py_dedup(*read(data), args.threads),
    }
    names = list(methods)
    times = {n: [] for n in names}
    answers = {}
    for r in range(args.runs):
        for i in range(len(names)):
            name = names[(r + i) % len(names)]
            seconds, answer = timed(methods[name])
            times[name].append(seconds)
            answers[name] = answer
    assert answers["cli dedup"] == answers["py dedup"], answers  # the same decisions
    print(f"corpus: {len(texts)} documents, {mb:.2f} MB ({data}); threads {args.threads}; "
          f"runs {args.runs}; duplicates {answers['cli dedup']}")
    print(f"{'method':24} {'median s':>9} {'docs/s':>9} {'MB/s':>7}   all runs (s)")
    for n in names:
        m = statistics.median(times[n])
        print(f"{n:24} {m:9.3f} {len(texts) / m:9.0f} {mb / m:7.2f}   " +
              " ".join(f"{x:.3f}" for x in times[n]))
    for kind in ("fingerprint", "dedup"):
        cli = statistics.median(times[f"cli {kind}"])
        for n in names:
            if n.startswith("py") and kind in n:
                print(f"{n} / cli {kind}: throughput ratio {cli / statistics.median(times[n]):.3f}")


if __name__ == "__main__":
    main()
