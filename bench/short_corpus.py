#!/usr/bin/env python3
"""Writes N short mixed Chinese/English JSONL documents for batch benchmarks.

Deterministic for a given --seed. Each document is either new (two spans of
the bundled sample and natural texts joined, then a random 8-character tag
so it is distinct from every other) or, with probability --dup-rate, a
repost of a recent document with a few characters changed.
  bench/short_corpus.py 1000000 > /tmp/short-1m.jsonl
"""
import argparse
import json
import pathlib
import random
import string
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def sources():
    texts = []
    for path in [ROOT / "data/sample/docs.jsonl", *sorted((ROOT / "data/natural").glob("*/*-short.jsonl"))]:
        for line in path.open(encoding="utf-8"):
            t = json.loads(line).get("text", "")
            if 10 <= len(t) <= 400:
                texts.append(t)
    return texts


def span(rng, text, lo, hi):
    n = rng.randint(lo, hi)
    start = rng.randint(0, max(0, len(text) - n))
    return text[start:start + n]


def edit(rng, text):
    chars = list(text)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(chars))
        chars[i] = rng.choice(string.ascii_letters + "的一是在不了有和人这中")
    return "".join(chars)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("n", type=int)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dup-rate", type=float, default=0.2)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    texts = sources()
    recent = []
    out = sys.stdout
    for i in range(a.n):
        if recent and rng.random() < a.dup_rate:
            text = edit(rng, rng.choice(recent))
        else:
            tag = "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(8))
            text = span(rng, rng.choice(texts), 10, 80) + " " + span(rng, rng.choice(texts), 10, 80) + " " + tag
            recent.append(text)
            if len(recent) > 10000:
                recent[rng.randrange(len(recent))] = recent.pop()
        out.write(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
