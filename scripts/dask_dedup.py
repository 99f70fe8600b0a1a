#!/usr/bin/python3
"""The staged dedup run (`neardup stage ...`, docs/SCALING.md) as Dask tasks.

Runs on an existing Dask distributed cluster, given by its scheduler address
(scripts/dask_cluster.sh starts one on 127.0.0.1). Every task runs the
`neardup` program on a worker; the stages exchange files under --work, which
every worker must see at the same path (a shared file system):

  fingerprint  one task per input file  -> WORK/sig/NNNNN.sig
  decide       one task, after them all -> WORK/dec/NNNNN.dec [WORK/clusters]
                                           [--save-index DIR]
  filter       one task per input file  -> WORK/out/NNNNN[-SSSSS][.dups][.gz|.zst]

The driver then concatenates the filter outputs in input order into --output
(each of its --output-shards) and --duplicates, and copies the clusters to
--clusters: byte for byte what `neardup dedup` writes for the same inputs,
settings and output flags (--annotate, --output-shards, --clusters,
--load-index, --save-index, --keep). An output named .gz or .zst is
compressed by the tasks and concatenated: one gzip member or zstd frame per
input file, the same text as dedup's once decompressed. Arguments after `--`
are the run's settings, given to every fingerprint task (and so carried to decide): -k, --threshold,
--shingle-size, --format, --id-field, --tokenizer, ...

A failed task stops the run; the driver exits with that task's exit code
(neardup's exit codes, docs/cli.md) after printing its message.

  scripts/dask_dedup.py --scheduler tcp://127.0.0.1:18800 --work /shared/run1 \
      -i 'crawl/*.jsonl.zst' -o kept.jsonl -d dups.jsonl -- --threshold 0.5
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from distributed import Client, get_worker, wait


def run_task(argv, timeout, *dependencies):
    """Runs one neardup command on a worker. `dependencies` are the results
    of the tasks it must follow (Dask passes them once they are done).
    Returns {"stage", "seconds", "stderr"}; raises RuntimeError(message,
    exit code) when the command fails."""
    del dependencies
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{' '.join(argv[1:3])} timed out after {timeout} s: {' '.join(argv)}", 1) from None
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[1:3])} failed (exit {p.returncode}) on {' '.join(argv[3:])}:\n{err}",
                           p.returncode)
    return {"stage": argv[2], "seconds": time.monotonic() - t0, "stderr": err, "worker": get_worker().address}


def compression(name):
    """The compression neardup gives an output by its name: ".gz", ".zst" or ""."""
    return next((ext for ext in (".gz", ".zst") if name and name.endswith(ext)), "")


def concatenate(parts, target):
    with open(target, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scheduler", required=True, help="Dask scheduler address, e.g. tcp://127.0.0.1:18800")
    ap.add_argument("--neardup", default="neardup", help="the neardup program, as the workers run it")
    ap.add_argument("--work", required=True, help="directory for the stage files, seen by every worker")
    ap.add_argument("-i", "--input", action="append", required=True,
                    help="input files, directories or glob patterns (as for neardup dedup); repeat it")
    ap.add_argument("-o", "--output", required=True, help="kept records (all, with --annotate)")
    ap.add_argument("-d", "--duplicates", help="duplicate lines, as neardup dedup's --duplicates")
    ap.add_argument("--annotate", metavar="FIELD", help="write every record with its decision in FIELD")
    ap.add_argument("--output-shards", type=int, default=1, metavar="N",
                    help="split --output into N files, {shard} in its name replaced by 00000..N-1, as dedup's")
    ap.add_argument("--clusters", help="groups of size >= 2 as JSONL, as neardup dedup's --clusters")
    ap.add_argument("--load-index", action="append", default=[], metavar="DIR",
                    help="also deduplicate against an earlier run's --save-index DIR (repeatable, in order)")
    ap.add_argument("--save-index", metavar="DIR",
                    help="save this run's kept documents to DIR (written by the decide task, on the shared "
                         "file system) for a later run's --load-index")
    ap.add_argument("--keep", choices=("first", "longest"), default="first",
                    help="which document of a group is kept, as neardup dedup's --keep")
    ap.add_argument("--threads", type=int, default=1, help="threads of each fingerprint task (default 1)")
    ap.add_argument("--decide-threads", type=int, default=1,
                    help="threads of the decide task (stage decide --threads; the same decisions for any number)")
    ap.add_argument("--task-timeout", type=float, default=3600, help="seconds one task may take (default 3600)")
    ap.add_argument("--connect-timeout", type=float, default=30, help="seconds to reach the scheduler")
    ap.add_argument("--resume", action="store_true",
                    help="keep the signature shards of an earlier run of the same job that are complete and "
                         "current (neardup stage fingerprint --keep-existing); decide and filter run again")
    ap.add_argument("--stats-json", help="write the run's statistics and per-stage times as JSON here")
    ap.add_argument("settings", nargs=argparse.REMAINDER, help="-- then the run's settings (-k, --threshold, ...)")
    a = ap.parse_args()
    settings = a.settings[1:] if a.settings[:1] == ["--"] else a.settings
    neardup = shutil.which(a.neardup) or a.neardup
    neardup = os.path.abspath(neardup) if os.path.exists(neardup) else neardup
    work = os.path.abspath(a.work)
    if a.output_shards > 1 and "{shard}" not in a.output:
        print(f"dask_dedup: --output-shards {a.output_shards} needs \"{{shard}}\" in --output", file=sys.stderr)
        return 2
    if a.output_shards == 1 and "{shard}" in a.output:
        print("dask_dedup: --output has \"{shard}\" but --output-shards is 1", file=sys.stderr)
        return 2
    for sub in ("sig", "dec", "out"):
        os.makedirs(os.path.join(work, sub), exist_ok=True)

    # The input order, exactly as `neardup dedup` would read them.
    plan = subprocess.run([neardup, "stage", "plan", *sum((["-i", i] for i in a.input), [])],
                          stdout=subprocess.PIPE, check=False)
    if plan.returncode != 0:
        return plan.returncode
    files = [os.path.abspath(f["path"]) for f in json.loads(plan.stdout)]
    n = len(files)
    sig = [os.path.join(work, "sig", f"{i:05d}.sig") for i in range(n)]
    dec = [os.path.join(work, "dec", f"{i:05d}.dec") for i in range(n)]
    # A compressed output is written compressed by each task (the parts get its
    # extension) and concatenated: one gzip member / zstd frame per part.
    ext = compression(a.output)
    out = [os.path.join(work, "out", f"{i:05d}") for i in range(n)]
    dups = [o + ".dups" + compression(a.duplicates) for o in out]
    stats = os.path.join(work, "decide-stats.json")

    fingerprint = [[neardup, "stage", "fingerprint", "-q", "-i", files[i], "--shard", str(i), "--shards", str(n),
                    "-o", sig[i], "--threads", str(a.threads), *(["--keep-existing"] if a.resume else []),
                    *settings] for i in range(n)]
    clusters = os.path.join(work, "clusters" + compression(a.clusters))
    decide = [neardup, "stage", "decide", "-q", "-s", *sig, "-o", os.path.join(work, "dec"), "--stats-json", stats,
              "--keep", a.keep, "--threads", str(a.decide_threads), *sum((["--load-index", os.path.abspath(d)] for d in a.load_index), [])]
    if a.save_index:
        decide += ["--save-index", os.path.abspath(a.save_index)]
    if a.clusters:
        decide += ["--clusters", clusters]
    shards = a.output_shards
    # A file's part of output shard s: WORK/out/NNNNN-SSSSS (NNNNN alone with one shard).
    parts = [[f"{o}-{s:05d}{ext}" for s in range(shards)] if shards > 1 else [o + ext] for o in out]
    filters = []
    for i in range(n):
        argv = [neardup, "stage", "filter", "-q", "-i", files[i], "--decisions", dec[i], "-o",
                out[i] + ("-{shard}" if shards > 1 else "") + ext, "--output-shards", str(shards)]
        if a.duplicates:
            argv += ["-d", dups[i]]
        if a.annotate:
            argv += ["--annotate", a.annotate]
        filters.append(argv)

    t0 = time.monotonic()
    with Client(a.scheduler, timeout=a.connect_timeout) as client:
        # One graph: decide follows every fingerprint task, each filter task
        # follows decide. Keys name the stage and the shard.
        fp = [client.submit(run_task, argv, a.task_timeout, key=f"fingerprint-{i:05d}-{time.time_ns()}", pure=False)
              for i, argv in enumerate(fingerprint)]
        de = client.submit(run_task, decide, a.task_timeout, *fp, key=f"decide-{time.time_ns()}", pure=False)
        fi = [client.submit(run_task, argv, a.task_timeout, de, key=f"filter-{i:05d}-{time.time_ns()}", pure=False)
              for i, argv in enumerate(filters)]
        wait(fi + [de] + fp)
        for f in fp + [de] + fi:
            if f.status == "error":
                e = f.exception()
                print(f"dask_dedup: {e.args[0] if e.args else e}", file=sys.stderr)
                return e.args[1] if len(e.args) > 1 and isinstance(e.args[1], int) else 1
        results = client.gather(fp + [de] + fi)
    for s in range(shards):
        concatenate([p[s] for p in parts], a.output.replace("{shard}", f"{s:05d}") if shards > 1 else a.output)
    if a.clusters:
        concatenate([clusters], a.clusters)
    if a.duplicates:
        concatenate(dups, a.duplicates)
    wall = time.monotonic() - t0
    by_stage = {}
    for r in results:
        by_stage.setdefault(r["stage"], []).append(r["seconds"])
    with open(stats) as f:
        summary = json.load(f)
    summary["staged"] = {"files": n, "wall_seconds": wall,
                         "workers": sorted({r["worker"] for r in results}),
                         "task_seconds": {s: sorted(v) for s, v in by_stage.items()}}
    if a.stats_json:
        with open(a.stats_json, "w") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")
    print(f"dask_dedup: {n} files, {summary['documents']} documents: {summary['kept']} kept, "
          f"{summary['duplicates']} duplicates; {wall:.2f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
