#!/usr/bin/python3
"""Generates N short mixed Chinese/English documents as JSONL shards, for the
staged run's per-stage rates (docs/SCALING.md, docs/BENCHMARKS.md).

Each text is 60-140 characters: pieces of random lines of
data/sample/bench_zh.txt and bench_en.txt (about 2/3 Chinese) joined end to
end, with a random 6-character tag, so new texts are unique. DUP_RATE of the
documents repeat an earlier one (half exactly, half with one character
changed). Deterministic for a seed. Records: {"id": n, "text": "..."}.

  bench/make_short_docs.py --docs 1000000 --shards 8 --out DIR [--seed 1] [--dup-rate 0.2]
"""
import argparse
import json
import pathlib
import random
import string

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dup-rate", type=float, default=0.2)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    zh = [l.strip() for l in (ROOT / "data/sample/bench_zh.txt").read_text().splitlines() if len(l.strip()) >= 4]
    en = [l.strip() for l in (ROOT / "data/sample/bench_en.txt").read_text(errors="replace").splitlines()
          if len(l.strip()) >= 8]
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    per = (a.docs + a.shards - 1) // a.shards
    recent = []  # earlier texts to repeat
    n = 0
    total = 0
    for s in range(a.shards):
        with open(out / f"docs-{s:03d}.jsonl", "w", encoding="utf-8") as f:
            for _ in range(min(per, a.docs - n)):
                if recent and rng.random() < a.dup_rate:
                    text = rng.choice(recent)
                    if rng.random() < 0.5:
                        i = rng.randrange(len(text))
                        text = text[:i] + rng.choice("的是在了有和人这中大为上个国我以要他时来用们") + text[i + 1:]
                else:
                    target = rng.randint(60, 140)
                    parts = ["".join(rng.choice(string.ascii_lowercase) for _ in range(6))]
                    length = 6
                    while length < target:
                        piece = rng.choice(zh if rng.random() < 0.67 else en)
                        start = rng.randrange(max(1, len(piece) - 8))
                        piece = piece[start:start + rng.randint(8, 30)]
                        parts.append(piece)
                        length += len(piece) + 1
                    text = " ".join(parts)[:target]
                    if len(recent) < 100_000:
                        recent.append(text)
                    else:
                        recent[rng.randrange(len(recent))] = text
                line = json.dumps({"id": n, "text": text}, ensure_ascii=False)
                f.write(line + "\n")
                total += len(line.encode()) + 1
                n += 1
    print(json.dumps({"documents": n, "shards": a.shards, "bytes": total}))


if __name__ == "__main__":
    main()
