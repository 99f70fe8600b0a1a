#!/usr/bin/python3
"""Records a history of check requests against one or more neardup services (issue 16).

Trials: each trial takes a fresh base text and G variants of it (G in [--min-group, --max-group];
small character or word edits, so most variants are near-duplicates of each other). In
--mode concurrent every variant is released at the same instant (a barrier) to the instances in
turn, as /check or as one-document /batch?mode=check (--batch-fraction); in --mode sequential
they are sent one after another. A request without an answer (timeout, reset, refused) or with a
503 is retried with the same id (--retries), each attempt recorded. After the trials, every id is
read back (GET, retried until 200 or 404 or --read-seconds) as the "final reads" that
scripts/history/check.py needs. Faults are injected by the caller (scripts/history/run_faults.sh);
its fault log (--faults, JSON lines with "t" and "what") is merged into the history.

Every loop is bounded: --trials and --max-seconds.
Usage: record.py --url http://127.0.0.1:8080 [--url ...] --out H.jsonl [--trials 100] ...
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse

ZH_CHARS = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可也你"
EN_WORDS = ["data", "system", "value", "server", "option", "file", "update", "network", "user", "time"]


def load_bases(paths, limit=20000):
    bases = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    t = json.loads(line)["text"]
                    if len(t) >= 20:
                        bases.append(t)
                if len(bases) >= limit:
                    break
    if not bases:
        raise SystemExit("no base texts (give --corpus FILE.jsonl with a \"text\" field)")
    return bases


def variant(rng, text):
    """Small edits, one per 60 characters (at most 3): a character (CJK) or word (otherwise)
    replaced, inserted or removed; most variants of a base are near-duplicates of each other."""
    words = text.split(" ")
    cjk = len(words) < 4
    for _ in range(rng.randint(1, min(3, 1 + len(text) // 60))):
        if cjk:
            i = rng.randrange(len(text))
            op = rng.randrange(3)
            c = rng.choice(ZH_CHARS)
            text = text[:i] + c + text[i + 1:] if op == 0 else text[:i] + c + text[i:] if op == 1 \
                else text[:i] + text[i + 1:]
        else:
            i = rng.randrange(len(words))
            op = rng.randrange(3)
            if op == 0:
                words[i] = rng.choice(EN_WORDS)
            elif op == 1:
                words.insert(i, rng.choice(EN_WORDS))
            elif len(words) > 1:
                del words[i]
    return text if cjk else " ".join(words)


class Client:
    """One keep-alive connection per (thread, instance); reconnects after an error."""

    def __init__(self, timeout):
        self.timeout, self.conns = timeout, {}

    def request(self, url, method, path, body=None):
        u = urllib.parse.urlsplit(url)
        conn = self.conns.get(url)
        if conn is None:
            conn = self.conns[url] = http.client.HTTPConnection(u.hostname, u.port, timeout=self.timeout)
        try:
            data = json.dumps(body, ensure_ascii=False).encode() if body is not None else None
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            raw = r.read()
            try:
                return r.status, json.loads(raw) if raw else None
            except ValueError:
                return r.status, None
        except (OSError, http.client.HTTPException):
            conn.close()
            self.conns.pop(url, None)
            return None, None


class Recorder:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.out = open(args.out, "w", encoding="utf-8")
        self.t_start = time.monotonic()
        self.sent = []  # ids in the order first sent: the final reads cover exactly these

    def now(self):
        return round(time.monotonic() - self.t_start, 6)

    def write(self, rec):
        with self.lock:
            self.out.write(json.dumps(rec, ensure_ascii=False) + "\n")

    def send(self, client, url, trial, doc_id, text, batch):
        ns = urllib.parse.quote(self.args.namespace, safe="")
        with self.lock:
            self.sent.append(doc_id)
        urls = self.args.url
        first = urls.index(url)
        for attempt in range(self.args.retries + 1):
            # A retry goes to the next instance: the one that did not answer may be down.
            url = urls[(first + attempt) % len(urls)]
            t0 = self.now()
            if batch:
                status, body = client.request(url, "POST", f"/v1/namespaces/{ns}/batch?mode=check",
                                              {"documents": [{"id": doc_id, "text": text}]})
                answer = body["results"][0] if status == 200 and body and body.get("results") else body
            else:
                status, answer = client.request(url, "POST", f"/v1/namespaces/{ns}/check",
                                                {"id": doc_id, "text": text})
            self.write({"type": "op", "trial": trial, "id": doc_id, "text": text, "attempt": attempt,
                        "f": "batch" if batch else "check", "instance": url, "t0": t0, "t1": self.now(),
                        "status": status, "answer": answer})
            if status is not None and status != 503:
                return
            time.sleep(min(2.0, 0.2 * 2 ** attempt))  # long enough to outlast a restart


def make_trials(args, rng):
    bases = load_bases(args.corpus)
    rng.shuffle(bases)
    for t in range(args.trials):
        base = bases[t % len(bases)]
        g = rng.randint(args.min_group, args.max_group)
        texts = [base] + [variant(rng, base) for _ in range(g - 1)]
        rng.shuffle(texts)
        yield t, [(f"{args.prefix}t{t}-{i}", x, rng.random() < args.batch_fraction) for i, x in enumerate(texts)]


def run_concurrent(rec, args, trials):
    width = args.max_group
    tasks = [None] * width
    start, done = threading.Barrier(width + 1), threading.Barrier(width + 1)
    stop = [False]

    def worker(j):
        client = Client(args.timeout)
        while True:
            start.wait()
            if stop[0]:
                return
            task = tasks[j]
            if task:
                rec.send(client, args.url[j % len(args.url)], *task)
            done.wait()

    threads = [threading.Thread(target=worker, args=(j,), daemon=True) for j in range(width)]
    for th in threads:
        th.start()
    deadline = time.monotonic() + args.max_seconds
    for t, docs in trials:
        if time.monotonic() > deadline:
            break
        for j in range(width):
            tasks[j] = (t,) + docs[j] if j < len(docs) else None
        start.wait()
        done.wait()
    stop[0] = True
    start.wait()


def run_sequential(rec, args, trials):
    client = Client(args.timeout)
    deadline = time.monotonic() + args.max_seconds
    for t, docs in trials:
        for i, (doc_id, text, batch) in enumerate(docs):
            if time.monotonic() > deadline:
                return
            rec.send(client, args.url[i % len(args.url)], t, doc_id, text, batch)


def final_reads(rec, args, ids):
    client = Client(args.timeout)
    ns = urllib.parse.quote(args.namespace, safe="")
    # One deadline for the whole phase: a service that stays down leaves ids unresolved
    # (status null, which the checker reports) instead of a wait per id.
    deadline = time.monotonic() + args.read_seconds
    for doc_id in ids:
        status = None
        while True:
            status, _ = client.request(args.url[0], "GET",
                                       f"/v1/namespaces/{ns}/documents/{urllib.parse.quote(doc_id, safe='')}")
            if status in (200, 404) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        rec.write({"type": "read", "id": doc_id, "status": status, "t": rec.now()})


def create_namespace(args):
    settings = {"threshold": args.threshold, "shingle_size": args.shingle_size,
                "retention_seconds": 30 * 86400}
    # e.g. {"recheck": {"anchor_max_postings": 4}}: stop keys within a short run
    settings.update(json.loads(args.settings) if args.settings else {})
    ns = urllib.parse.quote(args.namespace, safe="")
    status, body = Client(args.timeout).request(args.url[0], "PUT", f"/v1/namespaces/{ns}", settings)
    if status not in (200, 201):
        raise SystemExit(f"PUT namespace {args.namespace}: HTTP {status} {body}")
    return body


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", action="append", required=True, help="a service instance (repeat)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--corpus", action="append", required=True, help="JSONL with \"text\" (repeat)")
    ap.add_argument("--namespace", default=f"hist-{int(time.time())}")
    ap.add_argument("--threshold", type=float, default=0.7)
    ap.add_argument("--shingle-size", type=int, default=3)
    ap.add_argument("--mode", choices=["concurrent", "sequential"], default="concurrent")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--min-group", type=int, default=8)
    ap.add_argument("--max-group", type=int, default=32)
    ap.add_argument("--batch-fraction", type=float, default=0.5)
    ap.add_argument("--retries", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=15)
    ap.add_argument("--max-seconds", type=float, default=600)
    ap.add_argument("--read-seconds", type=float, default=60, help="bound of the final-read phase")
    ap.add_argument("--faults", help="the fault driver's JSON-lines log, merged at the end")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--settings", help="JSON merged into the namespace settings, e.g. "
                    "'{\"recheck\": {\"anchor_max_postings\": 4}}' (stop keys within a short run)")
    ap.add_argument("--prefix", default="")
    args = ap.parse_args()
    if args.min_group < 1 or args.max_group < args.min_group:
        ap.error("need 1 <= --min-group <= --max-group")
    rng = random.Random(args.seed)
    rec = Recorder(args)
    ns_body = create_namespace(args)
    rec.write({"type": "header", "namespace": args.namespace, "threshold": args.threshold,
               "shingle_size": args.shingle_size, "mode": args.mode, "instances": args.url,
               "settings": (ns_body or {}).get("settings"), "seed": args.seed, "wall": time.time()})
    trials = list(make_trials(args, rng))
    (run_concurrent if args.mode == "concurrent" else run_sequential)(rec, args, trials)
    if args.faults:
        try:
            with open(args.faults, encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        rec.write({"type": "fault", **json.loads(line)})
        except FileNotFoundError:
            pass
    final_reads(rec, args, rec.sent)
    rec.out.close()


if __name__ == "__main__":
    main()
