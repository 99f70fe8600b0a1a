"""Several Python threads calling the batch functions at once: the answers
are those of one thread alone, and the GIL is not held while they work."""

import threading
import time

import numpy as np

import neardup


def run_threads(n, fn):
    out, errors = [None] * n, []

    def work(i):
        try:
            out[i] = fn(i)
        except Exception as e:  # reported below, not lost in the thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return out


def test_fingerprints_and_searches_from_threads(sample_docs):
    texts = [t for _, t in sample_docs]
    want = neardup.fingerprints(texts, threads=1)
    index = neardup.Index()
    index.add_batch(want, np.arange(len(want), dtype=np.uint64))
    want_hits = index.search_batch(want[:500], 3, threads=1)

    def work(i):
        for _ in range(3):
            assert np.array_equal(neardup.fingerprints(texts), want)
            assert index.search_batch(want[:500], 3) == want_hits
        return True
    assert run_threads(4, work) == [True] * 4


def test_one_deduplicator_from_threads(sample_docs):
    texts = [t for _, t in sample_docs]
    alone = neardup.Deduplicator().check_batch(range(len(texts)), texts)
    kept_alone = sum(not r.duplicate for r in alone)
    shared = neardup.Deduplicator()
    # Each thread sends the whole corpus as one batch under its own ids: the
    # first batch decided keeps what one thread alone keeps, the others are
    # all duplicates.
    results = run_threads(4, lambda i: shared.check_batch([f"{i}-{j}" for j in range(len(texts))], texts))
    assert len(shared) == kept_alone
    firsts = [rs for rs in results if any(not r.duplicate for r in rs)]
    assert len(firsts) == 1
    assert [r.duplicate for r in firsts[0]] == [r.duplicate for r in alone]


def test_batches_release_the_gil(sample_docs):
    texts = [t for _, t in sample_docs] * 20
    done = threading.Event()
    ticks = 0

    def batches():
        for _ in range(3):
            neardup.fingerprints(texts, threads=1)
        done.set()
    t = threading.Thread(target=batches)
    start = time.perf_counter()
    t.start()
    while not done.is_set():
        ticks += 1
    t.join()
    # Python bytecode ran in this thread throughout: with the GIL held by the
    # batch it would run only at the switch interval (5 ms) between batches.
    assert ticks > 100_000 * (time.perf_counter() - start)


def test_index_changes_while_threads_search():
    rng = np.random.default_rng(7)
    fps = rng.integers(0, 2**64, size=20_000, dtype=np.uint64)
    index = neardup.Index()
    index.add_batch(fps[:10_000], np.arange(10_000, dtype=np.uint64))

    def work(i):
        if i == 0:  # the writer: adds the second half in batches, removes some of the first
            for start in range(10_000, 20_000, 1_000):
                index.add_batch(fps[start:start + 1_000], np.arange(start, start + 1_000, dtype=np.uint64))
                assert index.remove(start - 10_000)
            return len(index)
        found = 0
        for _ in range(20):
            found += sum(len(h) for h in index.search_batch(fps[:5_000], 0))
        return found
    sizes = run_threads(4, work)
    assert sizes[0] == 20_000 - 10
    assert index.search_batch(fps[10_000:10_005], 0) == [[(i, 0)] for i in range(10_000, 10_005)]
    # 20 passes over 5,000 present fingerprints, of which ids 0, 1000, ..., 4000 go away meanwhile.
    assert all(20 * 4_995 <= f <= 20 * 5_000 for f in sizes[1:])
