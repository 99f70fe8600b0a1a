#!/usr/bin/env python3
"""Service recovery after a Redis master is killed with SIGKILL (issue 16.3).

Starts a local Redis Cluster (scripts/redis_cluster.sh, 3 masters + 3
replicas) and two `neardup serve --store redis-cluster://...` instances, and
keeps them busy with /check requests of fresh texts from --threads client
threads. Then, --kills times: kill -9 a master (by its pid file), restart it
as soon as its replica is promoted (it rejoins as that replica's replica, so
the new master accepts writes again: min-replicas-to-write 1), and record

  promoted   the replica says role:master                 (after the kill)
  writable   the new master accepts a write (SET + WAIT 1) (after the kill):
             the cluster's own recovery for a client that needs replicated writes
  first_ok   the first 200 answer received after `writable`, measured from it
  gap        the longest time without any 200 answer around the kill

Every answer is also checked: a 200 must be a well-formed check answer;
anything else must be a 503 with Retry-After (never another error).
Everything it starts is stopped by pid. Bounded by --kills and --seconds.

  scripts/cluster_failover.py --cli build/neardup --kills 20 --base-port 9100
"""
import argparse
import http.client
import json
import os
import random
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "redis_cluster.sh")


def cli(port, *args, timeout=2):
    try:
        out = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args], capture_output=True,
                             text=True, timeout=timeout)
        return out.stdout.strip()
    except subprocess.TimeoutExpired:
        return ""


class Server:
    def __init__(self, exe, uri, log):
        self.exe, self.uri, self.log, self.port, self.proc = exe, uri, log, 0, None

    def start(self):
        self.proc = subprocess.Popen([self.exe, "serve", "--store", self.uri, "--listen", "127.0.0.1:0",
                                      "--threads", "16"], stdout=subprocess.PIPE, stderr=open(self.log, "ab"),
                                     text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 15)
        line = self.proc.stdout.readline() if ready else ""
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if not m:
            self.stop()
            raise RuntimeError(f"serve did not start: {line!r}")
        self.port = int(m.group(1))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class Load:
    """Client threads sending /check of fresh texts; every answer recorded as (sent, received, status)."""

    def __init__(self, ports, threads):
        self.ports, self.stop, self.mu, self.log, self.bad = ports, False, threading.Lock(), [], []
        self.stored, self.named = [], []  # ids answered stored; ids named as matches
        self.history = []  # every check: id, text, port, times, status, answer (scripts/history/check.py)
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(threads)]

    def run(self, i):
        rng = random.Random(i)
        recent = []
        conns = {}
        n = 0
        while not self.stop:
            port = self.ports[(i + n) % len(self.ports)]
            n += 1
            if recent and rng.random() < 0.2:  # a repost of a recent text under a new id: a duplicate
                text = rng.choice(recent[-20:])
            else:
                # Random CJK characters: distinct texts share almost no 3-gram, so the offline
                # checker's exact join stays fast.
                words = "".join(chr(0x4E00 + rng.randrange(20000)) for _ in range(40))
                text = f"load text {i} {n} {words}"
                recent.append(text)
            body = json.dumps({"id": f"t{i}-{n}", "text": text})
            t0 = time.monotonic()
            status, ok, ans = 0, True, {}
            try:
                c = conns.get(port) or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                conns[port] = c
                c.request("POST", "/v1/namespaces/failover/check", body=body)
                r = c.getresponse()
                data = r.read()
                status = r.status
                if status == 200:
                    ans = json.loads(data)
                    ok = "duplicate" in ans and "stored" in ans
                    with self.mu:
                        if ans.get("stored"):
                            self.stored.append(ans["id"])
                        if ans.get("duplicate") and ans.get("matches"):
                            self.named.append(ans["matches"][0]["id"])
                elif status == 503:
                    ok = r.getheader("Retry-After") is not None
                else:
                    ok = False
            except (OSError, http.client.HTTPException, ValueError) as e:
                conns.pop(port, None)
                status = -1
                ans = {"error": type(e).__name__ + ": " + str(e)[:100]}
                if isinstance(e, ValueError):  # a 200 whose body is not JSON: a wrong answer
                    ok = False
            t1 = time.monotonic()
            with self.mu:
                self.log.append((t0, t1, status))
                # scripts/history/check.py's format (docs/history.md): no answer is status null.
                self.history.append({"type": "op", "id": f"t{i}-{n}", "text": text, "instance": port, "t0": t0,
                                     "t1": t1, "status": None if status == -1 else status,
                                     "answer": ans if status == 200 else None,
                                     **({"error": ans["error"]} if "error" in ans else {})})
                if not ok:
                    self.bad.append((t0, status))
            if status != 200:
                time.sleep(0.01)


def masters(base):
    """port -> (node id, replica port) for the live masters."""
    out = {}
    nodes = cli(base + 0, "cluster", "nodes") or cli(base + 1, "cluster", "nodes")
    lines = [ln.split() for ln in nodes.splitlines() if ln.strip()]
    ids = {f[0]: int(f[1].split("@")[0].split(":")[1]) for f in lines}
    for f in lines:
        if "master" in f[2] and "fail" not in f[2]:
            out[ids[f[0]]] = None
    for f in lines:
        if "slave" in f[2] and f[3] in ids and ids[f[3]] in out:
            out[ids[f[3]]] = ids[f[0]]
    return out


def slot_key(port):
    """A key whose slot the node on `port` serves (asks the node itself)."""
    for i in range(20000):
        k = f"probe:{i}"
        r = cli(port, "cluster", "countkeysinslot", cli(port, "cluster", "keyslot", k))
        if r.isdigit():
            moved = cli(port, "set", k, "x")
            if moved == "OK":
                return k
            if "NOREPLICAS" in moved or "CLUSTERDOWN" in moved:
                return k  # served here, just not writable yet
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--base-port", type=int, default=9100)
    ap.add_argument("--seconds", type=float, default=900, help="bound on the whole run")
    ap.add_argument("--history", help="write every request, answer and final read here (JSONL)")
    ap.add_argument("--store-options", default="", help="appended to the store uri, e.g. ?retry_budget_ms=15000")
    args = ap.parse_args()
    base = args.base_port
    work = tempfile.mkdtemp(prefix="neardup-failover-")
    servers, load = [], None
    started_at = time.monotonic()
    results = []
    try:
        out = subprocess.run([SCRIPT, "start", work + "/redis", str(base)], capture_output=True, text=True,
                             timeout=120)
        if out.returncode != 0:
            sys.exit("cluster did not start: " + out.stderr)
        uri = out.stdout.strip() + args.store_options
        servers = [Server(args.cli, uri, f"{work}/serve{i}.log") for i in range(2)]
        for s in servers:
            s.start()
        # Namespaces are not auto-created (the default since issue 15): without
        # this every check is a 404 and nothing is measured.
        c = http.client.HTTPConnection("127.0.0.1", servers[0].port, timeout=30)
        c.request("PUT", "/v1/namespaces/failover", body="{}", headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        if r.status not in (200, 201):
            sys.exit(f"cannot create the namespace: HTTP {r.status}")
        load = Load([s.port for s in servers], args.threads)
        for t in load.threads:
            t.start()
        time.sleep(2)
        for k in range(args.kills):
            if time.monotonic() - started_at > args.seconds:
                break
            ms = masters(base)
            victim = random.Random(k).choice(sorted(p for p, r in ms.items() if r))
            replica = ms[victim]
            pid = int(open(f"{work}/redis/{victim}/redis.pid").read())
            t_kill = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            t_promoted = t_writable = None
            key = None
            deadline = t_kill + 60
            while time.monotonic() < deadline:
                now = time.monotonic()
                if t_promoted is None and "role:master" in cli(replica, "info", "replication"):
                    t_promoted = now
                    subprocess.run([SCRIPT, "start-node", work + "/redis", str(base), str(victim)],
                                   capture_output=True, timeout=30)
                    key = slot_key(replica)
                if t_promoted is not None and key is not None:
                    r = cli(replica, "eval", "redis.call('set', KEYS[1], 'x') return 1", "1", key)
                    if r == "1" and cli(replica, "wait", "1", "200") == "1":
                        t_writable = time.monotonic()
                        break
                time.sleep(0.02)
            if t_writable is None:
                results.append(None)
                continue
            # The first 200 received after the cluster recovered (wait up to 20 s for it).
            first_ok = None
            end = time.monotonic() + 20
            while first_ok is None and time.monotonic() < end:
                with load.mu:
                    later = [t1 for (t0, t1, st) in load.log if st == 200 and t1 >= t_writable]
                if later:
                    first_ok = min(later)
                time.sleep(0.05)
            with load.mu:
                oks = sorted(t1 for (t0, t1, st) in load.log if st == 200 and t_kill - 5 <= t1 <= t_writable + 10)
                # Every request in flight at some point between the kill and 5 s after the recovery.
                lat = [t1 - t0 for (t0, t1, st) in load.log if t1 >= t_kill and t0 <= t_writable + 5]
            gaps = [b - a for a, b in zip(oks, oks[1:])]
            res = dict(kill=k, victim=victim, promoted=t_promoted - t_kill, writable=t_writable - t_kill,
                       first_ok=(first_ok - t_writable) if first_ok else None, gap=max(gaps) if gaps else None,
                       max_latency=max(lat) if lat else None)
            results.append(res)
            print(json.dumps({k2: (round(v, 3) if isinstance(v, float) else v) for k2, v in res.items()}), flush=True)
            # Wait for the restarted node to be a synced replica before the next kill.
            time.sleep(3)
        load.stop = True
        for t in load.threads:
            t.join(timeout=40)
        # Read back every document ever sent (the checker needs what is stored, acknowledged or
        # not) and every document an answer named.
        ids = {h["id"] for h in load.history} | set(load.named)
        reads = {}
        for doc_id in sorted(ids):
            c = http.client.HTTPConnection("127.0.0.1", servers[0].port, timeout=30)
            c.request("GET", f"/v1/namespaces/failover/documents/{doc_id}")
            r = c.getresponse()
            r.read()
            c.close()
            reads[doc_id] = r.status
        unreadable = {"stored": sum(reads[i] != 200 for i in set(load.stored)),
                      "named": sum(reads[i] != 200 for i in set(load.named))}
        print(f"acknowledged documents: {len(set(load.stored))}, named matches: {len(set(load.named))}, "
              f"unreadable afterwards: {unreadable}", flush=True)
        load.bad += [("unreadable", unreadable)] if any(unreadable.values()) else []
        if args.history:
            with open(args.history, "w") as f:
                f.write(json.dumps({"type": "header", "namespace": "failover", "threshold": 0.7,
                                    "shingle_size": 3}) + "\n")
                for h in load.history:
                    f.write(json.dumps(h, ensure_ascii=False) + "\n")
                for doc_id, st in reads.items():
                    f.write(json.dumps({"type": "read", "id": doc_id, "status": st}) + "\n")
    finally:
        if load:
            load.stop = True
        for s in servers:
            s.stop()
        subprocess.run([SCRIPT, "stop", work + "/redis", str(base)], capture_output=True, timeout=60)
    done = [r for r in results if r and r["first_ok"] is not None]
    statuses = {}
    for (_, _, st) in load.log:
        statuses[st] = statuses.get(st, 0) + 1
    print(f"kills: {len(results)}, recovered: {len(done)}, answers: {statuses}, "
          f"non-200 answers that were not 503+Retry-After: {len(load.bad)}")
    if done:
        f = [r["first_ok"] for r in done]
        print(f"first 200 after the cluster's recovery: median {statistics.median(f):.3f} s, max {max(f):.3f} s; "
              f"failover (kill -> promoted): median {statistics.median(r['promoted'] for r in done):.2f} s; "
              f"kill -> writable: median {statistics.median(r['writable'] for r in done):.2f} s; "
              f"longest gap without a 200: max {max(r['gap'] for r in done):.2f} s; "
              f"max latency: {max(r['max_latency'] for r in done):.2f} s")
    ok = len(done) == len(results) and all(r["first_ok"] <= 1.0 for r in done) and not load.bad
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
