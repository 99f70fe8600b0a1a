"""Index: numpy round trips, searches against a brute-force numpy oracle,
save/load and its errors."""

import numpy as np
import pytest

import neardup


def popcount64(x):
    return np.unpackbits(x.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)


def oracle(fps, ids, q, k):
    d = popcount64(np.bitwise_xor(fps, np.uint64(q)))
    hits = sorted((int(dist), int(i)) for dist, i in zip(d, ids) if dist <= k)
    return [(i, dist) for dist, i in hits]


@pytest.fixture
def data():
    rng = np.random.default_rng(18)
    base = rng.integers(0, 2**64, size=500, dtype=np.uint64)
    # Near copies of the first 100: 1..4 flipped bits each, so searches find something.
    flips = np.zeros(100, dtype=np.uint64)
    for j in range(100):
        for b in rng.choice(64, size=j % 4 + 1, replace=False):
            flips[j] |= np.uint64(1) << np.uint64(b)
    fps = np.concatenate([base, base[:100] ^ flips])
    ids = np.arange(1000, 1000 + len(fps), dtype=np.uint64)
    return fps, ids


def test_add_batch_and_search_equal_the_oracle(data):
    fps, ids = data
    index = neardup.Index()
    index.add_batch(fps, ids)
    assert len(index) == len(fps)
    queries = fps[:150] ^ np.uint64(1)
    for k in (0, 3, 6):
        batch = index.search_batch(queries, k, threads=2)
        assert batch == [oracle(fps, ids, q, k) for q in queries]
        assert batch == [index.search(int(q), k) for q in queries]
    assert index.get(1000) == int(fps[0])


def test_add_remove_and_errors(data):
    fps, ids = data
    index = neardup.Index()
    index.add(int(fps[0]), 7)
    with pytest.raises(neardup.AlreadyExists) as e:
        index.add(int(fps[1]), 7)
    assert e.value.code == 3
    with pytest.raises(neardup.AlreadyExists):
        index.add_batch(fps[:3], np.array([8, 9, 7], dtype=np.uint64))
    assert len(index) == 1  # all or nothing
    assert index.remove(7) and not index.remove(7)
    with pytest.raises(neardup.NotFound):
        index.get(7)
    with pytest.raises(neardup.InvalidArgument):
        index.search(0, 9)
    with pytest.raises(neardup.InvalidArgument):
        index.add_batch(fps[:3], ids[:2])


def test_save_load_round_trip(data, tmp_path):
    fps, ids = data
    index = neardup.Index()
    index.add_batch(fps, ids)
    path = str(tmp_path / "fps.ndx")
    index.save(path)
    loaded = neardup.Index.load(path)
    assert len(loaded) == len(fps) and loaded.scheme_id == index.scheme_id
    assert loaded.search_batch(fps[:50], 4) == index.search_batch(fps[:50], 4)
    # Another fingerprint scheme is refused, a damaged file too.
    with pytest.raises(neardup.FailedPrecondition):
        neardup.Index.load(path, cjk_ngram=3)
    raw = bytearray(open(path, "rb").read())
    raw[len(raw) // 2] ^= 0xFF
    (tmp_path / "bad.ndx").write_bytes(bytes(raw))
    with pytest.raises(neardup.Corruption):
        neardup.Index.load(str(tmp_path / "bad.ndx"))
    with pytest.raises(neardup.IOError):
        neardup.Index.load(str(tmp_path / "missing.ndx"))


def test_texts_through_an_index():
    texts = ["The quick brown fox jumps over the lazy dog", "Completely different words about databases"]
    index = neardup.Index()
    index.add_batch(neardup.fingerprints(texts), np.arange(2, dtype=np.uint64))
    q = neardup.fingerprints(["A quick brown fox jumps over the lazy dog"])
    assert index.search_batch(q, 5) == [[(0, 5)]]  # distance 5, as docs/http-api.md shows
