#!/usr/bin/env python3
"""Fingerprinting and dedup throughput: the Python package's batch calls
against the `neardup` CLI on the same documents, one thread each (per core),
runs interleaved within a phase (run r starts at method r mod the number of
methods), medians (docs/BENCHMARKS.md, "Python package (issue 18)").

    PYTHONPATH=build/python /usr/bin/python3 bench/python_vs_cli.py --runs 7

The CLI is timed from outside (the whole process: start-up, reading and
parsing the JSONL, writing its output to /dev/null); Python is timed twice:
the batch calls alone (texts already in memory), and with the reading and
JSON parsing of the same file ("py+read"). Each is measured as wall time
and as CPU time (user + system: this process's for Python, the child's for
the CLI), which a machine shared with other jobs disturbs less."""

import argparse
import gc
import json
import pathlib
import resource
import statistics
import subprocess
import tempfile
import time

import neardup

ROOT = pathlib.Path(__file__).resolve().parent.parent


def corpus(path, copies=1):
    """data/natural (both splits, all buckets) as one JSONL file, `copies` times."""
    with open(path, "w", encoding="utf-8") as out:
        for _ in range(copies):
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


def cpu_seconds():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(fn):
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = fn()
    return time.perf_counter() - wall, cpu_seconds() - cpu, result


def py_dedup(ids, texts, threads, all_matches=False):
    d = neardup.Deduplicator(threads=threads)
    return sum(r.duplicate for r in d.dedup(zip(ids, texts), batch_size=4096, all_matches=all_matches))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default=str(ROOT / "build" / "neardup"))
    ap.add_argument("--other-cli", help="a second build of the CLI, timed in the same runs (e.g. one "
                    "configured with -DNEARDUP_PYTHON=OFF: libraries without -fPIC)")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--together", action="store_true",
                    help="interleave all methods in one phase, the fingerprinting corpus (4 copies) held in "
                    "memory throughout; by default fingerprinting runs first and its texts are dropped "
                    "before the dedup rounds, as a pipeline holds only its own data")
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="neardup-pybench-"))
    # Fingerprinting is fast: four copies, so process start-up weighs little.
    data, fp_data = tmp / "corpus.jsonl", tmp / "corpus-x4.jsonl"
    corpus(data)
    corpus(fp_data, 4)
    ids, texts = read(data)
    held = {"fp": read(fp_data)[1]}
    size = {"fingerprint": (len(held["fp"]), fp_data.stat().st_size / 1e6),
            "dedup": (len(texts), data.stat().st_size / 1e6)}
    t = str(args.threads)
    stats = tmp / "stats.json"

    def cli_fp(cli):
        subprocess.run([cli, "fingerprint", "--input", str(fp_data), "--output", "/dev/null", "-q",
                        "--threads", t], check=True)

    def cli_dedup(cli):
        subprocess.run([cli, "dedup", "--input", str(data), "--output", "/dev/null", "--duplicates",
                        "/dev/null", "-q", "--threads", t, "--stats-json", str(stats)], check=True)
        return json.loads(stats.read_text())["duplicates"]

    methods = {
        "cli fingerprint": lambda: cli_fp(args.cli),
        "py fingerprints": lambda: neardup.fingerprints(held["fp"], threads=args.threads),
        "py+read fingerprints": lambda: neardup.fingerprints(read(fp_data)[1], threads=args.threads),
        "cli dedup": lambda: cli_dedup(args.cli),
        "py dedup": lambda: py_dedup(ids, texts, args.threads),
        "py+read dedup": lambda: py_dedup(*read(data), args.threads),
        "py dedup all_matches": lambda: py_dedup(ids, texts, args.threads, all_matches=True),
    }
    if args.other_cli:
        methods["other-cli fingerprint"] = lambda: cli_fp(args.other_cli)
        methods["other-cli dedup"] = lambda: cli_dedup(args.other_cli)
    names = list(methods)
    times = {n: [] for n in names}
    cpus = {n: [] for n in names}
    answers = {}
    phases = [names] if args.together else [[n for n in names if kind in n] for kind in ("fingerprint", "dedup")]
    for phase in phases:
        for r in range(args.runs):
            for i in range(len(phase)):
                name = phase[(r + i) % len(phase)]
                seconds, cpu, answer = timed(methods[name])
                times[name].append(seconds)
                cpus[name].append(cpu)
                answers[name] = answer
        if not args.together:
            held.clear()
            gc.collect()
    assert answers["cli dedup"] == answers["py dedup"], answers  # the same decisions
    for kind, (docs, mb) in size.items():
        print(f"{kind}: {docs} documents, {mb:.2f} MB of JSONL")
    print(f"threads {args.threads}; runs {args.runs}; {'one phase' if args.together else 'two phases'}; duplicates {answers['cli dedup']} (CLI and Python)")
    for label, table in (("wall", times), ("CPU", cpus)):
        print(f"{label}: {'method':24} {'median s':>9} {'docs/s':>9} {'MB/s':>7} {'min s':>7}   all runs (s)")
        for n in names:
            m = statistics.median(table[n])
            docs, mb = size["fingerprint" if "fingerprint" in n else "dedup"]
            print(f"{label}: {n:24} {m:9.3f} {docs / m:9.0f} {mb / m:7.2f} {min(table[n]):7.3f}   " +
                  " ".join(f"{x:.3f}" for x in table[n]))
        for kind in ("fingerprint", "dedup"):
            cli = statistics.median(table[f"cli {kind}"])
            for n in names:
                if not n.startswith("cli") and kind in n:
                    print(f"{label}: {n} / cli {kind}: throughput ratio {cli / statistics.median(table[n]):.3f}")


if __name__ == "__main__":
    main()
