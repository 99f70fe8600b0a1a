"""Client against a real `neardup serve` on a free loopback port, and its
answers beside the in-process Deduplicator's."""

import signal
import socket
import subprocess
import time
import urllib.request

import pytest

import neardup


@pytest.fixture(scope="module")
def server(cli, tmp_path_factory):
    if not (cli.parent / "neardup-serve").exists():
        pytest.skip("built without the service (librocksdb-dev, libhiredis-dev)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tmp_path_factory.mktemp("serve")
    log = open(data / "serve.log", "w")
    proc = subprocess.Popen([str(cli), "serve", "--data", str(data / "store"), "--init",
                             "--listen", f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1).read()
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                pytest.fail("neardup serve did not start: " + (data / "serve.log").read_text())
            time.sleep(0.1)
    yield url
    proc.send_signal(signal.SIGTERM)  # by pid: the process this fixture started
    assert proc.wait(timeout=30) == 0


def test_routes(server):
    c = neardup.Client(server)
    assert c.health()["status"] == "ok"
    with pytest.raises(neardup.NotFound) as e:
        c.check("news", "a1", "x")  # no --auto-create-namespaces: create it first
    assert e.value.http_status == 404 and e.value.code == 2
    c.create_namespace("news", retention_seconds=0)
    assert "news" in c.namespaces()
    a = "The quick brown fox jumps over the lazy dog"
    first = c.check("news", "a1", a)
    assert first["stored"] and not first["duplicate"]
    q = c.query("news", "q1", "A quick brown fox jumps over the lazy dog")
    assert q["duplicate"] and q["matches"][0]["id"] == "a1" and not q["stored"]
    ins = c.insert("news", "a4", a + ".")
    assert ins["stored"] and ins["duplicate"]
    assert c.get("news", "a4")["id"] == "a4"
    assert c.delete("news", "a4")["deleted"]
    with pytest.raises(neardup.NotFound):
        c.get("news", "a4")
    with pytest.raises(neardup.InvalidArgument) as e:
        c.check("news", "a5", "")
    assert e.value.http_status == 400
    assert c.namespace("news")["name"] == "news"
    assert c.delete_namespace("news")["deleted"]
    assert "news" not in c.namespaces()


def test_batch_answers_equal_the_deduplicator(server, sample_docs):
    c = neardup.Client(server, max_batch=400)  # also splits the batch into requests
    c.create_namespace("sample", retention_seconds=0, max_matches=1000)
    docs = [(str(i), text) for i, (_, text) in enumerate(sample_docs[:1500])]
    remote = c.batch("sample", docs)
    local = neardup.Deduplicator().check_batch([i for i, _ in docs], [t for _, t in docs])
    assert len(remote) == len(local) == len(docs)
    for r, l in zip(remote, local):
        assert (r["duplicate"], r["stored"], [m["id"] for m in r["matches"]]) == \
            (l.duplicate, l.stored, [m.id for m in l.matches])
        assert int(r["fingerprint"], 16) == l.fingerprint
    assert sum(r["duplicate"] for r in remote) > 10
