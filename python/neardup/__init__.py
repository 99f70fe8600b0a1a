"""neardup in process: near-duplicate text detection (64-bit simhash, then the
Jaccard similarity of character n-gram sets), the engine of the `neardup`
command and service. A tour: docs/python.md.

    import neardup
    d = neardup.Deduplicator()
    for r in d.dedup(["a text", "A text!", "another one"]):
        print(r.id, r.duplicate, r.duplicate_of)
"""

import contextlib
import itertools

from . import _core
from ._core import Index, Match, Result, distance, fingerprint, fingerprints, similarity
from ._errors import *  # noqa: F401,F403  (Error and one subclass per status code)
from ._errors import __all__ as _error_names
from .client import Client

__all__ = ["fingerprint", "fingerprints", "distance", "similarity", "Index", "Deduplicator",
           "Result", "Match", "Client"] + _error_names


class _InsertionSession:
    """Buffers insert() calls and sends them as insert_batch() calls of
    `buffer_size` documents (all cores, without the GIL); flushed on exit."""

    def __init__(self, dedup, buffer_size):
        self._dedup = dedup
        self._size = buffer_size
        self._ids, self._texts = [], []

    def insert(self, id, text):
        self._ids.append(id)
        self._texts.append(text)
        if len(self._ids) >= self._size:
            self.flush()

    def flush(self):
        if self._ids:
            ids, texts = self._ids, self._texts
            self._ids, self._texts = [], []
            self._dedup.insert_batch(ids, texts, all_matches=False)


class Deduplicator(_core.Deduplicator):
    __doc__ = _core.Deduplicator.__doc__

    def dedup(self, items, batch_size=4096, all_matches=False):
        """check() of every item of an iterable, in order, as a generator of
        Results. An item is a text (its id is then its position, 0, 1, ...)
        or an (id, text) pair. Items are taken `batch_size` at a time and
        analysed on every core. A Result's matches hold the best match only
        (what `neardup dedup --duplicates` reports), unless all_matches."""
        it = iter(items)
        position = 0
        while True:
            chunk = list(itertools.islice(it, batch_size))
            if not chunk:
                return
            ids, texts = [], []
            for item in chunk:
                if isinstance(item, (str, bytes)):
                    ids.append(position)
                    texts.append(item)
                else:
                    ids.append(item[0])
                    texts.append(item[1])
                position += 1
            yield from self.check_batch(ids, texts, all_matches=all_matches)

    @contextlib.contextmanager
    def insertion_session(self, buffer_size=4096):
        """A context manager for bulk loading, as datasketch's MinHashLSH has:

            with d.insertion_session() as session:
                for id, text in corpus:
                    session.insert(id, text)

        Inserts are buffered and made in batches (in order); the rest is
        flushed when the block ends without an exception."""
        session = _InsertionSession(self, buffer_size)
        yield session
        session.flush()
