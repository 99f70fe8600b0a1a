"""Deduplicator: the same decisions as `neardup dedup` (its real output over
the sample corpus), and the service-like check/query/insert/remove."""

import json
import re
import subprocess

import numpy as np
import pytest

import neardup


def cli_duplicates(cli, root, tmp_path, *flags):
    dups = tmp_path / "dups.jsonl"
    subprocess.run([str(cli), "dedup", "--input", str(root / "data" / "sample" / "docs.jsonl"),
                    "--output", str(tmp_path / "kept.jsonl"), "--duplicates", str(dups), "-q", *flags],
                   check=True)
    return dups.read_text(encoding="utf-8")


def python_duplicates(results):
    """The --duplicates lines of `neardup dedup` (tools/cmd_dedup.cc) from Results."""
    lines = []
    for r in results:
        if r.duplicate:
            m = r.matches[0]
            lines.append(f'{{"id": {r.id}, "duplicate_of": {m.id}, "distance": {m.distance}, '
                         f'"exact": {json.dumps(m.exact)}, "similarity": {m.similarity:.4f}, '
                         f'"similarity_exact": {json.dumps(m.similarity_exact)}}}\n')
    return "".join(lines)


@pytest.mark.parametrize("flags,settings", [
    ((), {}),
    (("-k", "5", "--threshold", "0.5", "--shingle-size", "4"), {"k": 5, "threshold": 0.5, "shingle_size": 4}),
    (("--no-recheck",), {"recheck": False}),
])
def test_same_duplicates_file_as_the_cli(cli, root, tmp_path, sample_docs, flags, settings):
    want = cli_duplicates(cli, root, tmp_path, *flags)
    assert want.count("\n") > 100  # the sample has near-duplicates to find
    # Ids are the raw JSON ids, so the lines print as the CLI prints them.
    got = python_duplicates(neardup.Deduplicator(**settings).dedup(sample_docs, batch_size=1000))
    assert got == want


def test_best_match_only_is_the_first_of_all(sample_docs):
    best = neardup.Deduplicator().dedup(sample_docs)
    every = neardup.Deduplicator().dedup(sample_docs, all_matches=True)
    several = 0
    for b, e in zip(best, every):
        assert len(b.matches) == (1 if b.duplicate else 0)
        assert [(m.id, m.distance, m.similarity) for m in b.matches] == \
            [(m.id, m.distance, m.similarity) for m in e.matches[:1]]
        several += len(e.matches) > 1
    assert several > 0


def test_idf_table_as_with_the_cli(cli, root, tmp_path, sample_docs):
    idf = tmp_path / "idf.bin"
    subprocess.run([str(cli), "idf", "build", "--input", str(root / "data" / "sample" / "docs.jsonl"),
                    "--output", str(idf)], check=True, capture_output=True)
    want = cli_duplicates(cli, root, tmp_path, "--idf", str(idf))
    got = python_duplicates(neardup.Deduplicator(idf=str(idf)).dedup(sample_docs))
    assert got == want and got != python_duplicates(neardup.Deduplicator().dedup(sample_docs))
    texts = [t for _, t in sample_docs[:50]]
    fps = neardup.fingerprints(texts, idf=str(idf))
    assert list(fps) == [neardup.fingerprint(t, idf=str(idf)) for t in texts]
    assert list(fps) != list(neardup.fingerprints(texts))
    assert neardup.Index(idf=str(idf)).scheme_id != neardup.Index().scheme_id
    with pytest.raises(neardup.Error):
        neardup.Deduplicator(idf=str(tmp_path / "missing.bin"))


def test_batches_and_threads_do_not_change_decisions(sample_docs):
    one = [(r.duplicate, r.duplicate_of) for r in neardup.Deduplicator(threads=1).dedup(sample_docs, 7)]
    many = [(r.duplicate, r.duplicate_of) for r in neardup.Deduplicator(threads=4).dedup(sample_docs)]
    single = neardup.Deduplicator()
    each = [single.check(i, t) for i, t in sample_docs]
    assert one == many == [(r.duplicate, r.duplicate_of) for r in each]


def test_check_query_insert_remove():
    d = neardup.Deduplicator()
    a = "The quick brown fox jumps over the lazy dog"
    first = d.check("a1", a)
    assert (first.duplicate, first.stored, first.matches, first.duplicate_of) == (False, True, [], None)
    assert first.fingerprint == neardup.fingerprint(a) and first.has_features
    # The service's answers for the same texts (docs/http-api.md).
    q = d.query("A quick brown fox jumps over the lazy dog")
    assert q.duplicate and not q.stored and q.duplicate_of == "a1"
    assert (q.matches[0].distance, q.similarity, q.matches[0].exact) == (5, pytest.approx(0.95), False)
    dup = d.check("a2", "the quick brown fox jumps over the lazy dog!")
    assert dup.duplicate and not dup.stored and dup.matches[0].exact and dup.similarity == pytest.approx(0.975)
    assert "a2" not in d and "a1" in d and len(d) == 1
    replay = d.check("a1", "something else entirely")
    assert replay.replay and replay.stored and replay.matches == [] and replay.fingerprint == first.fingerprint
    forced = d.insert(np.int64(4), a + ".")
    assert forced.stored and forced.duplicate and forced.id == "4" and "4" in d and 4 in d
    assert [m.id for m in d.query(a).matches] == ["a1", "4"]
    d.remove("a1")
    assert d.query(a).duplicate_of == "4"
    d.remove(4)
    assert not d.query(a).duplicate and len(d) == 0
    with pytest.raises(neardup.NotFound) as e:
        d.remove("a1")
    assert e.value.code == 2 and isinstance(e.value, LookupError)


def test_dedup_of_plain_texts_numbers_them():
    results = list(neardup.Deduplicator().dedup(["same text here", "other words entirely", "same text here"]))
    assert [r.id for r in results] == ["0", "1", "2"]
    assert [r.duplicate_of for r in results] == [None, None, "0"]


def test_insertion_session_batches_inserts(sample_docs):
    d = neardup.Deduplicator()
    with d.insertion_session(buffer_size=100) as session:
        for i, (_, text) in enumerate(sample_docs):
            session.insert(i, text)
        assert 0 < len(d) < len(sample_docs)  # flushed in batches of 100 before the end
    assert len(d) == len(sample_docs)  # insert keeps duplicates too
    assert d.query(sample_docs[10][1]).duplicate


def test_settings_are_the_cli_flags_with_their_defaults(cli):
    help_text = subprocess.run([str(cli), "dedup", "--help"], capture_output=True, text=True).stdout
    settings = neardup.Deduplicator().settings
    for key, value in settings.items():
        if key in ("k", "tokenizer", "cjk_ngram", "idf", "threads"):
            continue
        flag = "--" + key.replace("_", "-")
        assert flag in help_text, flag
        if not isinstance(value, bool):  # "--threshold FLOAT=0.7"
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            assert re.search(rf"{flag} [A-Z]+={re.escape(shown)}\s", help_text), flag
    assert settings["k"] == 3 and settings["threshold"] == 0.7


def test_bad_settings():
    with pytest.raises(neardup.InvalidArgument, match="threshold"):
        neardup.Deduplicator(threshold=2.0)
    with pytest.raises(neardup.InvalidArgument, match="unknown setting"):
        neardup.Deduplicator(treshold=0.5)
    with pytest.raises(neardup.InvalidArgument):
        neardup.Deduplicator(shingle_size="3")
    with pytest.raises(neardup.InvalidArgument):
        neardup.Deduplicator(k=9)
    with pytest.raises(neardup.InvalidArgument):
        neardup.Deduplicator().check_batch(["a"], ["x", "y"])
    with pytest.raises(neardup.InvalidArgument):
        neardup.Deduplicator().check(1.5, "x")
