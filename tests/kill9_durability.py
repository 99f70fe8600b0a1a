#!/usr/bin/env python3
"""kill -9 durability test for `neardup serve` (python3 standard library only).

Each cycle: start the server on 127.0.0.1 (a free port), let 8 client threads
send check-and-insert requests for variants of a fixed set of texts (every
variant of one text normalizes to the same text, so at most one per group may
ever be stored), kill -9 the server at a random moment, restart it, then check:
  * every document acknowledged as stored is there (GET 200);
  * every document named as a match in an acknowledged duplicate answer is there;
  * no group has two stored documents.
Bounded: --cycles cycles, each at most a few seconds of load.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request


def start(cli, data, init):
    # --init only for the first start: every restart must find the store (issue 15).
    p = subprocess.Popen([cli, "serve", "--data", data, "--listen", "127.0.0.1:0", "--threads", "16"]
                         + (["--init"] if init else []),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if "listening on" not in line:
        p.kill()
        raise SystemExit("server did not start: %r %s" % (line, p.stderr.read()))
    port = int(line.split("listening on ")[1].split(",")[0].rsplit(":", 1)[1])
    return p, port


def call(port, method, path, body=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    print("seed", args.seed)
    data = tempfile.mkdtemp(prefix="neardup_kill9_")
    def new_groups(n):
        return ["".join(chr(0x4E00 + rng.randrange(0x5000)) for _ in range(rng.randrange(30, 90)))
                for _ in range(n)]
    groups = []
    acked_stored, acked_named = set(), set()
    group_of = {}
    lock = threading.Lock()
    counter = [0]
    try:
        for cycle in range(args.cycles):
            # Fresh texts every cycle, so the kill lands while new documents are being stored.
            first = len(groups)
            groups.extend(new_groups(3000))
            server, port = start(args.cli, data, init=cycle == 0)
            if cycle == 0:  # namespaces are not auto-created by default
                status, ans = call(port, "PUT", "/v1/namespaces/k9", {})
                if status != 201:
                    raise SystemExit("PUT k9: %s %s" % (status, ans))
            stop = threading.Event()

            def client(tid):
                r = random.Random(args.seed * 100 + cycle * 10 + tid)
                while not stop.is_set():
                    g = r.randrange(first, len(groups))
                    with lock:
                        counter[0] += 1
                        doc_id = "c%d-%d" % (cycle, counter[0])
                        group_of[doc_id] = g
                    text = groups[g] + r.choice(["", "！", "。。", " ", "\n"])
                    try:
                        status, ans = call(port, "POST", "/v1/namespaces/k9/check", {"id": doc_id, "text": text},
                                           timeout=5)
                    except Exception:
                        return  # the server died mid-request: not acknowledged
                    if status != 200:
                        continue
                    with lock:
                        if ans.get("stored"):
                            acked_stored.add(doc_id)
                        for m in ans.get("matches", []):
                            acked_named.add(m["id"])

            threads = [threading.Thread(target=client, args=(t,)) for t in range(8)]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.3, 2.0))
            server.send_signal(signal.SIGKILL)
            server.wait()
            stop.set()
            for t in threads:
                t.join(timeout=30)

            server, port = start(args.cli, data, init=False)
            missing = [i for i in sorted(acked_stored | acked_named)
                       if call(port, "GET", "/v1/namespaces/k9/documents/" + urllib.request.quote(i))[0] != 200]
            stored_per_group = {}
            for doc_id, g in group_of.items():
                if call(port, "GET", "/v1/namespaces/k9/documents/" + urllib.request.quote(doc_id))[0] == 200:
                    stored_per_group.setdefault(g, []).append(doc_id)
            twice = {g: ids for g, ids in stored_per_group.items() if len(ids) > 1}
            server.send_signal(signal.SIGTERM)
            rc = server.wait(timeout=30)
            print("cycle %d: %d acknowledged stored, %d named, %d groups stored, missing %d, stored twice %d, "
                  "clean exit %s" % (cycle, len(acked_stored), len(acked_named), len(stored_per_group),
                                     len(missing), len(twice), rc == 0))
            if missing or twice or rc != 0:
                print("FAILED: missing=%s twice=%s rc=%s" % (missing[:10], list(twice.items())[:5], rc))
                return 1
        print("kill9_durability: %d cycles passed" % args.cycles)
        return 0
    finally:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
