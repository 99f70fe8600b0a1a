#!/usr/bin/env python3
"""Disk-full episodes under load for `neardup-serve` (issue 15; python3 stdlib only).

Run by scripts/disk_full_test.sh inside a private mount namespace: mounts a
small tmpfs at a temporary directory and serves with --data on it. Each
episode:
  1. a filler file takes all but --headroom-mb of the free space;
  2. batch and single-document check-and-insert load (unique texts) runs until
     writes have been answered 507 for a while; meanwhile a GET of an
     acknowledged document and a query must answer 200;
  3. the load stops, the filler is deleted, and a probe sends a check every
     10 ms: the time until one is stored is the recovery time (must be < 1 s).
A connection reset or the server's death counts as an abort. At the end the
server is killed with SIGKILL, restarted on a disk filled to the last byte
(it must refuse with a message or start, never abort), then restarted with
space: every acknowledged document must be readable, and no document answered
with an error may be stored. Prints the figures; exit 1 on any failure.
"""
import argparse
import http.client
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def log(*a):
    print(*a, flush=True)


class Server:
    def __init__(self, binary, data):
        self.binary, self.data, self.proc, self.port = binary, data, None, None

    def start(self, expect_ok=True):
        self.proc = subprocess.Popen(self.binary + ["--data", self.data, "--init", "--auto-create-namespaces", "true",
                                                   "--listen", "127.0.0.1:0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            rc = self.proc.wait()
            err = self.proc.stderr.read()
            if expect_ok:
                raise SystemExit("server did not start (exit %s): %r %s" % (rc, line, err))
            return rc, err
        self.port = int(line.split("listening on ")[1].split(",")[0].rsplit(":", 1)[1])
        # Drain stderr so the server never blocks on a full pipe.
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()
        return None, ""

    @staticmethod
    def _drain(proc):
        proc.stderr_lines = []
        for line in proc.stderr:
            proc.stderr_lines.append(line)
            del proc.stderr_lines[:-50]

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


class Client:
    def __init__(self, port):
        self.port, self.conn = port, None

    def call(self, method, path, body=None):
        """(status, json) or (None, error text) on a connection failure."""
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                data = json.dumps(body).encode() if body is not None else None
                self.conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
                r = self.conn.getresponse()
                raw = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return r.status, (json.loads(raw) if raw else None)
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                # A stale kept-alive connection closed by the server: one retry
                # of a request that never reached it.
                if attempt == 0 and isinstance(e, (http.client.RemoteDisconnected, BrokenPipeError)):
                    continue
                return None, repr(e)


class Ledger:
    """Every id's fate, as the server answered it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked, self.failed, self.unknown = set(), set(), set()
        self.codes = {}

    def note(self, doc_id, answer, status):
        with self.lock:
            if status is None:
                key = "connection failed"
            elif answer is not None and "error" in answer:
                key = "%s:%s" % (status, answer["error"]["code"])
            else:
                key = str(status)
            self.codes[key] = self.codes.get(key, 0) + 1
            if status is None:
                self.unknown.add(doc_id)
            elif answer is not None and "error" in answer:
                self.failed.add(doc_id)
            elif status == 200 and answer.get("stored") and not answer.get("replay"):
                self.acked.add(doc_id)


def text(rng):
    return "".join(chr(0x4E00 + rng.randrange(0x5000)) for _ in range(rng.randrange(60, 120)))


def load_worker(port, ledger, stop, seen_full, tag, batch, rng, resets):
    c = Client(port)
    n = 0
    while not stop.is_set():
        if batch:
            docs = [{"id": "%s-%d" % (tag, n + i), "text": text(rng)} for i in range(50)]
            n += 50
            status, answer = c.call("POST", "/v1/namespaces/disk/batch?mode=check", {"documents": docs})
            if status is None:
                resets.append(answer)
                for d in docs:
                    ledger.note(d["id"], None, None)
                continue
            results = answer.get("results") if status == 200 else None
            for i, d in enumerate(docs):
                a = results[i] if results else answer
                ledger.note(d["id"], a, status)
                if a and "error" in a and a["error"]["code"] == "storage_full":
                    seen_full.set()
        else:
            doc_id = "%s-%d" % (tag, n)
            n += 1
            status, answer = c.call("POST", "/v1/namespaces/disk/check", {"id": doc_id, "text": text(rng)})
            if status is None:
                resets.append(answer)
            ledger.note(doc_id, answer if status is not None else None, status)
            if status == 507:
                seen_full.set()
        if seen_full.is_set():
            time.sleep(0.02)  # as a client honouring Retry-After would, a little sooner


def fill(path, headroom):
    st = os.statvfs(os.path.dirname(path))
    free = st.f_bavail * st.f_frsize
    size = max(0, free - headroom)
    chunk = b"\0" * (1 << 20)
    try:
        with open(path, "wb") as f:
            while size > 0:
                f.write(chunk[:min(size, len(chunk))])
                size -= len(chunk)
            f.flush()
    except OSError as e:  # the disk is already full (the server's own files)
        sizes = {n: os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(os.path.dirname(path)) for n in ns}
        # A compaction of the server (after the last recovery) took the rest.
        log("  filler stopped early: %s; largest files: %s" % (e, sorted(sizes.items(), key=lambda kv: -kv[1])[:4]))
    return free


def episode(server, ledger, rng, args, number, figures):
    filler = os.path.join(args.mount, "filler-%d" % number)
    free = fill(filler, args.headroom_mb << 20)
    stop, seen_full = threading.Event(), threading.Event()
    resets = []
    threads = [threading.Thread(target=load_worker,
                                args=(server.port, ledger, stop, seen_full, "e%d-t%d" % (number, t), t < 2,
                                      random.Random(rng.random()), resets))
               for t in range(4)]
    for t in threads:
        t.start()
    deadline = time.time() + args.fill_timeout
    while not seen_full.is_set() and time.time() < deadline and server.alive():
        time.sleep(0.05)
    full = seen_full.is_set()
    reads_ok = True
    if full:
        time.sleep(0.5)  # keep writing into the full disk for a while
        c = Client(server.port)
        with ledger.lock:
            some = next(iter(ledger.acked), None)
        if some is not None:
            reads_ok = c.call("GET", "/v1/namespaces/disk/documents/" + some)[0] == 200
        reads_ok = reads_ok and c.call("POST", "/v1/namespaces/disk/query", {"id": "q", "text": text(rng)})[0] == 200
    stop.set()
    for t in threads:
        t.join()
    os.remove(filler)
    freed = time.time()
    recovered = None
    last_error = None
    probe = Client(server.port) if server.alive() else None
    while probe is not None and time.time() - freed < 10:
        doc_id = "e%d-probe-%d" % (number, int((time.time() - freed) * 1000))
        status, answer = probe.call("POST", "/v1/namespaces/disk/check", {"id": doc_id, "text": text(rng)})
        ledger.note(doc_id, answer if status is not None else None, status)
        if status == 200:
            recovered = time.time() - freed
            break
        last_error = answer
        time.sleep(0.01)
    alive = server.alive()
    figures["episodes"] += 1
    if not alive:
        figures["aborts"] += 1
        log("episode %d: server died, exit %s; stderr tail: %s" %
            (number, server.proc.returncode, "".join(getattr(server.proc, "stderr_lines", []))[-2000:]))
    if resets:
        figures["resets"] += len(resets)
    if recovered is not None:
        figures["recover_s"].append(recovered)
    log("episode %d: %.1f MB free before the filler, disk full seen: %s, reads while full: %s, "
        "recovered after %s, connection failures %d, server alive %s" %
        (number, free / 2**20, full, "ok" if reads_ok else "FAILED",
         "%.0f ms" % (recovered * 1000) if recovered is not None else "NEVER", len(resets), alive))
    if recovered is None:
        log("  last answer: %s" % (last_error,))
    ok = full and reads_ok and recovered is not None and recovered < 1.0 and alive and not resets
    if not alive:
        server.start()
    return ok


def verify(server, ledger):
    c = Client(server.port)
    lost = [i for i in sorted(ledger.acked) if c.call("GET", "/v1/namespaces/disk/documents/" + i)[0] != 200]
    present_failed = [i for i in sorted(ledger.failed) if c.call("GET", "/v1/namespaces/disk/documents/" + i)[0] == 200]
    return lost, present_failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True, help="the neardup-serve binary")
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--tmpfs-mb", type=int, default=64)
    ap.add_argument("--headroom-mb", type=int, default=3)
    ap.add_argument("--fill-timeout", type=float, default=20)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    args.mount = tempfile.mkdtemp(prefix="neardup_diskfull_")
    if subprocess.call(["mount", "-t", "tmpfs", "-o", "size=%dm" % args.tmpfs_mb, "tmpfs", args.mount]) != 0:
        log("SKIP: cannot mount a tmpfs here")
        return 0
    try:
        return run(args, rng)
    finally:
        subprocess.call(["umount", "-l", args.mount])
        os.rmdir(args.mount)


def run(args, rng):
    log("seed %d, tmpfs %d MB at %s, %d episodes" % (args.seed, args.tmpfs_mb, args.mount, args.episodes))
    data = os.path.join(args.mount, "data")
    server = Server([args.serve], data)
    server.start()
    ledger = Ledger()
    figures = {"episodes": 0, "aborts": 0, "resets": 0, "recover_s": []}
    failures = 0
    for number in range(args.episodes):
        if not episode(server, ledger, rng, args, number, figures):
            failures += 1
    # SIGKILL, then a start on a disk without one free byte: refused with a
    # message (or started), never an abort.
    server.kill9()
    filler = os.path.join(args.mount, "filler-final")
    fill(filler, 0)
    rc, err = server.start(expect_ok=False)
    if rc is None:
        start_full = "started"
        server.kill9()
    else:
        start_full = "refused (exit %d): %s" % (rc, err.strip().splitlines()[-1] if err.strip() else "")
        if rc < 0 or "disk is full" not in err:
            failures += 1
            start_full += "  <-- expected exit 1 and a 'disk is full' message"
    os.remove(filler)
    server.start()
    lost, present_failed = verify(server, ledger)
    server.kill9()
    rec = sorted(figures["recover_s"])
    log("start-up on a full disk: %s" % start_full)
    log("answers: %s" % json.dumps(ledger.codes, sort_keys=True))
    log("episodes %d, aborts %d, connection failures %d, acknowledged %d, acknowledged lost %d, "
        "failed but stored %d, recovery median %s ms max %s ms" %
        (figures["episodes"], figures["aborts"], figures["resets"], len(ledger.acked), len(lost),
         len(present_failed), "%.0f" % (statistics.median(rec) * 1000) if rec else "-",
         "%.0f" % (rec[-1] * 1000) if rec else "-"))
    if lost:
        log("lost (first 10):", lost[:10])
    if present_failed:
        log("failed but stored (first 10):", present_failed[:10])
    bad = failures or lost or present_failed or figures["aborts"] or figures["resets"]
    log("FAIL" if bad else "PASS")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
