"""fingerprint, fingerprints, distance, similarity: against the CLI and the
values the docs state."""

import subprocess

import numpy as np
import pytest

import neardup


def cli_fingerprints(cli, path, *flags):
    out = subprocess.run([str(cli), "fingerprint", "--input", str(path), "--format", "lines", *flags],
                         check=True, capture_output=True, text=True).stdout
    # "<line number>\t<hex>", "-" for a text without features (whose fingerprint() is 0).
    return [line.split("\t")[1].replace("-", "0" * 16) for line in out.splitlines()]


def test_fingerprints_equal_the_cli(cli, root):
    path = root / "data" / "sample" / "docs.txt"
    texts = path.read_text(encoding="utf-8").split("\n")[:-1]
    got = neardup.fingerprints(texts)
    assert got.dtype == np.uint64 and got.shape == (len(texts),)
    assert [f"{int(v):016x}" for v in got] == cli_fingerprints(cli, path)


def test_options_reach_the_fingerprinter(cli, root, tmp_path):
    texts = (root / "data" / "sample" / "bench_zh.txt").read_text(encoding="utf-8").split("\n")[:200]
    path = tmp_path / "zh.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    want = cli_fingerprints(cli, path, "--cjk-ngram", "3")
    got = [f"{neardup.fingerprint(t, cjk_ngram=3):016x}" for t in texts]
    assert got == want
    assert got != [f"{neardup.fingerprint(t):016x}" for t in texts]


def test_single_equals_batch_and_bytes_equal_str():
    texts = ["The quick brown fox", "naïve café", "", "...", "中文文本的指纹"]
    batch = neardup.fingerprints(iter(texts), threads=3)
    assert list(batch) == [neardup.fingerprint(t) for t in texts]
    assert [neardup.fingerprint(t.encode()) for t in texts] == list(batch)
    assert neardup.fingerprint("") == 0  # no features


def test_distance():
    assert neardup.distance(0, 0) == 0
    assert neardup.distance(0, 2**64 - 1) == 64
    assert neardup.distance(0b1011, 0b0001) == 2


def test_similarity_is_the_documented_one():
    # docs/http-api.md: the service answers 0.975 for this pair, 0.95 for the next.
    a = "The quick brown fox jumps over the lazy dog"
    assert neardup.similarity(a, "the quick brown fox jumps over the lazy dog!") == pytest.approx(0.975)
    assert neardup.similarity(a, "A quick brown fox jumps over the lazy dog") == pytest.approx(0.95)
    assert neardup.similarity("", "") == 1.0
    assert neardup.similarity("abc", "") == 0.0
    # n = 1: the sets are {a, b} and {a, b, c}.
    assert neardup.similarity("abab", "abc", shingle_size=1) == pytest.approx(2 / 3)


def test_bad_arguments_raise_invalid_argument():
    with pytest.raises(neardup.InvalidArgument):
        neardup.fingerprint("x", tokenizer="words")
    with pytest.raises(neardup.InvalidArgument) as e:
        neardup.fingerprint("x", cjk_ngram=9)
    assert e.value.code == 1 and e.value.code_name == "InvalidArgument"
    with pytest.raises(neardup.InvalidArgument):
        neardup.similarity("a", "b", shingle_size=0)
    with pytest.raises(neardup.InvalidArgument):
        neardup.fingerprints(["ok", 3])
    with pytest.raises(TypeError):
        neardup.fingerprints(5)
