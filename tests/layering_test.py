#!/usr/bin/env python3
"""Every #include in src/ and include/neardup/ goes down the layer order.

The layers, lowest first (CMakeLists.txt links them in this order):
util, text, index, dedup, io, engine, store | redis | pg | http.
A layer may include its own headers and those of lower layers; store,
redis, pg and http are siblings above engine and may not include each other.
Exit 1 with one line per wrong-way include.
"""
import pathlib
import re
import sys

RANK = {"util": 0, "text": 1, "index": 1, "dedup": 2, "io": 1, "engine": 3,
        "store": 4, "redis": 4, "pg": 4, "http": 4}
# Pairs of the same rank that may still not see each other.
ALLOWED_SAME_RANK = set()


def layer_of(path):
    """The layer a header or source path belongs to, or None."""
    parts = pathlib.PurePosixPath(path).parts
    for i, p in enumerate(parts):
        if p in RANK and (i == 0 or parts[i - 1] in ("src", "neardup")):
            return p
    return None


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad = []
    files = list((root / "src").rglob("*.h")) + list((root / "src").rglob("*.cc")) + \
        list((root / "include" / "neardup").rglob("*.h"))
    for f in files:
        own = layer_of(f.relative_to(root).as_posix())
        if own is None:
            bad.append(f"{f}: not in a layer folder")
            continue
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            target = layer_of(m.group(1))
            if target is None or target == own:
                continue
            ok = RANK[target] < RANK[own] or (own, target) in ALLOWED_SAME_RANK
            if not ok:
                bad.append(f"{f}:{n}: layer {own} includes {m.group(1)} (layer {target})")
    for b in bad:
        print(b)
    print(f"layering: {len(files)} files, {len(bad)} wrong-way includes")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
