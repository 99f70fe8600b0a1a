#!/usr/bin/env python3
"""Generates data/sample/docs.jsonl and data/sample/docs.txt.

Source texts are Debian's installed fortune files: English from the
`fortunes` package, Chinese from `fortunes-zh` (entries separated by lines of
"%"). Output is deterministic for a given seed and the same package versions
(fortunes 1:1.99.1-7.3, fortunes-zh 2.98 on Debian 12).

docs.jsonl: ~3000 originals, ~1500 near-duplicates made by small edits (a
word or character changed/inserted/deleted, a typo, punctuation, full/half
width, case, a repost prefix such as "RT: " or "转发：", whitespace), some
exact repeats and a few empty / punctuation-only texts, shuffled. Each line
is {"id": <string or number>, "text": ..., "source": ...}; "source" is a
passthrough field (where the text came from, e.g. "fortunes/wisdom", and for
derived texts what was done, e.g. "fortunes/wisdom#edit:typo"); "family" is
the ground truth: the index of the original a text was derived from (-1 for
the synthetic texts without features), so a perfect run keeps exactly one
document per family.

docs.txt: a few hundred one-line texts (same kind of edits) for
`neardup dedup --format lines`.

Usage: python3 scripts/make_sample.py [--seed N] [--out-dir data/sample]
       [--fortunes-dir /usr/share/games/fortunes]
Only the Python standard library is used.
"""

import argparse
import json
import os
import random
import re
import sys

ENGLISH_FILES = [
    "computers", "cookie", "debian", "definitions", "disclaimer", "drugs", "education",
    "ethnic", "food", "fortunes", "goedel", "humorists", "kids", "knghtbrd", "law", "linux",
    "linuxcookie", "literature", "love", "magic", "medicine", "men-women", "miscellaneous",
    "news", "paradoxum", "people", "perl", "pets", "platitudes", "politics", "pratchett",
    "science", "songs-poems", "sports", "startrek", "tao", "translate-me", "wisdom", "work",
    "zippy",
]
CHINESE_FILES = ["chinese", "song100", "tang300"]

ANSI = re.compile(r"\x1b\[[0-9;]*m")
BAD_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

N_EN, N_ZH = 2000, 1000          # originals
N_NEAR = 1500                    # near-duplicates
N_REPEAT = 300                   # exact repeats
MAX_BYTES = 2 * 1024 * 1024


def read_entries(path):
    try:
        with open(path, "rb") as f:
            data = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    entries = []
    for chunk in re.split(r"^%\s*$", data, flags=re.M):
        text = ANSI.sub("", chunk).strip("\n")
        text = "\n".join(line.rstrip() for line in text.split("\n")).strip()
        if not text or BAD_CONTROL.search(text):
            continue
        entries.append(text)
    return entries


def load(fortunes_dir, files, min_len, max_len):
    out = []
    seen = set()
    for name in files:
        for text in read_entries(os.path.join(fortunes_dir, name)):
            if min_len <= len(text) <= max_len and text not in seen:
                seen.add(text)
                out.append((text, name))
    return out


def is_cjk(ch):
    return "\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff"


EN_WORDS = ["really", "very", "the", "just", "new", "old", "big", "small", "good", "bad",
            "always", "never", "often", "computer", "people", "time", "world", "simply"]
ZH_CHARS = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年"
FULL = {",": "，", ".": "。", "!": "！", "?": "？", ":": "：", ";": "；", "(": "（", ")": "）"}
HALF = {v: k for k, v in FULL.items()}


def edit_english(rng, text):
    words = text.split(" ")
    idx = [i for i, w in enumerate(words) if re.fullmatch(r"[A-Za-z]{3,}[,.;:!?]?", w)]
    kind = rng.choice(["replace", "insert", "delete", "typo", "punct", "case", "prefix", "space"])
    if kind in ("replace", "delete", "typo") and not idx:
        kind = "insert"
    if kind == "replace":
        i = rng.choice(idx)
        m = re.fullmatch(r"([A-Za-z]+)(.*)", words[i])
        words[i] = rng.choice(EN_WORDS) + m.group(2)
    elif kind == "insert":
        words.insert(rng.randrange(len(words) + 1), rng.choice(EN_WORDS))
    elif kind == "delete":
        del words[rng.choice(idx)]
    elif kind == "typo":
        i = rng.choice(idx)
        w = list(words[i])
        j = rng.randrange(len(re.match(r"[A-Za-z]+", words[i]).group(0)) - 1)
        w[j], w[j + 1] = w[j + 1], w[j]
        words[i] = "".join(w)
    elif kind == "punct":
        t = " ".join(words)
        if rng.random() < 0.5 and t[-1:] in ".!?":
            return t[:-1] + rng.choice(["!", "!!", "...", "?"]), kind
        return re.sub(r",", "", t, count=2) + rng.choice(["!", " :-)", "."]), kind
    elif kind == "case":
        t = " ".join(words)
        return (t.upper() if rng.random() < 0.3 else t.lower()), kind
    elif kind == "prefix":
        return rng.choice(["RT: ", "Fwd: ", "Re: ", "RT @fortune: "]) + " ".join(words), kind
    elif kind == "space":
        t = " ".join(words)
        if rng.random() < 0.5:
            return t.replace("\n", " "), kind
        return "  " + t.replace(" ", "  ", 3) + " \n", kind
    return " ".join(words), kind


def edit_chinese(rng, text):
    pos = [i for i, ch in enumerate(text) if is_cjk(ch)]
    kind = rng.choice(["replace", "insert", "delete", "width", "prefix", "space"])
    if kind in ("replace", "delete") and not pos:
        kind = "prefix"
    if kind == "replace":
        i = rng.choice(pos)
        return text[:i] + rng.choice(ZH_CHARS) + text[i + 1:], kind
    if kind == "insert":
        i = rng.randrange(len(text) + 1)
        return text[:i] + rng.choice(ZH_CHARS) + text[i:], kind
    if kind == "delete":
        i = rng.choice(pos)
        return text[:i] + text[i + 1:], kind
    if kind == "width":
        table = HALF if any(ch in HALF for ch in text) else FULL
        return "".join(table.get(ch, ch) for ch in text), kind
    if kind == "prefix":
        return rng.choice(["转发：", "转发: ", "【转】", "分享："]) + text, kind
    return text.replace("\n", rng.choice(["", " ", "\n\n"])), kind  # space


def make_id(rng, i, used):
    while True:
        r = rng.random()
        if r < 0.45:
            v = rng.randrange(1, 10_000_000)
        elif r < 0.85:
            v = "doc-%06d" % rng.randrange(1_000_000)
        elif r < 0.95:
            v = "%08x" % rng.getrandbits(32)
        elif r < 0.98:
            v = "文档-%d" % rng.randrange(100_000)
        else:
            v = 'q"%d\\x' % rng.randrange(100_000)  # needs escaping in JSON
        key = json.dumps(v)
        if key not in used:
            used.add(key)
            return v


def build_jsonl(rng, en, zh):
    originals = [(t, "fortunes/" + s, "en") for t, s in rng.sample(en, N_EN)]
    originals += [(t, "fortunes-zh/" + s, "zh") for t, s in rng.sample(zh, N_ZH)]
    docs = [(t, src, fam) for fam, (t, src, _) in enumerate(originals)]
    # Near-duplicates: 1 edit, sometimes 2.
    for _ in range(N_NEAR):
        fam = rng.randrange(len(originals))
        text, src, lang = originals[fam]
        edits = []
        for _ in range(2 if rng.random() < 0.2 else 1):
            text, kind = (edit_english if lang == "en" else edit_chinese)(rng, text)
            edits.append(kind)
        docs.append((text, src + "#edit:" + "+".join(edits), fam))
    for _ in range(N_REPEAT):
        fam = rng.randrange(len(originals))
        text, src, _ = originals[fam]
        docs.append((text, src + "#repeat", fam))
    for text in ["", "", "   ", "...", "!!!", "..."]:
        docs.append((text, "synthetic#no-features", -1))
    rng.shuffle(docs)
    used = set()
    lines = []
    for i, (text, src, fam) in enumerate(docs):
        rec = {"id": make_id(rng, i, used), "text": text, "source": src, "family": fam}
        if rng.random() < 0.1:  # field order does not matter
            rec = {"source": src, "family": fam, "text": text, "id": rec["id"]}
        lines.append(json.dumps(rec, ensure_ascii=False))
    return lines


def build_lines(rng, en):
    one_line = [re.sub(r"\s+", " ", t) for t, _ in en if len(t) <= 160]
    base = rng.sample(one_line, 260)
    out = list(base)
    for _ in range(90):
        t, _ = edit_english(rng, rng.choice(base))
        out.append(re.sub(r"\s*\n\s*", " ", t).rstrip())
    for _ in range(30):
        out.append(rng.choice(base))
    rng.shuffle(out)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(__file__), "..", "data", "sample"))
    ap.add_argument("--fortunes-dir", default="/usr/share/games/fortunes")
    args = ap.parse_args()

    en = load(args.fortunes_dir, ENGLISH_FILES, 40, 320)
    zh = load(args.fortunes_dir, CHINESE_FILES, 16, 120)
    if len(en) < N_EN or len(zh) < N_ZH:
        sys.exit("make_sample: too few fortunes (%d English, %d Chinese); install the "
                 "'fortunes' and 'fortunes-zh' packages" % (len(en), len(zh)))
    rng = random.Random(args.seed)
    lines = build_jsonl(rng, en, zh)
    text_lines = build_lines(rng, en)

    os.makedirs(args.out_dir, exist_ok=True)
    data = ("\n".join(lines) + "\n").encode("utf-8")
    if len(data) > MAX_BYTES:
        sys.exit("make_sample: docs.jsonl would be %d bytes (> %d)" % (len(data), MAX_BYTES))
    with open(os.path.join(args.out_dir, "docs.jsonl"), "wb") as f:
        f.write(data)
    with open(os.path.join(args.out_dir, "docs.txt"), "wb") as f:
        f.write(("\n".join(text_lines) + "\n").encode("utf-8"))
    print("make_sample: %d documents (%d bytes) in docs.jsonl, %d lines in docs.txt"
          % (len(lines), len(data), len(text_lines)))


if __name__ == "__main__":
    main()
