#!/usr/bin/python3
"""Builds natural near-duplicate corpora (issue 14) from Debian packages.

Nothing is synthesized: every document is a string that Debian ships. Near-
duplicates occur naturally (the same interface string in several message
catalogs, sibling package descriptions such as lib/-dev/-doc, the GNU
boilerplate paragraphs of man pages of one suite); hard negatives too
(distinct strings that share a template: "插入、删除和旋转页面(_I)" vs
"仅允许插入、删除或旋转页面。", "Python 3 bindings for X" vs "... for Y",
man pages of basename/true/echo sharing their AUTHOR/COPYRIGHT/SEE ALSO).

Sources (all read from this machine; packages listed in PACKAGES are
installed by apt-get when missing, unless --no-install):
  mo       /usr/share/locale/zh_CN/LC_MESSAGES/*.mo of the installed packages:
           msgstr -> zh buckets, msgid -> en buckets (Python's gettext parser,
           the same strings as `msgunfmt`)
  desc     Debian's package descriptions, apt lists Translation-zh_CN and
           Translation-en (apt-get update -o Acquire::Languages=zh_CN,en):
           the synopsis -> short bucket, synopsis + long description -> long
  man      man pages: /usr/share/man/zh_CN/man*/ (manpages-zh) -> zh buckets,
           /usr/share/man/man{1,5,8}/ -> en buckets; roff macros stripped,
           one document per section, sections over LONG_MAX characters cut at
           paragraph boundaries into chunks of at most LONG_MAX

A document's length is the length in code points of its normalized text
(scripts/ground_truth.py: NFKC(casefold(NFKC(s))), white-space runs -> one
space, stripped). zh: the text has a Han character; en: no Han character and
at least one ASCII letter. short: 2..200 code points; long: 201..LONG_MAX.

Grouping key (source package of the file or of the described binary package;
for zh man pages the package owning the English page of the same name) decides
the split: sha1("split:" + group) -> dev or test, so a package's strings, its
sibling packages' descriptions and a tool suite's man pages stay on one side.
Groups larger than GROUP_CAP documents per source are cut to a seeded
contiguous window (in catalog / file order, so neighbouring, templated strings
stay together). Then, per bucket and split, whole groups are taken in a seeded
order until the target count is reached; the stream is a seeded shuffle.

Output: data/natural/{dev,test}/{zh-short,zh-long,en-short,en-long}.jsonl,
  {"id": "zs-dev-000001", "text": ..., "source": "mo:coreutils", "group": ...}
"""
import argparse
import gettext
import glob
import gzip
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import unicodedata

# packages whose zh_CN message catalogs are read (mo source)
MO_PACKAGES = [
    "adduser", "appstream", "apt", "at-spi2-common", "bash", "binutils-common",
    "coreutils", "diffutils", "dpkg", "findutils", "gettext", "gettext-base",
    "git", "gnupg-l10n", "grep", "gsettings-desktop-schemas", "iso-codes",
    "libapt-pkg6.0", "libavahi-common-data", "libc-l10n",
    "libgdk-pixbuf2.0-common", "libglib2.0-data", "libgnutls30",
    "libgstreamer1.0-0", "libgtk2.0-common", "libidn2-0", "libpam-runtime",
    "libpq5", "login", "make", "man-db", "packagekit", "polkitd",
    "postgresql-15", "postgresql-client-15", "procps", "psmisc",
    "python-apt-common", "sed", "shared-mime-info",
    "software-properties-common", "systemd", "tar", "wget", "xdg-user-dirs",
    "xkb-data", "xz-utils",
]
# packages whose English man pages (sections 1, 5, 8) are read (man source)
MAN_PACKAGES = [
    "apt", "binutils-common", "coreutils", "debconf", "debianutils", "diffutils",
    "dpkg", "dpkg-dev", "e2fsprogs", "findutils", "gettext", "git-man",
    "gnupg-utils", "grep", "gzip", "iproute2", "libpam-modules", "login",
    "man-db", "manpages", "ncurses-bin", "net-tools", "openssh-client",
    "openssl", "passwd", "procps", "sed", "systemd", "tar", "util-linux",
]
PACKAGES = sorted(set(MO_PACKAGES + MAN_PACKAGES + ["manpages-zh", "python3-numpy"]))
SEED = 14
LONG_MAX = 1500
CHUNK_MAX = 700  # paragraphs of a man page section are merged up to this length
GROUP_CAP = 250
BUCKETS = ["zh-short", "zh-long", "en-short", "en-long"]
ABBR = {"zh-short": "zs", "zh-long": "zl", "en-short": "es", "en-long": "el"}
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
WS = re.compile(r"\s+")
APT_LISTS = "/var/lib/apt/lists"


def normalize(s):
    s = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", s).casefold())
    return WS.sub(" ", s).strip()


def bucket_of(text):
    n = len(normalize(text))
    if n < 2 or n > LONG_MAX:
        return None
    size = "short" if n <= 200 else "long"
    if HAN.search(text):
        return "zh-" + size
    if re.search(r"[A-Za-z]", text):
        return "en-" + size
    return None


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def install(packages):
    missing = []
    for p in packages:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True)
        if "install ok installed" not in r.stdout:
            missing.append(p)
    if missing:
        print("installing", " ".join(missing), file=sys.stderr)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "install", "-y"] + missing, check=True, env=env)
    if not glob.glob(APT_LISTS + "/*Translation-zh*"):
        subprocess.run(["apt-get", "update", "-o", "Acquire::Languages=zh_CN,en"], check=True)


# ---------------------------------------------------------------- dpkg maps
def dpkg_maps():
    """file -> binary package, binary package -> (source, version)."""
    owner = {}
    for lst in sorted(glob.glob("/var/lib/dpkg/info/*.list")):
        pkg = os.path.basename(lst)[:-5].split(":")[0]
        with open(lst, encoding="utf-8", errors="replace") as f:
            for line in f:
                owner[line.rstrip("\n")] = pkg
    src = {}
    with open("/var/lib/dpkg/status", encoding="utf-8", errors="replace") as f:
        for para in f.read().split("\n\n"):
            fields = dict(re.findall(r"^([A-Za-z-]+): ?(.*)$", para, re.M))
            if "Package" in fields:
                s = fields.get("Source", fields["Package"]).split(" ")[0]
                src[fields["Package"]] = (s, fields.get("Version", ""))
    return owner, src


def apt_cat(path):
    return run(["/usr/lib/apt/apt-helper", "cat-file", path])


def apt_source_map():
    """binary package -> source package, from the apt Packages lists."""
    m = {}
    for p in sorted(glob.glob(APT_LISTS + "/*_main_binary-*_Packages*")):
        for para in apt_cat(p).split("\n\n"):
            pk = re.search(r"^Package: (\S+)", para, re.M)
            if not pk:
                continue
            s = re.search(r"^Source: (\S+)", para, re.M)
            m.setdefault(pk.group(1), s.group(1) if s else pk.group(1))
    return m


# ---------------------------------------------------------------- sources
def mo_docs(owner, src):
    out = []  # (group, source, order, text)
    for path in sorted(glob.glob("/usr/share/locale/zh_CN/LC_MESSAGES/*.mo")):
        domain = os.path.basename(path)[:-3]
        pkg = owner.get(path, domain)
        if pkg not in MO_PACKAGES:
            continue
        group = src.get(pkg, (pkg, ""))[0]
        with open(path, "rb") as f:
            try:
                cat = gettext.GNUTranslations(f)._catalog
            except Exception:
                continue
        items = []
        for k, v in cat.items():
            if isinstance(k, tuple):
                if k[1] != 0:
                    continue
                k = k[0]
            if k == "":
                continue
            k = k.split("\x04", 1)[-1]
            items.append((k, v))
        items.sort()
        for i, (k, v) in enumerate(items):
            out.append(("src:" + group, "mo:" + domain, i, v.strip("\n")))
            if v != k:
                out.append(("src:" + group, "mo:" + domain, i, k.strip("\n")))
    return out


def parse_translation(path, field):
    descs = []
    for para in apt_cat(path).split("\n\n"):
        m = re.search(r"^Package: (\S+)", para, re.M)
        d = re.search(r"^" + field + r": (.*)\n?((?:^ .*\n?)*)", para, re.M)
        if not m or not d:
            continue
        body = []
        for line in d.group(2).split("\n"):
            if not line.startswith(" "):
                continue
            line = line[1:]
            body.append("" if line == "." else line)
        descs.append((m.group(1), d.group(1).strip(), "\n".join(body).strip()))
    return descs


def desc_docs(srcmap):
    out = []
    for lang, field in (("zh_CN", "Description-zh_CN"), ("en", "Description-en")):
        for p in sorted(glob.glob(APT_LISTS + "/*_bookworm_main_i18n_Translation-" + lang.replace("_", "%5f") + "*")):
            for i, (pkg, syn, body) in enumerate(parse_translation(p, field)):
                g = "src:" + srcmap.get(pkg, pkg)
                out.append((g, "desc-%s:%s" % (lang, pkg), i, syn))
                if body:
                    out.append((g, "desc-%s:%s" % (lang, pkg), i, syn + "\n" + body))
    return out


ESC = [
    (re.compile(r"\\f(\[[^\]]*\]|\(..|.)"), ""), (re.compile(r"\\\*(\[[^\]]*\]|\(..|.)"), ""),
    (re.compile(r"\\\(em|\\\(en"), "—"), (re.compile(r"\\\(co"), "©"),
    (re.compile(r"\\\((aq|cq)"), "'"), (re.compile(r"\\\((lq|rq|dq)"), '"'),
    (re.compile(r"\\\(bu"), "•"), (re.compile(r"\\\(..|\\\[[^\]]*\]"), ""),
    (re.compile(r"\\s[-+]?\d"), ""), (re.compile(r"\\[-]"), "-"), (re.compile(r"\\[&c:%]"), ""),
    (re.compile(r"\\[ ~0|^]"), " "), (re.compile(r"\\e"), "\\"), (re.compile(r"\\\\"), "\\"),
]


def unroff(s):
    for r, t in ESC:
        s = r.sub(lambda m, t=t: t, s)
    return s


def man_sections(text):
    """[(section name, [paragraphs])] of a roff page, macros stripped."""
    secs, name, paras, cur = [], None, [], []

    def flush_para():
        if cur:
            p = " ".join(x for x in cur if x).strip()
            if p:
                paras.append(p)
            cur.clear()

    for line in text.split("\n"):
        if line.startswith(('.\\"', "'\\\"", '.\\\\"')) or line.strip() in (".", ""):
            if line.strip() == "":
                flush_para()
            continue
        if line.startswith((".", "'")):
            parts = line[1:].split(None, 1)
            mac = parts[0] if parts else ""
            arg = parts[1] if len(parts) > 1 else ""
            if mac in ("SH", "SS") and mac == "SH":
                flush_para()
                if name is not None and paras:
                    secs.append((name, paras))
                name, paras = unroff(arg).strip('" '), []
            elif mac in ("PP", "LP", "P", "TP", "IP", "br", "sp", "SS", "HP", "RS", "RE", "nf", "fi"):
                flush_para()
                if mac in ("IP", "SS") and arg:
                    cur.append(unroff(re.sub(r'"', "", arg.split('" ')[0] if arg.startswith('"') else arg.split(" ")[0])))
            elif mac in ("B", "I", "SM", "SB"):
                cur.append(unroff(arg.replace('"', "")))
            elif mac in ("BR", "RB", "BI", "IB", "IR", "RI"):
                toks = re.findall(r'"[^"]*"|\S+', arg)
                cur.append(unroff("".join(t.strip('"') for t in toks)))
            continue
        cur.append(unroff(line).strip())
    flush_para()
    if name is not None and paras:
        secs.append((name, paras))
    return secs


def chunks(paras):
    out, cur = [], ""
    for p in paras:
        if len(p) > LONG_MAX:
            continue
        if cur and len(cur) + 1 + len(p) > CHUNK_MAX:
            out.append(cur)
            cur = ""
        cur = p if not cur else cur + "\n" + p
    if cur:
        out.append(cur)
    return out


def read_man(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("gb18030", errors="replace") if "/zh_CN/" in path else data.decode("latin-1")


def man_docs(owner, src):
    out = []
    paths = sorted(glob.glob("/usr/share/man/zh_CN/man*/*")) + \
        sorted(p for s in ("1", "5", "8") for p in glob.glob("/usr/share/man/man%s/*" % s))
    for path in paths:
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        base = os.path.basename(path)
        sec_dir = os.path.basename(os.path.dirname(path))
        if "/zh_CN/" in path:
            en = "/usr/share/man/%s/%s" % (sec_dir, base)
            pkg = owner.get(en) or owner.get(en[:-3] if en.endswith(".gz") else en + ".gz")
            group = "src:" + src[pkg][0] if pkg in src else "manzh:" + base
            tag = "man-zh:"
        else:
            pkg = owner.get(path, base)
            if pkg not in MAN_PACKAGES:
                continue
            group = "src:" + src.get(pkg, (pkg, ""))[0]
            tag = "man:"
        try:
            text = read_man(path)
        except Exception:
            continue
        if text.startswith(".so "):
            continue
        i = 0
        for name, paras in man_sections(text):
            for c in chunks(paras):
                out.append((group, "%s%s:%s" % (tag, base.replace(".gz", ""), name), i, name + "\n" + c))
                i += 1
    return out


# ---------------------------------------------------------------- assembly
def stable_hash(s):
    return int.from_bytes(hashlib.sha1(s.encode("utf-8")).digest()[:8], "big")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="data/natural")
    ap.add_argument("--no-install", action="store_true", help="do not apt-get install missing packages")
    ap.add_argument("--target-short", type=int, default=4000, help="documents per short bucket per split")
    ap.add_argument("--target-long", type=int, default=3000, help="documents per long bucket per split")
    ap.add_argument("--en-man-share", type=float, default=0.5,
                    help="at most this share of en-long from English man pages")
    args = ap.parse_args()
    if not args.no_install:
        install(PACKAGES)
    owner, src = dpkg_maps()
    srcmap = apt_source_map()
    raw = mo_docs(owner, src) + desc_docs(srcmap) + man_docs(owner, src)
    print("raw strings:", len(raw), file=sys.stderr)
    # bucket, group cap per (group, source kind)
    per = {}
    for g, source, order, text in raw:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        b = bucket_of(text)
        if b is None:
            continue
        kind = source.split(":", 1)[0]
        per.setdefault((b, g, kind), []).append((order, source, text))
    rng = random.Random(SEED)
    groups = {}  # (bucket, split) -> {group: [docs]}
    for key in sorted(per):
        b, g, kind = key
        docs = sorted(per[key])
        if len(docs) > GROUP_CAP:
            start = rng.randrange(len(docs) - GROUP_CAP + 1)
            docs = docs[start:start + GROUP_CAP]
        split = "dev" if stable_hash("split:" + g) % 2 == 0 else "test"
        groups.setdefault((b, split), {}).setdefault(g, []).extend(
            {"text": t, "source": s, "group": g} for _, s, t in docs)
    os.makedirs(args.out, exist_ok=True)
    counts = {}
    for b in BUCKETS:
        target = args.target_short if b.endswith("short") else args.target_long
        for split in ("dev", "test"):
            gs = groups.get((b, split), {})
            names = sorted(gs)
            random.Random("%d:%s:%s" % (SEED, b, split)).shuffle(names)
            chosen = []
            # en-long: English man pages first, whole groups, up to their share
            # (else the 60,000 package descriptions crowd them out), then the rest
            man_quota = int(args.en_man_share * target) if b == "en-long" else 0
            is_man = lambda d: d["source"].startswith("man:")
            taken = set()
            for g in names:
                if len(chosen) >= man_quota:
                    break
                man = [d for d in gs[g] if is_man(d)]
                if man:
                    chosen.extend(gs[g][: target - len(chosen)])
                    taken.add(g)
            for g in names:
                if len(chosen) >= target:
                    break
                if g not in taken:
                    chosen.extend([d for d in gs[g] if not is_man(d)][: target - len(chosen)])
            random.Random("%d:shuffle:%s:%s" % (SEED, b, split)).shuffle(chosen)
            d = os.path.join(args.out, split)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, b + ".jsonl"), "w", encoding="utf-8") as f:
                for i, doc in enumerate(chosen, 1):
                    rec = {"id": "%s-%s-%06d" % (ABBR[b], split, i), "text": doc["text"],
                           "source": doc["source"], "group": doc["group"]}
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            counts[(b, split)] = (len(chosen), len({c["group"] for c in chosen}))
            print("%s/%s: %d documents, %d groups" % (split, b, *counts[(b, split)]), file=sys.stderr)
    # package versions of the sources, for the README
    used = sorted({g[4:] for (b, s), gs in groups.items() for g in gs if g.startswith("src:")})
    with open(os.path.join(args.out, "packages.txt"), "w", encoding="utf-8") as f:
        vers = {}
        for p, (s, v) in src.items():
            vers.setdefault(s, set()).add(v)
        for p in PACKAGES:
            if p in src:
                f.write("%s %s\n" % (p, src[p][1]))
        f.write("# apt lists: %s\n" % " ".join(sorted(os.path.basename(p) for p in glob.glob(APT_LISTS + "/*Translation-*"))))


if __name__ == "__main__":
    main()
