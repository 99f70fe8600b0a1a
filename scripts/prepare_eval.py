#!/usr/bin/env python3
"""Builds the labeled near-duplicate evaluation sets for `neardup eval`.

Texts come from installed Debian packages only (this script installs nothing
and downloads nothing; install them first):

    apt-get install fortunes fortunes-zh manpages-zh \
                    debian-reference-zh-cn debian-reference-en manpages
    (and manpages-dev for --distractors)

  bucket     source (package: files)
  en-short   fortunes: /usr/share/games/fortunes/<english files>   (<= 200 chars)
  zh-short   fortunes-zh: /usr/share/games/fortunes/{chinese,song100,tang300}
  en-long    debian-reference-en: debian-reference.en.txt.gz, paragraph chunks,
             and manpages: its sections 5 and 7 (file formats, overviews;
             roff stripped), chunks
  zh-long    debian-reference-zh-cn: debian-reference.zh-cn.txt.gz, and
             manpages-zh: /usr/share/man/zh_CN/man*/*.gz (roff stripped), chunks

Length is the length of the normalized text (NFKC + casefold, every run of
non-letter/number/mark characters -> one space), in code points: "short" is
<= 200, "long" is > 200 (chunks are cut to 250..2500).

Output (JSONL, one document per line, in stream order):
  {"id": "dev-000123", "text": ..., "family": 17, "bucket": "zh-short",
   "level": "r2", "edits": "sub,sub,prefix", "source": "fortunes-zh/chinese"}
  family  ground truth: documents with equal family are near-duplicates. It is
          the index of a group of originals: originals whose normalized texts
          are equal, or whose character-3-gram Jaccard is >= MERGE_JACCARD, or
          whose 3-gram containment (of the smaller in the larger, both >= 20
          3-grams) is >= MERGE_CONTAINMENT, are one family (union-find), so
          the sources' natural repeats are not counted as false positives.
  bucket  {zh,en}-{short,long} of the original the document derives from.
  level   "orig" for an original; for a variant the edit rate: "r0" (format
          and structure edits only, or an exact repost), "r1", "r2", ... (see
          RATES).
  edits   the edits applied, in order.

Files: data/eval/dev.jsonl (tune here), data/eval/test.jsonl (report here),
and with --sample also data/sample/eval_small.jsonl (<= 500 KB, checked in,
used by tests/accuracy_test.cc). Families are disjoint between the three.
With --distractors N also data/eval/distractors.jsonl: N English texts from
the manpages-dev package (sections 2 and 3: sentences as short texts,
paragraph chunks as long ones; bucket "noise", each its own family, natural
repeats merged like the originals). Prepended to a split it measures the
policy against a fuller index: `cat distractors.jsonl test.jsonl`.
Deterministic for a given --seed and the same package versions (Debian 12:
fortunes 1:1.99.1-7.3, fortunes-zh 2.98, manpages-zh 1.6.4.0-1,
debian-reference 2.100). Python standard library only.

Usage: python3 scripts/prepare_eval.py [--seed N] [--out-dir data/eval]
                                       [--sample data/sample/eval_small.jsonl]
"""

import argparse
import bisect
import glob
import gzip
import json
import math
import os
import random
import re
import sys
import unicodedata
import zlib

FORTUNES_DIR = "/usr/share/games/fortunes"
DEBREF_DIR = "/usr/share/debian-reference"
MAN_ZH_DIR = "/usr/share/man/zh_CN"
MANPAGES_LIST = "/var/lib/dpkg/info/manpages.list"  # files of the `manpages` package
MANPAGES_DEV_LIST = "/var/lib/dpkg/info/manpages-dev.list"  # `manpages-dev` (distractors only)

ENGLISH_FILES = [
    "computers", "cookie", "debian", "definitions", "disclaimer", "drugs", "education",
    "ethnic", "food", "fortunes", "goedel", "humorists", "kids", "knghtbrd", "law", "linux",
    "linuxcookie", "literature", "love", "magic", "medicine", "men-women", "miscellaneous",
    "news", "paradoxum", "people", "perl", "pets", "platitudes", "politics", "pratchett",
    "science", "songs-poems", "sports", "startrek", "tao", "translate-me", "wisdom", "work",
    "zippy",
]
CHINESE_FILES = ["chinese", "song100", "tang300"]

SHORT_MAX = 200            # normalized code points
SHORT_MIN = {"en": 24, "zh": 10}
LONG_MIN, LONG_MAX = 250, 2500
MERGE_JACCARD = 0.5
MERGE_CONTAINMENT = 0.9

# Originals per bucket and split. Variants: VARIANTS_PER_ORIGINAL * originals,
# each derived from a random original of the split (so some families get
# several variants and about a third get none).
COUNTS = {
    #            dev   test  sample
    "en-short": (2000, 2000, 200),
    "zh-short": (1800, 1800, 200),
    "en-long": (480, 480, 24),
    "zh-long": (400, 400, 24),
}
VARIANTS_PER_ORIGINAL = 1.0
SAMPLE_LONG_MAX = 900      # the checked-in sample keeps long texts shorter
SAMPLE_MAX_BYTES = 500 * 1024

# Edit rates (fraction of units: CJK characters for zh, words for en; at least
# one unit edit when the rate is > 0). Short and long texts get different
# scales: a long article reposted with 10% of its words changed is a rewrite.
RATES = {
    "short": [("r0", 0.0), ("r1", 0.02), ("r2", 0.05), ("r3", 0.08)],
    "long": [("r0", 0.0), ("r1", 0.005), ("r2", 0.01), ("r3", 0.02)],
}

ANSI = re.compile(r"\x1b\[[0-9;]*m")
BAD_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


# ---------------------------------------------------------------- normalization

def normalize(text):
    """Approximates neardup's normalization (ICU NFKC_Casefold, then every run
    of characters that are not letters/numbers/marks -> one space)."""
    t = unicodedata.normalize("NFKC", text).casefold()
    out = []
    prev_space = True
    for ch in t:
        cat = unicodedata.category(ch)
        if cat[0] in "LN" or (cat[0] == "M" and not prev_space):
            out.append(ch)
            prev_space = False
        elif not prev_space:
            out.append(" ")
            prev_space = True
    return "".join(out).strip()


def is_cjk(ch):
    o = ord(ch)
    return (0x3400 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF or 0x3040 <= o <= 0x30FF
            or 0x20000 <= o <= 0x3FFFF or 0xAC00 <= o <= 0xD7AF)


def lang_of(norm):
    letters = [c for c in norm if c != " "]
    if not letters:
        return None
    cjk = sum(1 for c in letters if is_cjk(c))
    return "zh" if cjk >= 0.3 * len(letters) else "en"


def grams3(norm):
    return {norm[i:i + 3] for i in range(max(1, len(norm) - 2))}


# ---------------------------------------------------------------- sources

def read_fortunes(name):
    try:
        with open(os.path.join(FORTUNES_DIR, name), "rb") as f:
            data = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    out = []
    for chunk in re.split(r"^%\s*$", data, flags=re.M):
        text = ANSI.sub("", chunk).replace("\xa0", " ")
        text = "\n".join(line.rstrip() for line in text.strip("\n").split("\n")).strip()
        if not text or BAD_CONTROL.search(text):
            continue
        out.append(text)
    return out


def load_short(files, package, want_lang):
    out = []
    for name in files:
        for text in read_fortunes(name):
            norm = normalize(text)
            if lang_of(norm) != want_lang:
                continue
            if SHORT_MIN[want_lang] <= len(norm) <= SHORT_MAX:
                out.append((text, package + "/" + name))
    return out


TABLE_CHARS = set("+-|=│┌┐└┘├┤┬┴┼─━┃")


def is_prose(par):
    stripped = "".join(par.split())
    if len(stripped) < 20:
        return False
    table = sum(1 for c in stripped if c in TABLE_CHARS)
    return table < 0.1 * len(stripped)


def chunk_paragraphs(rng, paragraphs, source):
    """Groups consecutive prose paragraphs into chunks of random target length."""
    out = []
    cur, cur_len = [], 0
    target = int(LONG_MIN * (LONG_MAX / LONG_MIN) ** rng.random())
    for par in paragraphs:
        if not is_prose(par):
            continue
        n = len(normalize(par))
        if cur and cur_len + n > LONG_MAX:
            if cur_len >= LONG_MIN:
                out.append(("\n\n".join(cur), source))
            cur, cur_len = [], 0
            target = int(LONG_MIN * (LONG_MAX / LONG_MIN) ** rng.random())
        cur.append(par)
        cur_len += n + 1
        if cur_len >= target:
            if cur_len <= LONG_MAX:
                out.append(("\n\n".join(cur), source))
            cur, cur_len = [], 0
            target = int(LONG_MIN * (LONG_MAX / LONG_MIN) ** rng.random())
    return out


def text_paragraphs(path):
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        data = f.read()
    pars = []
    for par in re.split(r"\n[ \t]*\n", data):
        lines = [l.strip() for l in par.split("\n")]
        par = "\n".join(l for l in lines if l)
        if par:
            pars.append(par)
    return pars


ROFF_TEXT_MACROS = {"SH", "SS", "B", "I", "BR", "RB", "IR", "RI", "BI", "IB", "SM", "SB", "TP", "IP"}


def roff_inline(s):
    s = re.sub(r"\\f(\[[^\]]*\]|\(..|.)", "", s)
    s = re.sub(r"\\\*(\[[^\]]*\]|\(..|.)", "", s)
    s = re.sub(r"\\s[+-]?\d", "", s)
    s = re.sub(r"\\\((em|en|hy)", "-", s)
    s = re.sub(r"\\\(..", " ", s)
    s = re.sub(r"\\\[[^\]]*\]", " ", s)
    s = s.replace("\\-", "-").replace("\\e", "\\").replace("\\ ", " ")
    s = re.sub(r"\\[&,/|^c%]", "", s)
    s = re.sub(r"\\.", "", s)
    return s


def man_paragraphs(path):
    try:
        with gzip.open(path, "rb") as f:
            data = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError):
        return []
    pars, cur = [], []
    in_table = False

    def flush():
        if cur:
            pars.append("\n".join(cur))
            cur.clear()

    for line in data.split("\n"):
        if line.startswith(".\\\"") or line.startswith("'\\\"") or line.startswith('.\\"'):
            continue
        if line.startswith(".") or line.startswith("'"):
            m = re.match(r"[.'](\S+)\s*(.*)", line)
            if not m:
                continue
            macro, args = m.group(1), m.group(2)
            if macro in ("TS", "EX", "nf"):
                in_table = True
            elif macro in ("TE", "EE", "fi"):
                in_table = False
            elif macro in ("SH", "SS"):
                flush()
                if args:
                    pars.append(roff_inline(args.replace('"', "")))
            elif macro in ROFF_TEXT_MACROS:
                if args:
                    cur.append(roff_inline(args.replace('"', "")))
            elif macro in ("PP", "P", "LP", "sp", "RS", "RE", "TH"):
                flush()
            continue
        if in_table:
            continue
        t = roff_inline(line).strip()
        if t:
            cur.append(t)
        else:
            flush()
    flush()
    return pars


def load_long(rng):
    en = chunk_paragraphs(rng, text_paragraphs(os.path.join(DEBREF_DIR, "debian-reference.en.txt.gz")),
                          "debian-reference-en")
    zh = chunk_paragraphs(rng, text_paragraphs(os.path.join(DEBREF_DIR, "debian-reference.zh-cn.txt.gz")),
                          "debian-reference-zh-cn")
    # The same manual is often installed under several names or sections (or
    # translated twice); chunked at different places its copies would overlap
    # without being near-duplicates as a whole. Keep the first copy only.
    seen_pars = set()

    def new_page(pars):
        keys = [normalize(p) for p in pars if is_prose(p)]
        if not keys:
            return False
        repeated = sum(1 for k in keys if k in seen_pars)
        seen_pars.update(keys)
        return repeated < 0.2 * len(keys)

    for path in sorted(glob.glob(os.path.join(MAN_ZH_DIR, "man*", "*.gz"))):
        pars = man_paragraphs(path)
        if new_page(pars):
            zh += chunk_paragraphs(rng, pars, "manpages-zh/" + os.path.basename(path))
    try:
        with open(MANPAGES_LIST, encoding="utf-8") as f:
            en_man = sorted(l.strip() for l in f if re.search(r"/man[57]/[^/]*\.gz$", l.strip()))
    except OSError:
        en_man = []
    for path in en_man:
        pars = man_paragraphs(path)
        if new_page(pars):
            en += chunk_paragraphs(rng, pars, "manpages/" + os.path.basename(path))
    out = {"en": [], "zh": []}
    for lang, items in (("en", en), ("zh", zh)):
        for text, src in items:
            norm = normalize(text)
            if lang_of(norm) == lang and LONG_MIN <= len(norm) <= LONG_MAX:
                out[lang].append((text, src))
    return out


# ---------------------------------------------------------------- families

class UnionFind:
    def __init__(self, n):
        self.p = list(range(n))

    def find(self, x):
        while self.p[x] != x:
            self.p[x] = self.p[self.p[x]]
            x = self.p[x]
        return x

    def union(self, a, b):
        a, b = self.find(a), self.find(b)
        if a != b:
            self.p[max(a, b)] = min(a, b)


def merge_families(norms):
    """Union-find over originals: equal normalized text, 3-gram Jaccard >=
    MERGE_JACCARD, or containment (of the smaller, >= 20 3-grams) >=
    MERGE_CONTAINMENT. Exact, by prefix filtering: if |A ∩ B| >= a, any
    |A| - a + 1 of A's 3-grams include one of B's, so probing A's rarest
    |A| - a + 1 3-grams in an index of every 3-gram finds every such B."""
    n = len(norms)
    uf = UnionFind(n)
    sets = [grams3(t) for t in norms]
    by_text = {}
    for i, t in enumerate(norms):
        if t in by_text:
            uf.union(by_text[t], i)
        else:
            by_text[t] = i
    postings = {}
    for i, s in enumerate(sets):
        for g in s:
            postings.setdefault(g, []).append(i)
    # Each posting list by set size, so a size range is a slice.
    sizes = {}
    for g, p in postings.items():
        p.sort(key=lambda j: (len(sets[j]), j))
        sizes[g] = [len(sets[j]) for j in p]
    merged = 0
    for i, s in enumerate(sets):
        ordered = sorted(s, key=lambda g: (len(postings[g]), g))
        # A partner B with J >= t has |A ∩ B| >= t |A|; if A (the smaller)
        # is contained in B, |A ∩ B| >= c |A| with c > t. Pairs are probed
        # from both sides, so the smaller one always finds the larger.
        # Containment needs one of A's rarest |A| - ceil(c|A|) + 1; Jaccard
        # one of its rarest |A| - ceil(t|A|) + 1, and |A|/2 <= |B| <= 2|A|.
        na = len(s)
        p_cont = na - math.ceil(MERGE_CONTAINMENT * na - 1e-9) + 1 if na >= 20 else 0
        p_jac = na - math.ceil(MERGE_JACCARD * na - 1e-9) + 1
        cands = set()
        for g in ordered[:max(1, p_cont)]:
            cands.update(postings[g])
        lo, hi = MERGE_JACCARD * na, na / MERGE_JACCARD
        for g in ordered[max(1, p_cont):max(1, p_jac)]:
            sz = sizes[g]
            cands.update(postings[g][bisect.bisect_left(sz, lo):bisect.bisect_right(sz, hi)])
        for j in sorted(cands):
            if j == i or uf.find(i) == uf.find(j):
                continue
            inter = len(s & sets[j])
            if inter == 0:
                continue
            small = min(len(s), len(sets[j]))
            jac = inter / len(s | sets[j])
            cont = inter / small
            if jac >= MERGE_JACCARD or (small >= 20 and cont >= MERGE_CONTAINMENT):
                if uf.find(i) != uf.find(j):
                    merged += 1
                uf.union(i, j)
    return [uf.find(i) for i in range(n)], merged


# ---------------------------------------------------------------- edits

ZH_PREFIXES = ["转发：", "转发: ", "【转】", "转发微博 ", "//@小鱼儿: ", "#每日一句# ", "分享：", "转自朋友圈："]
ZH_SUFFIXES = [" //@一只猫: 转发微博", "（转）", " 分享自微博", "——转自朋友圈", " [赞]", " 收藏了", "。。。"]
EN_PREFIXES = ["RT @user: ", "RT: ", "Fwd: ", "Re: ", "RT @daily_quote: ", "via @bob: ", "Quote: "]
EN_SUFFIXES = [" via @user", " #quote", " (h/t @alice)", " RT", " :-)", " -- shared", " #truth"]
ZH_COMMENTS = ["说得太好了！", "深有同感。", "值得一读。", "转给大家看看。", "哈哈，有意思。", "收藏一下。", "说得对！"]
EN_COMMENTS = ["So true!", "Love this.", "This is gold.", "Worth reading.", "Ha, so true.",
               "Sharing this.", "Exactly."]
EMOJI = ["😂", "👍", "🙏", "❤️", "🔥", "😊", "!!!", "~"]
FULL = {",": "，", ".": "。", "!": "！", "?": "？", ":": "：", ";": "；", "(": "（", ")": "）"}
HALF = {v: k for k, v in FULL.items()}


def to_fullwidth(s, rng, p):
    out = []
    for ch in s:
        o = ord(ch)
        if 0x21 <= o <= 0x7E and rng.random() < p:
            out.append(chr(o + 0xFEE0))
        elif ch == " " and rng.random() < p:
            out.append("\u3000")
        else:
            out.append(ch)
    return "".join(out)


def split_sentences(text, lang):
    if lang == "zh":
        parts = re.split(r"(?<=[。！？；!?;\n])", text)
    else:
        parts = re.split(r"(?<=[.!?;])\s+|\n", text)
    return [p for p in parts if p.strip()]


class Editor:
    def __init__(self, rng, lang, zh_chars, en_words, sentences):
        self.rng = rng
        self.lang = lang
        self.zh_chars = zh_chars
        self.en_words = en_words
        self.sentences = sentences  # other texts' sentences, for additions

    # -- unit edits: characters (zh) or words (en)
    def unit_edit(self, text):
        rng = self.rng
        if self.lang == "zh":
            pos = [i for i, ch in enumerate(text) if is_cjk(ch)]
            if not pos:
                return text, "none"
            kind = rng.choice(["sub", "sub", "ins", "del", "swap"])
            i = rng.choice(pos)
            if kind == "sub":
                return text[:i] + rng.choice(self.zh_chars) + text[i + 1:], kind
            if kind == "ins":
                return text[:i] + rng.choice(self.zh_chars) + text[i:], kind
            if kind == "del":
                return text[:i] + text[i + 1:], kind
            if i + 1 < len(text) and is_cjk(text[i + 1]):
                return text[:i] + text[i + 1] + text[i] + text[i + 2:], kind
            return text[:i] + rng.choice(self.zh_chars) + text[i + 1:], "sub"
        words = list(re.finditer(r"[A-Za-z]+", text))
        if not words:
            return text, "none"
        m = rng.choice(words)
        a, b = m.span()
        w = m.group(0)
        kind = rng.choice(["wsub", "wins", "wdel", "typo", "typo"])
        if kind == "wsub":
            return text[:a] + rng.choice(self.en_words) + text[b:], kind
        if kind == "wins":
            return text[:a] + rng.choice(self.en_words) + " " + text[a:], kind
        if kind == "wdel" and len(words) > 3:
            end = b
            while end < len(text) and text[end] == " ":
                end += 1
            return text[:a] + text[end:], kind
        # typo inside the word
        if len(w) < 2:
            return text[:a] + rng.choice(self.en_words) + text[b:], "wsub"
        j = rng.randrange(len(w) - 1)
        t = rng.choice(["swap", "drop", "double", "char"])
        if t == "swap":
            w2 = w[:j] + w[j + 1] + w[j] + w[j + 2:]
        elif t == "drop":
            w2 = w[:j] + w[j + 1:]
        elif t == "double":
            w2 = w[:j] + w[j] + w[j:]
        else:
            w2 = w[:j] + rng.choice("abcdefghijklmnopqrstuvwxyz") + w[j + 1:]
        return text[:a] + w2 + text[b:], "typo"

    # -- format edits: what normalization is meant to absorb
    def format_edit(self, text, kind):
        rng = self.rng
        if kind == "punct":
            if self.lang == "zh":
                t = re.sub(r"[，、]", lambda m: rng.choice(["，", "、", " ", ",", ""]), text)
                return t + rng.choice(["", "！", "。。。", "？！"])
            t = re.sub(r",", lambda m: rng.choice([",", "", " -", ";"]), text)
            t = re.sub(r"\.(\s|$)", lambda m: rng.choice([".", "!", "...", ""]) + m.group(1), t)
            return t
        if kind == "width":
            if self.lang == "zh":
                table = HALF if rng.random() < 0.5 else FULL
                return "".join(table.get(ch, ch) for ch in text)
            return to_fullwidth(text, rng, 0.3)
        if kind == "space":
            r = rng.random()
            if r < 0.35:
                return text.replace("\n", " " if self.lang == "en" else "")
            if r < 0.7:
                return "  " + text.replace("\n", "\n\n", 2).replace(" ", "  ", 3) + " \n"
            return "\n".join(l.strip() for l in text.split("\n")).replace("\n", "\r\n")
        if kind == "case":
            r = rng.random()
            return text.upper() if r < 0.3 else text.lower() if r < 0.7 else text.title()
        if kind == "emoji":
            return text + " " + rng.choice(EMOJI)
        return text

    def repost(self, text):
        rng = self.rng
        pre, suf = (ZH_PREFIXES, ZH_SUFFIXES) if self.lang == "zh" else (EN_PREFIXES, EN_SUFFIXES)
        if rng.random() < 0.6:
            return rng.choice(pre) + text, "prefix"
        return text + rng.choice(suf), "suffix"

    def sentence_edit(self, text, kind):
        rng = self.rng
        sents = split_sentences(text, self.lang)
        n = len(normalize(text))
        if kind == "sdrop":
            cands = [i for i, s in enumerate(sents) if len(normalize(s)) <= n / 3]
            if len(sents) < 2 or not cands:
                return text, None
            i = rng.choice(cands)
            return "".join(s if self.lang == "zh" else s + " " for j, s in enumerate(sents) if j != i).strip(), kind
        # sadd: a comment or a sentence from another text, at most a third of the length
        if rng.random() < 0.5:
            add = rng.choice(ZH_COMMENTS if self.lang == "zh" else EN_COMMENTS)
        else:
            add = rng.choice(self.sentences).strip()
        if len(normalize(add)) > max(6, n / 3):
            add = rng.choice(ZH_COMMENTS if self.lang == "zh" else EN_COMMENTS)
        sep = "" if self.lang == "zh" else " "
        if rng.random() < 0.5 or len(sents) < 2:
            return (add + sep + text if rng.random() < 0.3 else text + sep + add), kind
        i = rng.randrange(1, len(sents))
        return sep.join([sep.join(sents[:i]).strip(), add, sep.join(sents[i:]).strip()]) if sep else \
            "".join(sents[:i]) + add + "".join(sents[i:]), kind

    def variant(self, text, size, rate):
        """Returns (text, edits): an edited copy at `rate`."""
        rng = self.rng
        edits = []
        if rate > 0:
            units = sum(1 for c in text if is_cjk(c)) if self.lang == "zh" else len(re.findall(r"[A-Za-z]+", text))
            n = max(1, round(rate * units))
            for _ in range(n):
                text, k = self.unit_edit(text)
                edits.append(k)
        # Structure (occasional) and presentation edits.
        if rng.random() < 0.12:
            text, k = self.sentence_edit(text, "sdrop")
            if k:
                edits.append(k)
        if rng.random() < 0.12:
            text, k = self.sentence_edit(text, "sadd")
            edits.append(k)
        if rng.random() < 0.3:
            text, k = self.repost(text)
            edits.append(k)
        kinds = ["punct", "width", "space", "emoji"] + (["case"] if self.lang == "en" else [])
        for k in kinds:
            if rng.random() < 0.2:
                text = self.format_edit(text, k)
                edits.append(k)
        if not edits:
            edits.append("repeat")  # an exact repost
        return text, ",".join(edits)


# ---------------------------------------------------------------- assembly

def build_split(rng, name, originals, editors):
    """originals: list of (text, source, family, bucket). Returns JSON lines."""
    docs = []
    by_bucket = {}
    for o in originals:
        docs.append({"text": o[0], "family": o[2], "bucket": o[3], "level": "orig", "edits": "",
                     "source": o[1]})
        by_bucket.setdefault(o[3], []).append(o)
    variants = {}  # family -> texts so far (variants may derive from variants)
    for bucket in sorted(by_bucket):
        pool = by_bucket[bucket]
        lang, size = bucket.split("-")
        for _ in range(int(round(VARIANTS_PER_ORIGINAL * len(pool)))):
            text, src, fam, _ = rng.choice(pool)
            prev = variants.get(fam)
            if prev and rng.random() < 0.3:
                text = rng.choice(prev)  # a repost of a repost
            level, rate = rng.choice(RATES[size])
            vt, edits = editors[lang].variant(text, size, rate)
            variants.setdefault(fam, []).append(vt)
            docs.append({"text": vt, "family": fam, "bucket": bucket, "level": level, "edits": edits,
                         "source": src})
    rng.shuffle(docs)
    lines = []
    for i, d in enumerate(docs):
        rec = {"id": "%s-%06d" % (name, i)}
        rec.update(d)
        lines.append(json.dumps(rec, ensure_ascii=False))
    return lines


def stable_hash(s):
    return zlib.crc32(s.encode("utf-8"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "eval"))
    ap.add_argument("--sample", default=None, help="also write the small checked-in sample here")
    ap.add_argument("--distractors", type=int, default=0,
                    help="also write this many distractor texts (manpages-dev) to distractors.jsonl")
    args = ap.parse_args()
    rng = random.Random(args.seed)

    pools = {
        "en-short": load_short(ENGLISH_FILES, "fortunes", "en"),
        "zh-short": load_short(CHINESE_FILES, "fortunes-zh", "zh"),
    }
    long = load_long(rng)
    pools["en-long"] = long["en"]
    pools["zh-long"] = long["zh"]
    for b, p in pools.items():
        need = sum(COUNTS[b])
        print("prepare_eval: %s: %d candidate originals (need ~%d)" % (b, len(p), need), file=sys.stderr)
        if len(p) < need:
            sys.exit("prepare_eval: too few %s texts; install fortunes fortunes-zh manpages-zh "
                     "debian-reference-zh-cn debian-reference-en" % b)

    # Sample the originals, then merge their natural repeats into families.
    chosen = []
    for b in sorted(pools):
        p = pools[b]
        k = min(len(p), int(sum(COUNTS[b]) * 1.15))
        for text, src in rng.sample(p, k):
            chosen.append((text, src, b))
    norms = [normalize(t) for t, _, _ in chosen]
    roots, merged = merge_families(norms)
    fam_index = {}
    for r in roots:
        fam_index.setdefault(r, len(fam_index))
    families = [fam_index[r] for r in roots]
    print("prepare_eval: %d originals, %d families (%d natural-repeat merges)"
          % (len(chosen), len(fam_index), merged), file=sys.stderr)

    # Split by family: each family goes to the split of its first member's bucket quota.
    order = list(range(len(fam_index)))
    rng.shuffle(order)
    rank = {f: i for i, f in enumerate(order)}
    members = {}
    for i, f in enumerate(families):
        members.setdefault(f, []).append(i)
    splits = {"dev": [], "test": [], "sample": []}
    taken = {b: [0, 0, 0] for b in COUNTS}
    for f in sorted(members, key=lambda f: rank[f]):
        idx = members[f]
        b = chosen[idx[0]][2]
        longest = max(len(norms[i]) for i in idx)
        for s, name in enumerate(("dev", "test", "sample")):
            if name == "sample" and b.endswith("long") and longest > SAMPLE_LONG_MAX:
                continue
            if taken[b][s] < COUNTS[b][s]:
                taken[b][s] += len([i for i in idx if chosen[i][2] == b])
                for i in idx:
                    t, src, bi = chosen[i]
                    splits[name].append((t, src, f, bi))
                break

    # Edit vocabularies from the corpus itself.
    zh_chars, en_words, sents = [], [], {"zh": [], "en": []}
    for t, _, b in chosen:
        lang = b.split("-")[0]
        if lang == "zh":
            zh_chars.extend(c for c in t if is_cjk(c))
        else:
            en_words.extend(w.lower() for w in re.findall(r"[A-Za-z]{2,}", t))
        if b.endswith("short"):
            sents[lang].extend(split_sentences(t, lang))
    editors = {lang: Editor(rng, lang, zh_chars, en_words, sents[lang]) for lang in ("zh", "en")}

    os.makedirs(args.out_dir, exist_ok=True)
    outputs = [("dev", os.path.join(args.out_dir, "dev.jsonl")), ("test", os.path.join(args.out_dir, "test.jsonl"))]
    if args.sample:
        outputs.append(("sample", args.sample))
    for name, path in outputs:
        lines = build_split(rng, name, splits[name], editors)
        data = ("\n".join(lines) + "\n").encode("utf-8")
        if name == "sample" and len(data) > SAMPLE_MAX_BYTES:
            sys.exit("prepare_eval: sample would be %d bytes (> %d)" % (len(data), SAMPLE_MAX_BYTES))
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        counts = {}
        for line in lines:
            rec = json.loads(line)
            counts[rec["bucket"]] = counts.get(rec["bucket"], 0) + 1
        print("prepare_eval: %s: %d documents, %d bytes -> %s (%s)" % (
            name, len(lines), len(data), path, ", ".join("%s %d" % kv for kv in sorted(counts.items()))),
            file=sys.stderr)
    if args.distractors > 0:
        write_distractors(args.seed, args.distractors, args.out_dir)


def write_distractors(seed, n, out_dir):
    """Unlabeled-looking filler: each text its own family, bucket "noise"."""
    rng = random.Random(seed * 7919 + 1)  # independent of the splits' stream
    try:
        with open(MANPAGES_DEV_LIST, encoding="utf-8") as f:
            pages = sorted(l.strip() for l in f if re.search(r"/man[23]/[^/]*\.gz$", l.strip()))
    except OSError:
        sys.exit("prepare_eval: --distractors needs the manpages-dev package")
    seen_pars = set()
    texts = []
    for path in pages:
        pars = [p for p in man_paragraphs(path) if is_prose(p)]
        keys = [normalize(p) for p in pars]
        if not keys or sum(1 for k in keys if k in seen_pars) >= 0.2 * len(keys):
            continue
        seen_pars.update(keys)
        for text, _ in chunk_paragraphs(rng, pars, "manpages-dev"):
            texts.append(text)
        for p in pars:
            for sent in re.split(r"(?<=[.!?])\s+", p.replace("\n", " ")):
                m = len(normalize(sent))
                if 40 <= m <= SHORT_MAX:
                    texts.append(sent)
    # One family per normalized text and per near-repeat group.
    uniq = {}
    for t in texts:
        uniq.setdefault(normalize(t), t)
    texts = list(uniq.values())
    rng.shuffle(texts)
    texts = texts[:n]
    roots, _ = merge_families([normalize(t) for t in texts])
    path = os.path.join(out_dir, "distractors.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": "noise-%06d" % i, "text": t, "family": "noise-%d" % roots[i],
                                "bucket": "noise", "level": "orig", "edits": "", "source": "manpages-dev"},
                               ensure_ascii=False) + "\n")
    print("prepare_eval: %d distractors -> %s" % (len(texts), path), file=sys.stderr)


if __name__ == "__main__":
    main()
