import math
import shutil
from dataclasses import replace

import pytest

from analysis.data.corpus import Sampling, builtin_corpus
from analysis.errors import InputError
from analysis.geometry.pga import PGASettings
from analysis.models.train_demo import DemoSettings, train_demo
from analysis.runs import series as series_module
from analysis.runs.series import check_series, prepare_checkpoints, training_sweep
from analysis.runs.settings import block_preview, preview_settings
from analysis.storage.cache import ResultCache
from tests.test_live import tolerance

SAMPLING = Sampling(n_tokens=64, window=32, per_window=16)
SETTINGS = PGASettings(ks=(8,), ccrs=(1,), n_null=10, n_bootstrap=50)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    settings = DemoSettings(widths=(16, 32), n_layers=2, context=32, batch_size=8, steps=64)
    return root, train_demo(root, settings), settings


def test_demo_series_layout_and_falling_loss(demo, tmp_path):
    root, summary, settings = demo
    assert settings.checkpoint_steps == [0, 1, 2, 4, 8, 16, 32, 64]
    for width in (16, 32):
        folder = root / f"neox-d{width}"
        assert sorted(p.name for p in folder.iterdir()) == sorted(f"checkpoint-{s}" for s in settings.checkpoint_steps)
        losses = summary[width]["train_loss"]
        assert sum(losses[-8:]) / 8 < sum(losses[:8]) / 8
    results = training_sweep(str(root / "neox-d32"), ["checkpoint-0", "checkpoint-64"], builtin_corpus(),
                             SAMPLING, SETTINGS, device="cpu", cache=ResultCache(tmp_path)).results
    assert results[1].loss < results[0].loss - 0.5  # held-out loss falls with training
    assert [r.step for r in results] == [0, 64] and len(results[0].layers) == 3
    assert set(results[0].seconds) == {"load", "forward", "metrics", "loss"}


def test_identical_checkpoints_are_flagged_and_cached(demo, tmp_path):
    root, _, _ = demo
    series = tmp_path / "series"
    for step in (0, 8):
        shutil.copytree(root / "neox-d16" / f"checkpoint-{step}", series / f"checkpoint-{step}")
    shutil.copytree(series / "checkpoint-8", series / "checkpoint-9")  # a mislabelled copy
    cache = ResultCache(tmp_path / "cache")
    results = training_sweep(str(series), ["checkpoint-0", "checkpoint-8", "checkpoint-9"], builtin_corpus(),
                             SAMPLING, SETTINGS, device="cpu", cache=cache).results
    assert [r.duplicate_of for r in results] == [None, None, "checkpoint-8"]
    calls = []
    again = training_sweep(str(series), ["checkpoint-0", "checkpoint-8", "checkpoint-9"], builtin_corpus(),
                           SAMPLING, SETTINGS, device="cpu", cache=cache, progress=lambda *a: calls.append(a)).results
    assert [stage for stage, *_ in calls] == ["checkpoints"] * 4  # resumable: nothing recomputed
    assert [r.loss for r in again] == [r.loss for r in results]


def test_bad_series(demo, tmp_path):
    root, _, _ = demo
    with pytest.raises(InputError, match="at least one"):
        check_series(str(root / "neox-d16"), [])
    with pytest.raises(InputError, match="'checkpoint-3' is not in .*'checkpoint-5' is not in"):
        check_series(str(root / "neox-d16"), ["checkpoint-3", "checkpoint-8", "checkpoint-5"])
    mixed = tmp_path / "mixed"
    shutil.copytree(root / "neox-d16" / "checkpoint-8", mixed / "checkpoint-1")
    shutil.copytree(root / "neox-d32" / "checkpoint-8", mixed / "checkpoint-2")
    with pytest.raises(InputError, match="differ in architecture.*d = 16: checkpoint-1.*d = 32: checkpoint-2"):
        check_series(str(mixed), ["checkpoint-1", "checkpoint-2"])


def test_a_new_setting_is_previewed_then_measured_from_the_cache_without_loading_a_model(demo, tmp_path,
                                                                                          monkeypatch):
    root, _, _ = demo
    name, revisions, cache = str(root / "neox-d32"), ["checkpoint-0", "checkpoint-64"], ResultCache(tmp_path)
    wider = replace(SETTINGS, ks=(16,))
    sampling = Sampling(n_tokens=256, window=32, per_window=16)  # two blocks of 128 tokens in the preview
    assert training_sweep(name, revisions, builtin_corpus(), sampling, SETTINGS, "cpu", cache=cache,
                          stored_only=True) is None  # nothing measured: no preview either
    assert training_sweep(name, revisions, builtin_corpus(), sampling, block_preview(wider, 32), "cpu",
                          cache=cache) is None
    first = training_sweep(name, revisions, builtin_corpus(), sampling, SETTINGS, "cpu", cache=cache)
    assert not first.preview and "Preview" not in first.describe(8, 1)

    def no_loading(*_args, **_kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(series_module, "load", no_loading)  # from here on, states, readout and loss come cached
    assert training_sweep(name, revisions, builtin_corpus(), sampling, wider, "cpu", cache=cache,
                          stored_only=True) is None
    preview = training_sweep(name, revisions, builtin_corpus(), sampling, block_preview(wider, 32), "cpu",
                             cache=cache)
    assert preview.preview and "Preview on pairs inside blocks of 128 tokens, 10 null draws" in preview.describe(16, 1)
    assert "Preview" in preview.heatmaps(16, 1).layout.title.text
    assert training_sweep(name, revisions, builtin_corpus(), sampling, wider, "cpu", cache=cache,
                          stored_only=True) is None  # a preview is never stored as the record
    exact = training_sweep(name, revisions, builtin_corpus(), sampling, wider, "cpu", cache=cache)
    assert not exact.preview and "Preview" not in exact.heatmaps(16, 1).layout.title.text
    assert [r.loss for r in exact.results] == [r.loss for r in first.results]
    assert set(exact.results[0].seconds) == {"metrics"}  # nothing loaded, no forward pass
    for seen, measured in zip(preview.results, exact.results, strict=True):
        assert [a.layer for a in seen.at(16, 1)] == [b.layer for b in measured.at(16, 1)]
        pairs = zip(seen.layers, measured.layers, strict=True)
        assert all(a.n_pairs == 2 * 128 * 127 // 2 < b.n_pairs for a, b in pairs)
        assert tolerance(seen.at(16, 1), measured.at(16, 1)) <= 1  # the same statistic on fewer pairs
    again = training_sweep(name, revisions, builtin_corpus(), sampling, wider, "cpu", cache=cache, stored_only=True)
    assert [r.to_json() for r in again.results] == [r.to_json() for r in exact.results]


def test_a_series_never_measured_is_previewed_after_its_forward_passes_alone(demo, tmp_path, monkeypatch):
    root, _, _ = demo
    name, revisions, cache = str(root / "neox-d16"), ["checkpoint-0", "checkpoint-64"], ResultCache(tmp_path)
    sampling = Sampling(n_tokens=256, window=32, per_window=16)
    quick = preview_settings(SETTINGS, 16)
    assert training_sweep(name, revisions, builtin_corpus(), sampling, quick, "cpu", cache=cache) is None
    loaded, measured = [], []
    real_load, real_pga = series_module.load, series_module.cached_pga
    monkeypatch.setattr(series_module, "load", lambda ref, **kw: loaded.append(ref.revision) or real_load(ref, **kw))
    monkeypatch.setattr(series_module, "cached_pga", lambda *a, **kw: measured.append(a[4]) or real_pga(*a, **kw))
    prepare_checkpoints(name, revisions[:1], builtin_corpus(), sampling, "cpu", cache=cache)
    assert loaded == ["checkpoint-0"] and not measured  # a forward pass and the readout: no PGA, no loss
    prepare_checkpoints(name, revisions, builtin_corpus(), sampling, "cpu", cache=cache)
    assert loaded == ["checkpoint-0", "checkpoint-64"]  # only the checkpoint that missed its states
    read, real_get = [], cache.get
    monkeypatch.setattr(cache, "get", lambda namespace, *a: read.append(namespace) or real_get(namespace, *a))
    prepare_checkpoints(name, revisions, builtin_corpus(), sampling, "cpu", cache=cache)
    assert len(loaded) == 2 and read == []  # both prepared: their keys looked up, nothing read
    preview = training_sweep(name, revisions, builtin_corpus(), sampling, quick, "cpu", cache=cache)
    assert preview.preview and len(loaded) == 2 and all(settings.preview for settings in measured)
    assert all(math.isnan(r.loss) for r in preview.results)  # measured by the exact series
    assert "Preview on every pair, 10 null draws (the exact series follows, with the loss on 16 held-out windows" \
        in preview.describe(8, 1)
    exact = training_sweep(name, revisions, builtin_corpus(), sampling, SETTINGS, "cpu", cache=cache)
    assert not exact.preview and all(r.loss > 0 for r in exact.results)
    assert "; loss on" in exact.describe(8, 1) and "follows" not in exact.describe(8, 1)
    assert loaded == revisions * 2  # loaded again for the loss
    for seen, final in zip(preview.results, exact.results, strict=True):
        assert tolerance(seen.at(8, 1), final.at(8, 1)) <= 1  # the same statistic on fewer pairs
