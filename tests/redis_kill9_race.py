#!/usr/bin/env python3
"""Exactly one kept across real `neardup serve` processes, with kill -9.

Starts a local Redis Cluster (scripts/redis_cluster.sh) and two `neardup serve
--store redis-cluster://...` instances. Each trial sends a group of identical
texts (near-duplicates at distance 0) with distinct ids at the same moment,
alternating between the instances; in half of the trials one instance is
killed with SIGKILL a few milliseconds in (mid-protocol), then restarted.
Clients retry on the other instance after a connection error or a 503, as a
real client would. Checks: exactly one document of each group is stored
(by the answers and by GET /documents), and every other answer names it.
A trial counts as raced when two of its requests were in flight at once, a
kill as mid-protocol when requests were in flight at that moment: the test
fails unless enough of each happened (a loaded machine can serialize the
clients, and then nothing was tested).

Bounded in trials and time; everything it starts is stopped by pid.
"""
import argparse
import http.client
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def request(port, method, path, body=None, timeout=20):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None)
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"{}")
    finally:
        conn.close()


class Server:
    """One `neardup serve --store` process on a free port (--listen 127.0.0.1:0); port stays across restarts."""

    def __init__(self, cli, uri, log):
        self.cli, self.uri, self.log = cli, uri, log
        self.port = 0
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [self.cli, "serve", "--store", self.uri, "--auto-create-namespaces", "true", "--listen", f"127.0.0.1:{self.port}", "--threads", "16"],
            stdout=subprocess.PIPE, stderr=open(self.log, "ab"), text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 15)
        line = self.proc.stdout.readline() if ready else ""
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if not m:
            self.kill9()
            raise RuntimeError(f"serve did not start: {line!r} (see {self.log})")
        self.port = int(m.group(1))

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()


def check(ports, first, ns, doc_id, text, deadline):
    """POST /check, retrying on the other instance after a failure; the final answer or None."""
    attempt = 0
    while time.time() < deadline:
        port = ports[(first + attempt) % len(ports)]
        attempt += 1
        try:
            status, body = request(port, "POST", f"/v1/namespaces/{ns}/check", {"id": doc_id, "text": text})
            if status == 200:
                return body
            if status != 503:
                return {"error": status, "body": body}
        except (OSError, http.client.HTTPException, ValueError):
            pass  # killed mid-request or mid-answer (IncompleteRead, truncated JSON), or not up yet
        time.sleep(0.02 * min(attempt, 10))
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seconds", type=float, default=90)
    ap.add_argument("--base-port", type=int, default=0)
    ap.add_argument("--min-raced", type=int, default=10, help="trials with two requests in flight at once")
    ap.add_argument("--min-kills-in-flight", type=int, default=3, help="kills while requests were in flight")
    args = ap.parse_args()

    rng = random.Random(os.getpid())
    base = args.base_port or 16000 + (os.getpid() * 7919 % 500) * 6
    work = tempfile.mkdtemp(prefix="neardup-kill9race-")
    script = os.path.join(ROOT, "scripts", "redis_cluster.sh")
    servers = []
    started = False
    try:
        for attempt in range(4):  # another test may hold these ports: try other bases
            out = subprocess.run([script, "start", work + "/redis", str(base)], capture_output=True, text=True,
                                 timeout=120)
            started = True
            if out.returncode == 0:
                break
            subprocess.run([script, "stop", work + "/redis", str(base)], timeout=60)
            base = 16000 + (base - 16000 + 6 * 131) % 3000
        else:
            raise RuntimeError("could not start a redis cluster: " + out.stderr)
        uri = out.stdout.strip().splitlines()[-1]
        servers = [Server(args.cli, uri, f"{work}/serve-{i}.log") for i in range(2)]
        for s in servers:
            s.start()
        http_ports = [s.port for s in servers]
        texts_base = "the fenced protocol keeps exactly one of these near duplicate texts trial "
        end = time.time() + args.seconds
        failures, kills, trials, raced, kills_in_flight = [], 0, 0, 0, 0
        for trial in range(args.trials):
            if time.time() > end:
                break
            trials += 1
            ns = f"race{trial}"
            n = 2 + trial % 3
            text = texts_base + str(rng.random())
            answers = [None] * n
            spans = [None] * n  # (start, end) of each client's check, retries included
            barrier = threading.Barrier(n + 1)

            def send(i):
                barrier.wait()
                start = time.monotonic()
                answers[i] = check(http_ports, i, ns, f"d{i}", text, time.time() + 30)
                spans[i] = (start, time.monotonic())

            threads = [threading.Thread(target=send, args=(i,)) for i in range(n)]
            for t in threads:
                t.start()
            victim = None
            if trial % 2 == 1:
                victim = servers[rng.randrange(2)]
            barrier.wait()
            if victim:
                time.sleep(rng.uniform(0.0, 0.006))
                killed_at = time.monotonic()
                victim.kill9()
                kills += 1
            for t in threads:
                t.join(timeout=60)
            done = [s for s in spans if s]
            if any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(done) for b in done[i + 1:]):
                raced += 1
            if victim and any(s[0] <= killed_at < s[1] for s in done):
                kills_in_flight += 1
            if victim:
                victim.start()
            stored = [i for i, a in enumerate(answers) if a and a.get("stored")]
            problems = []
            if any(a is None or "error" in a for a in answers):
                problems.append(f"unanswered or error: {answers}")
            if len(stored) != 1:
                problems.append(f"{len(stored)} stored")
            else:
                kept = f"d{stored[0]}"
                for i, a in enumerate(answers):
                    if a and not a.get("stored") and not any(m["id"] == kept for m in a.get("matches", [])):
                        problems.append(f"d{i} does not name {kept}: {a}")
            found = sum(request(http_ports[0], "GET", f"/v1/namespaces/{ns}/documents/d{i}")[0] == 200
                        for i in range(n))
            if found != 1:
                problems.append(f"GET found {found} documents")
            if problems:
                failures.append((trial, problems))
        print(f"redis_kill9_race: {trials} trials ({raced} raced), {kills} with a kill -9 "
              f"({kills_in_flight} mid-flight), {len(failures)} failed")
        for f in failures:
            print("  trial", f[0], f[1])
        if raced < args.min_raced or kills_in_flight < args.min_kills_in_flight:
            print(f"  too few real races: need {args.min_raced} raced trials and "
                  f"{args.min_kills_in_flight} kills mid-flight")
            return 1
        return 1 if failures else 0
    finally:
        for s in servers:
            s.stop()
        if started:
            subprocess.run([script, "stop", work + "/redis", str(base)], timeout=60)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
