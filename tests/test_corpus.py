import json

import numpy as np
import pytest

from analysis.data.corpus import Sampling, builtin_corpus, corpus_from_bytes, load_corpus, sample_positions
from analysis.errors import InputError


def test_builtin_corpus_is_stable_prose():
    corpus = builtin_corpus()
    assert len(corpus.text) > 400_000 and corpus.sha256 == builtin_corpus().sha256


@pytest.mark.parametrize("data, pattern", [
    (b"", "empty"), (b"  \n\t ", "empty"), (b"\x00\x01\x02binary", "binary"),
    (b"\xff\xfe\xfa caf\xe9", "not UTF-8"),
])
def test_bad_text_is_refused_with_the_name(data, pattern):
    with pytest.raises(InputError, match=f"'upload.txt'.*{pattern}|{pattern}.*'upload.txt'"):
        corpus_from_bytes(data, "upload.txt")


def test_huge_text_is_refused(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"word " * 300_000)
    with pytest.raises(InputError, match="over the limit of 1 MB"):
        load_corpus(str(path), max_mb=1)


def test_jsonl_reads_the_field_and_names_the_bad_line(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps({"text": t}) for t in ["alpha beta", "gamma"]) + "\n")
    assert load_corpus(str(path)).text == "alpha beta\n\ngamma"
    path.write_text('{"text": "ok"}\n{"body": "x"}\n')
    with pytest.raises(InputError, match="line 2 has no string field 'text'"):
        load_corpus(str(path))


def test_missing_file_and_bad_hub_spec():
    with pytest.raises(InputError, match="not a file"):
        load_corpus("/no/such.txt")
    with pytest.raises(InputError, match="hf:NAME"):
        load_corpus("hf:ag_news")


def test_sampling_is_seeded_skips_window_starts_and_has_n_rows():
    ids = np.arange(10_000)
    sampling = Sampling(n_tokens=300, window=64, skip=5, per_window=16, seed=3)
    a, b = sample_positions(ids, sampling), sample_positions(ids, sampling)
    assert len(a.rows) == 300 and np.array_equal(a.token_ids, b.token_ids)
    assert a.cols.min() >= 5 and a.cols.max() < 64
    assert len(set(zip(a.rows.tolist(), a.cols.tolist(), strict=True))) == 300  # no position twice
    np.testing.assert_array_equal(a.token_ids, a.starts[a.rows] + a.cols)  # window w starts at starts[w]
    c = sample_positions(ids, Sampling(n_tokens=300, window=64, skip=5, per_window=16, seed=4))
    assert not np.array_equal(a.token_ids, c.token_ids)


def test_bos_starts_every_window():
    sample = sample_positions(np.arange(1, 1000), Sampling(n_tokens=20, window=10, skip=1), bos=0)
    assert (sample.windows[:, 0] == 0).all() and (sample.token_ids != 0).all()


def test_n_beyond_the_corpus_says_how_many_fit():
    with pytest.raises(InputError, match="at most 240 .*1000 tokens = 10 windows of 100, 24 usable"):
        sample_positions(np.arange(1000), Sampling(n_tokens=241, window=100, skip=76))
    assert len(sample_positions(np.arange(1000), Sampling(n_tokens=240, window=100, skip=76)).rows) == 240


@pytest.mark.parametrize("kwargs", [dict(n_tokens=0), dict(window=1), dict(skip=128), dict(per_window=0)])
def test_bad_sampling_values(kwargs):
    with pytest.raises(InputError):
        Sampling(**kwargs)
