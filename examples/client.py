#!/usr/bin/env python3
"""A small client for `neardup serve` (docs/http-api.md), Python 3 standard library only.

    from client import NeardupClient, NeardupError
    c = NeardupClient("http://127.0.0.1:8080")
    answer = c.check("news", "a1", "The quick brown fox jumps over the lazy dog")
    if answer["duplicate"]:
        print("duplicate of", [m["id"] for m in answer["matches"]])

Run it as a script for a demo against a running server:

    ./build/neardup serve --data /tmp/neardup-demo --init --listen 127.0.0.1:8080 &
    python3 examples/client.py --url http://127.0.0.1:8080

With `serve --api-keys FILE`, pass a token: NeardupClient(url, api_key=TOKEN), or
`--api-key TOKEN` / the NEARDUP_API_KEY environment variable for the demo (it needs an admin key).
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request


class NeardupError(Exception):
    """An error answer of the server: HTTP status, error code and message."""

    def __init__(self, status, code, message):
        super().__init__("HTTP %d %s: %s" % (status, code, message))
        self.status = status
        self.code = code
        self.message = message


class NeardupClient:
    """One method per route. Every method returns the decoded JSON answer or raises NeardupError."""

    def __init__(self, base_url="http://127.0.0.1:8080", timeout=30.0, api_key=None):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.api_key = api_key  # sent as "Authorization: Bearer ..." (serve --api-keys)

    # ---- transport ---------------------------------------------------------

    def _request(self, method, path, body=None, query=None):
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        if body is not None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
                if resp.headers.get_content_type() != "application/json":
                    return raw.decode("utf-8")
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)["error"]
                raise NeardupError(e.code, err.get("code", ""), err.get("message", "")) from None
            except (ValueError, KeyError, TypeError):
                raise NeardupError(e.code, "http_error", raw.decode("utf-8", "replace")) from None

    @staticmethod
    def _ns(ns):
        return "/v1/namespaces/" + urllib.parse.quote(ns, safe="")

    @staticmethod
    def _doc(id, text, timestamp_ms=None):
        doc = {"id": id, "text": text}
        if timestamp_ms is not None:
            doc["timestamp"] = int(timestamp_ms)
        return doc

    # ---- documents ---------------------------------------------------------

    def check(self, ns, id, text, timestamp_ms=None):
        """Stores the text unless it near-duplicates a stored one; the answer says which."""
        return self._request("POST", self._ns(ns) + "/check", self._doc(id, text, timestamp_ms))

    def query(self, ns, id, text, timestamp_ms=None):
        """Like check, but never stores anything."""
        return self._request("POST", self._ns(ns) + "/query", self._doc(id, text, timestamp_ms))

    def insert(self, ns, id, text, timestamp_ms=None):
        """Stores the text even if it duplicates (matches are still reported)."""
        return self._request("POST", self._ns(ns) + "/insert", self._doc(id, text, timestamp_ms))

    def batch(self, ns, documents, mode="check"):
        """documents: iterable of dicts {"id", "text"[, "timestamp"]} or (id, text) pairs.
        Returns the list of per-document results, in order (an entry with "error" failed)."""
        docs = [d if isinstance(d, dict) else self._doc(d[0], d[1]) for d in documents]
        return self._request("POST", self._ns(ns) + "/batch", {"documents": docs}, {"mode": mode})["results"]

    def get(self, ns, id):
        """The stored document (id, fingerprint, has_features, timestamp); NeardupError 404 if absent."""
        return self._request("GET", self._ns(ns) + "/documents/" + urllib.parse.quote(str(id), safe=""))

    def delete(self, ns, id):
        return self._request("DELETE", self._ns(ns) + "/documents/" + urllib.parse.quote(str(id), safe=""))

    # ---- namespaces --------------------------------------------------------

    def put_namespace(self, ns, **settings):
        """Creates or updates: k, tokenizer, cjk_ngram, retention_seconds, max_matches."""
        return self._request("PUT", self._ns(ns), settings)

    def stats(self, ns):
        """Settings and statistics of a namespace."""
        return self._request("GET", self._ns(ns))

    def delete_namespace(self, ns):
        return self._request("DELETE", self._ns(ns))

    def namespaces(self):
        return self._request("GET", "/v1/namespaces")["namespaces"]

    def health(self):
        return self._request("GET", "/healthz")

    def metrics(self):
        return self._request("GET", "/metrics")


def _demo(url, api_key=None):
    c = NeardupClient(url, api_key=api_key)
    print("health:", c.health())
    ns = "demo"
    try:
        c.delete_namespace(ns)  # start clean
    except NeardupError as e:
        if e.status != 404:
            raise
    print("created:", c.put_namespace(ns, k=3, retention_seconds=3600)["settings"])

    texts = [
        ("a1", "The quick brown fox jumps over the lazy dog"),
        ("a2", "the quick brown fox jumps over the lazy dog!"),
        ("b1", "Completely different words about databases and indexes"),
        ("c1", "今天北京天气很好，我们去公园散步吧"),
        ("c2", "今天北京天气很好，我们去公园散步吧！"),
    ]
    for id, text in texts:
        a = c.check(ns, id, text)
        verdict = "duplicate of %s" % ", ".join(m["id"] for m in a["matches"]) if a["duplicate"] else "new, stored"
        print("check %-3s %s  (fingerprint %s)" % (id, verdict, a["fingerprint"]))

    again = c.check(ns, "a1", texts[0][1])
    print("re-send a1: replay=%s stored=%s" % (again["replay"], again["stored"]))
    print("query:", c.query(ns, "q", "A quick brown fox jumps over the lazy dog")["matches"])

    results = c.batch(ns, [("d1", "A note on gardening tomatoes"), {"id": "d2", "text": ""},
                           ("d3", "a note on gardening tomatoes")])
    for r in results:
        print("batch:", r.get("error") or ("%s duplicate=%s stored=%s" % (r["id"], r["duplicate"], r["stored"])))

    print("get a1:", c.get(ns, "a1"))
    print("delete d1:", c.delete(ns, "d1"))
    try:
        c.get(ns, "d1")
    except NeardupError as e:
        print("get d1 after delete:", e.status, e.code)
    print("stats:", c.stats(ns)["stats"])
    print("namespaces:", c.namespaces())
    try:
        c.check(ns, "bad", "")
    except NeardupError as e:
        print("error example:", e)


def main(argv):
    p = argparse.ArgumentParser(description="Demo of the neardup serve HTTP API")
    p.add_argument("--url", default="http://127.0.0.1:8080", help="server base URL")
    p.add_argument("--api-key", default=os.environ.get("NEARDUP_API_KEY"),
                   help="bearer token of an admin key (default: $NEARDUP_API_KEY)")
    args = p.parse_args(argv)
    try:
        _demo(args.url, args.api_key)
    except urllib.error.URLError as e:
        print("cannot reach %s: %s (start it with: neardup serve --data DIR --init)" % (args.url, e.reason), file=sys.stderr)
        return 1
    except NeardupError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
