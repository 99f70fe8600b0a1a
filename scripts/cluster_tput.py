#!/usr/bin/env python3
"""Checks/s of two `neardup serve --store redis-cluster://` instances (issue 16 figures).

  scripts/cluster_tput.py NEARDUP BASEPORT SECONDS [CORPUS.jsonl ...]
Starts a local cluster (scripts/redis_cluster.sh) on BASEPORT, two instances, 8 client threads
sending /check of fresh texts that all start with "load text" (a shared frame: a few common
anchors) for SECONDS; prints answers/s; stops everything it started. NEARDUP is `neardup`
(run as `neardup serve`) or `neardup-serve`. With CORPUS files: their texts instead, in a
fixed shuffled order (natural text: reposts, common frames, Chinese and English), each
thread its own slice, each text sent once.
"""
import http.client, json, random, subprocess, sys, threading, time, re, select, os, tempfile
exe, base, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
corpus = []
for path in sys.argv[4:]:
    with open(path, encoding="utf-8") as f:
        corpus += [json.loads(line)["text"] for line in f if line.strip()]
random.Random(7).shuffle(corpus)
serve = [exe] if os.path.basename(exe).startswith("neardup-serve") else [exe, "serve"]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
work = tempfile.mkdtemp(prefix="nd-tput-")
out = subprocess.run([root + "/scripts/redis_cluster.sh", "start", work, str(base)], capture_output=True, text=True)
uri = out.stdout.strip()
procs = []
ports = []
try:
    for i in range(2):
        p = subprocess.Popen(serve + ["--store", uri, "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = p.stdout.readline()
        ports.append(int(re.search(r"127\.0\.0\.1:(\d+)", line).group(1)))
        procs.append(p)
    # Namespaces are made by PUT (auto-create is off by default).
    put = http.client.HTTPConnection("127.0.0.1", ports[0], timeout=30)
    put.request("PUT", "/v1/namespaces/t", body="{}")
    put.getresponse().read()
    count = [0]
    stop = [False]
    mu = threading.Lock()
    def run(i):
        rng = random.Random(i); c = {}; n = 0
        while not stop[0]:
            port = ports[n % 2]; n += 1
            words = " ".join(f"w{rng.randrange(10**9)}" for _ in range(12))
            text = f"load text {i} {n} {words}"
            if corpus:
                k = i + 8 * n
                if k >= len(corpus): break
                text = corpus[k]
            conn = c.get(port) or http.client.HTTPConnection("127.0.0.1", port, timeout=30); c[port] = conn
            conn.request("POST", "/v1/namespaces/t/check", body=json.dumps({"id": f"{i}-{n}", "text": text}))
            r = conn.getresponse(); r.read()
            if r.status == 200:
                with mu: count[0] += 1
    ts = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(8)]
    [t.start() for t in ts]
    time.sleep(secs); stop[0] = True; [t.join() for t in ts]
    print(f"{exe}: {count[0]} answers in {secs} s = {count[0]/secs:.0f}/s")
finally:
    for p in procs: p.terminate(); p.wait()
    subprocess.run([root + "/scripts/redis_cluster.sh", "stop", work, str(base)], capture_output=True)
