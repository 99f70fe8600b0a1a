#!/usr/bin/python3
"""Per-stage rates of the staged run (`neardup stage`, docs/SCALING.md) beside
single-process `neardup dedup` on the same shards, one thread each, rounds
interleaved (single, then the stages). Each task runs as its own process;
CPU = user + system of that child (os.wait4), peak RSS its ru_maxrss.

  bench/make_short_docs.py --docs 1000000 --shards 8 --out DATA
  bench/staged_rates.py --cli build/neardup --data DATA --work WORK [--rounds 3]

Prints one JSON line per round and a summary (medians) as JSON.
"""
import argparse
import glob
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time


def run(argv):
    """(wall s, cpu s, peak RSS bytes) of one child; raises on failure."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(argv)}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


def digest(paths):
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    cli = os.path.abspath(a.cli)
    files = sorted(glob.glob(os.path.join(a.data, "*.jsonl*")))
    n = len(files)
    in_bytes = sum(os.path.getsize(f) for f in files)
    os.makedirs(a.work, exist_ok=True)
    w = lambda *p: os.path.join(a.work, *p)
    rounds = []
    for r in range(a.rounds):
        row = {"round": r}
        # single process, one thread
        wall, cpu, rss = run([cli, "dedup", "-q", "--threads", "1", *sum((["-i", f] for f in files), []),
                              "-o", w("single.out"), "-d", w("single.dups"), "--stats-json", w("single.json")])
        docs = json.load(open(w("single.json")))["documents"]
        row["single"] = {"wall": wall, "cpu": cpu, "rss": rss}
        # fingerprint: one task per shard
        fp = [run([cli, "stage", "fingerprint", "-q", "--threads", "1", "-i", f, "--shard", str(i),
                   "--shards", str(n), "-o", w(f"{i:05d}.sig")]) for i, f in enumerate(files)]
        row["fingerprint"] = {"wall": [x[0] for x in fp], "cpu": [x[1] for x in fp], "rss": max(x[2] for x in fp)}
        sig_bytes = sum(os.path.getsize(w(f"{i:05d}.sig")) for i in range(n))
        wall, cpu, rss = run([cli, "stage", "decide", "-q", "-s", *[w(f"{i:05d}.sig") for i in range(n)],
                              "-o", w("dec"), "--stats-json", w("decide.json")])
        row["decide"] = {"wall": wall, "cpu": cpu, "rss": rss}
        dec_bytes = sum(os.path.getsize(w("dec", f"{i:05d}.dec")) for i in range(n))
        fi = [run([cli, "stage", "filter", "-q", "-i", f, "--decisions", w("dec", f"{i:05d}.dec"),
                   "-o", w(f"out{i}"), "-d", w(f"dups{i}")]) for i, f in enumerate(files)]
        row["filter"] = {"wall": [x[0] for x in fi], "cpu": [x[1] for x in fi], "rss": max(x[2] for x in fi)}
        # Compared by digest, in chunks: a large heap here would be inherited by the
        # children's ru_maxrss (it counts the forked process before exec).
        same = digest([w(f"out{i}") for i in range(n)]) == digest([w("single.out")]) and \
            digest([w(f"dups{i}") for i in range(n)]) == digest([w("single.dups")])
        row.update(documents=docs, input_bytes=in_bytes, signature_bytes=sig_bytes, decision_bytes=dec_bytes,
                   identical=same, load=os.getloadavg()[0])
        print(json.dumps(row), flush=True)
        rounds.append(row)
    med = lambda xs: statistics.median(xs)
    docs = rounds[0]["documents"]
    summary = {
        "documents": docs, "files": n, "input_bytes": in_bytes, "rounds": a.rounds,
        "identical_every_round": all(r["identical"] for r in rounds),
        "signature_bytes_per_doc": rounds[0]["signature_bytes"] / docs,
        "decision_bytes_per_doc": rounds[0]["decision_bytes"] / docs,
        # docs per CPU second (one core), medians over the rounds
        "single_docs_per_cpu_s": med([docs / r["single"]["cpu"] for r in rounds]),
        "single_wall_s": med([r["single"]["wall"] for r in rounds]),
        "single_rss": med([r["single"]["rss"] for r in rounds]),
        "fingerprint_docs_per_cpu_s": med([docs / sum(r["fingerprint"]["cpu"]) for r in rounds]),
        "fingerprint_task_wall_s_median": med([med(r["fingerprint"]["wall"]) for r in rounds]),
        "fingerprint_rss": med([r["fingerprint"]["rss"] for r in rounds]),
        "decide_docs_per_cpu_s": med([docs / r["decide"]["cpu"] for r in rounds]),
        "decide_docs_per_wall_s": med([docs / r["decide"]["wall"] for r in rounds]),
        "decide_wall_s": med([r["decide"]["wall"] for r in rounds]),
        "decide_rss": med([r["decide"]["rss"] for r in rounds]),
        "filter_docs_per_cpu_s": med([docs / sum(r["filter"]["cpu"]) for r in rounds]),
        "filter_rss": med([r["filter"]["rss"] for r in rounds]),
        "load_average": [r["load"] for r in rounds],
    }
    print(json.dumps(summary, indent=2))
    return 0 if summary["identical_every_round"] else 1


if __name__ == "__main__":
    sys.exit(main())
