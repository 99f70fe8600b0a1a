"""neardup.Client: the HTTP API of `neardup serve` (docs/http-api.md), with
the standard library only. Answers are the decoded JSON objects; an error
answer raises the neardup.Error subclass of its code, with `http_status`."""

import json
import urllib.error
import urllib.parse
import urllib.request

from . import _errors


class Client:
    """One method per route of the service.

    base_url: e.g. "http://127.0.0.1:8080"; api_key: sent as a Bearer token
    (serve --api-keys); max_batch: documents per /batch request (the
    server's --max-batch): batch() splits longer lists."""

    def __init__(self, base_url, *, timeout=30.0, api_key=None, max_batch=1000):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.api_key = api_key
        self.max_batch = max_batch

    def _call(self, method, path, body=None, params=None):
        url = self.base_url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode()
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                payload = answer.read()
        except urllib.error.HTTPError as e:
            raise self._error(e.code, e.read()) from None
        return json.loads(payload) if payload else None

    @staticmethod
    def _error(http_status, payload):
        try:
            err = json.loads(payload)["error"]
            return _errors.from_http(http_status, err["code"], err["message"])
        except (ValueError, KeyError, TypeError):
            return _errors.Error(payload.decode("utf-8", "replace"), http_status)

    @staticmethod
    def _path(ns, *rest):
        return "/v1/namespaces/" + "/".join(urllib.parse.quote(str(p), safe="") for p in (ns,) + rest)

    @staticmethod
    def _document(id, text, timestamp=None):
        doc = {"id": id, "text": text}
        if timestamp is not None:
            doc["timestamp"] = timestamp
        return doc

    # Documents: the answer to a document (docs/http-api.md).
    def check(self, ns, id, text, *, timestamp=None):
        """Stores the text unless it near-duplicates a stored one (atomic)."""
        return self._call("POST", self._path(ns, "check"), self._document(id, text, timestamp))

    def query(self, ns, id, text, *, timestamp=None):
        """The answer check() would give; stores nothing."""
        return self._call("POST", self._path(ns, "query"), self._document(id, text, timestamp))

    def insert(self, ns, id, text, *, timestamp=None):
        """Stores the text even if it duplicates."""
        return self._call("POST", self._path(ns, "insert"), self._document(id, text, timestamp))

    def batch(self, ns, documents, mode="check"):
        """Many documents in order (mode "check", "query" or "insert"): (id,
        text) pairs or document dicts. The list of answers; a failed document's
        entry is {"error": {...}}, as the service gives it."""
        docs = [d if isinstance(d, dict) else self._document(*d) for d in documents]
        results = []
        for start in range(0, len(docs), self.max_batch):
            body = {"documents": docs[start:start + self.max_batch]}
            results += self._call("POST", self._path(ns, "batch"), body, {"mode": mode})["results"]
        return results

    def get(self, ns, id):
        """A stored document (NotFound if absent or expired)."""
        return self._call("GET", self._path(ns, "documents", id))

    def delete(self, ns, id):
        return self._call("DELETE", self._path(ns, "documents", id))

    # Namespaces.
    def namespaces(self):
        """The names, sorted."""
        return self._call("GET", "/v1/namespaces")["namespaces"]

    def create_namespace(self, ns, **settings):
        """Creates a namespace, or changes its settings (docs/http-api.md:
        k, tokenizer, cjk_ngram, retention_seconds, max_matches, threshold,
        recheck={...})."""
        return self._call("PUT", self._path(ns), settings)

    def namespace(self, ns):
        """Settings and statistics."""
        return self._call("GET", self._path(ns))

    def delete_namespace(self, ns):
        return self._call("DELETE", self._path(ns))

    def health(self):
        return self._call("GET", "/healthz")
