import numpy as np
import pytest

from analysis.data.labelled import builtin_task, labelled_from_bytes
from analysis.errors import InputError
from analysis.geometry.probes import probe_layers


def planted(n=200, d=16, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    centres = rng.standard_normal((3, d)) * 4
    layer = centres[labels] + rng.standard_normal((n, d))
    return np.stack([rng.standard_normal((n, d)), layer]), [f"c{y}" for y in labels]


def test_separable_data_probes_near_100_and_shuffled_near_baseline():
    pooled, labels = planted()
    result = probe_layers(pooled, labels)
    assert result.accuracy[1] > 0.97 and result.accuracy[0] < 0.6
    shuffled = list(np.random.default_rng(1).permutation(labels))
    noise = probe_layers(pooled, shuffled)
    assert abs(noise.accuracy[1] - noise.baseline) < 0.2
    assert 0.25 < result.baseline < 0.5 and result.n_test == 60 and result.classes == ["c0", "c1", "c2"]


def test_a_class_with_a_single_row_is_named_not_a_traceback():
    pooled, labels = planted()
    with pytest.raises(InputError, match=r"Class\(es\) \['lonely'\] have a single row"):
        probe_layers(pooled, labels[:-1] + ["lonely"])


def test_builtin_task_has_four_balanced_classes():
    task = builtin_task(per_topic=20)
    assert sorted(set(task.labels)) == ["compound", "debugger", "formatstrings", "specialnames"]
    assert len(task.texts) == 80 and all(len(t) > 100 for t in task.texts)


@pytest.mark.parametrize("data, name, pattern", [
    (b"text,label\na,x\nb,x\nc,x\nd,x\n", "one.csv", "one class"),
    (b"text,label\na,x\nb,\nc,y\nd,y\n", "gap.csv", "rows \\[2\\] miss"),
    (b'{"text": "a", "label": 1}\n{"text": "b", "label": 2}\n{"text": "c", "label": 3}\n{"text": "d", "label": 4}\n',
     "many.jsonl", "at least two rows"),
    (b"\x00\x01", "bin.csv", "binary"),
])
def test_bad_labelled_files(data, name, pattern):
    with pytest.raises(InputError, match=pattern):
        labelled_from_bytes(data, name)


def test_csv_and_jsonl_read():
    csv_task = labelled_from_bytes(b"text,label\nhello,a\nworld,a\nfoo,b\nbar,b\n", "ok.csv")
    assert csv_task.labels == ["a", "a", "b", "b"]
    jsonl = b"".join(b'{"text": "%s", "label": %d}\n' % (t, y) for t, y in [(b"x", 0), (b"y", 0), (b"z", 1), (b"w", 1)])
    assert labelled_from_bytes(jsonl, "ok.jsonl").labels == ["0", "0", "1", "1"]


def test_hub_data_without_the_hub_says_so(monkeypatch):
    from analysis.data.labelled import labelled_from_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(InputError, match="Cannot load Hub dataset 'hf:ag_news:test'"):
        labelled_from_hub("hf:ag_news:test")
    with pytest.raises(InputError, match="hf:NAME"):
        labelled_from_hub("hf:ag_news")
