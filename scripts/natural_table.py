#!/usr/bin/env python3
"""Formats `neardup eval --json` results of the natural corpora as one Markdown table.

Usage: scripts/natural_table.py DIR   (DIR holds {dev,test}-{bucket}.json, as
scripts/natural_eval.sh writes them). Each file is one bucket (its "all" row).
"""
import json
import pathlib
import sys

BUCKETS = ["zh-short", "zh-long", "en-short", "en-long"]
POLICIES = ["neardup", "minhash", "plain"]


def main():
    d = pathlib.Path(sys.argv[1])
    print("| split | bucket | docs | policy | τ=0.5 P / R / **F1** | τ=0.7 P / R / **F1** | τ=0.8 P / R / **F1** "
          "| docs/s (τ=0.7) | bytes/kept doc (τ=0.7) |")
    print("|---|---|---:|---|---|---|---|---:|---:|")
    for split in ("dev", "test"):
        for b in BUCKETS:
            f = d / f"{split}-{b}.json"
            if not f.exists():
                continue
            r = json.loads(f.read_text())
            by_t = {round(t["threshold"], 2): t["policies"] for t in r["thresholds"]}
            for p in POLICIES:
                cells = []
                for t in (0.5, 0.7, 0.8):
                    a = by_t[t][p]["all"]
                    cells.append(f"{a['precision']:.3f} / {a['recall']:.3f} / **{a['f1']:.3f}**")
                a7 = by_t[0.7][p]
                us = a7["all"]["us_per_doc"]
                rate = f"{1e6 / us:,.0f}" if us else "-"
                mem = a7["memory_bytes"] / a7["kept"] if a7["kept"] else 0
                print(f"| {split} | {b} | {r['documents']} | {p} | " + " | ".join(cells) + f" | {rate} | {mem:,.0f} |")


if __name__ == "__main__":
    main()
