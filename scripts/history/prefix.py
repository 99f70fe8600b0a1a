#!/usr/bin/python3
"""The history of the first N trials of a run (their ops and final reads, every fault), so that
runs stopped at different trial counts are checked on the same prefix of one stream.
  scripts/history/prefix.py HISTORY.jsonl OUT.jsonl N && scripts/history/check.py OUT.jsonl
"""
import json, re, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
tr = re.compile(r"-t(\d+)-\d+$")
with open(src) as f, open(dst, "w") as out:
    for line in f:
        r = json.loads(line)
        t = r.get("type")
        if t == "op" and r["trial"] >= n: continue
        if t == "read":
            m = tr.search(r["id"])
            if m and int(m.group(1)) >= n: continue
        out.write(line)
