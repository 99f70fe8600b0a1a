#!/usr/bin/env python3
"""Interleaved A/B of `neardup dedup` builds on one input (docs/BENCHMARKS.md).

    python3 bench/dedup_ab.py ROUNDS INPUT BIN_A BIN_B [BIN ...] [-- DEDUP ARGS]

Each round runs every build once, in alternating order (this VM is shared and
noisy: only interleaved runs compare), and prints per build the median and
minimum wall time, the median of its per-round ratio to the first build, and
the md5 of its output and duplicates (equal md5s: the builds decided alike).
"""
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time


def main(argv):
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    if len(argv) < 4:
        sys.exit(__doc__)
    rounds, inp, bins = int(argv[1]), argv[2], argv[3:]
    times = {b: [] for b in bins}
    with tempfile.TemporaryDirectory(prefix="dedup-ab-") as tmp:
        outs = {b: (os.path.join(tmp, f"o{i}"), os.path.join(tmp, f"d{i}")) for i, b in enumerate(bins)}
        for r in range(rounds):
            for b in bins if r % 2 == 0 else bins[::-1]:
                start = time.monotonic()
                subprocess.run([b, "dedup", "-q", "-i", inp, "-o", outs[b][0], "-d", outs[b][1]] + extra,
                               check=True, timeout=3600)
                times[b].append(time.monotonic() - start)
        first = times[bins[0]]
        for b in bins:
            ratio = statistics.median(x / y for x, y in zip(times[b], first))
            digest = hashlib.md5()
            for path in outs[b]:
                with open(path, "rb") as f:
                    digest.update(f.read())
            print(f"{b}: median {statistics.median(times[b]):.2f} s, min {min(times[b]):.2f} s, "
                  f"ratio to {os.path.basename(bins[0])} {ratio:.3f}, md5 {digest.hexdigest()}; "
                  f"runs {' '.join(f'{x:.2f}' for x in times[b])}")


if __name__ == "__main__":
    main(sys.argv)
