#!/usr/bin/env python3
"""Mean server time per statement from a PostgreSQL log written with
log_min_duration_statement = 0 (bench/pg_bench.sh's server logs to DIR/pg/log).

    bench/pg_statement_times.py LOG [--since 'YYYY-MM-DD HH:MM:SS']

Prints one line per statement text (first 70 characters), execute and bind
phases apart, the slowest total first: mean ms, count.
"""
import argparse
import collections
import re

LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\S* .*duration: ([\d.]+) ms\s+(\w+)[^:]*: (.*)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--since", default="")
    args = ap.parse_args()
    total = collections.defaultdict(float)
    count = collections.Counter()
    with open(args.log, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if not m or m.group(1) < args.since:
                continue
            key = m.group(3) + " " + re.sub(r"\s+", " ", m.group(4))[:70]
            total[key] += float(m.group(2))
            count[key] += 1
    for key, ms in sorted(total.items(), key=lambda kv: -kv[1])[:12]:
        print(f"{ms / count[key]:8.3f} ms x{count[key]:6d}  {key}")


if __name__ == "__main__":
    main()
