"""Live sliders: a preview at once, the exact curve after; stopped work keeps what it finished; one heavy
computation at a time; background fill that fails says so and leaves nothing half-written."""

import contextlib
import json
import threading
import time

import numpy as np
import pytest

from analysis.data.corpus import Sampling, builtin_corpus
from analysis.geometry.pga import null_bases, pga_sweep
from analysis.geometry.readout import readout_basis
from analysis.geometry.synthetic import masked_readout, planted_readout
from analysis.runs import analyses, pipeline
from analysis.runs.settings import Compute, ModelChoice, k_grid, pga_settings, preview_settings
from analysis.storage.cache import ResultCache
from tests.test_app import run_page, shown, z_values

CPU = Compute(device="cpu")


def tolerance(preview, exact) -> float:
    """The largest |z_preview - z_exact| over the stated tolerance: half the width of the exact z's 95 %
    interval, and at least 1 (near z = 0 the interval is narrow while pair sampling moves z by tenths)."""
    return max(abs(p.z - e.z) / max(1.0, (e.z_interval[1] - e.z_interval[0]) / 2)
               for p, e in zip(preview, exact, strict=True))


def interval_gap(preview, exact) -> float:
    """The largest gap between the preview's and the exact z's 95 % intervals (0 where they overlap): each
    interval is the spread of z over its own null draws, so a preview on fewer draws is consistent with the
    exact curve when the two overlap."""
    return max(max(p.z_interval[0] - e.z_interval[1], e.z_interval[0] - p.z_interval[1], 0.0)
               for p, e in zip(preview, exact, strict=True))


@pytest.mark.parametrize("make", [planted_readout, masked_readout])
def test_the_preview_agrees_with_the_exact_curve_on_planted_data(make):
    states, w_u = make(n=400, seed=3)
    layers = np.stack([states, states * 0.5 + 0.1])
    settings = pga_settings(w_u.shape[1], (8,), (0, 1))
    exact = pga_sweep(layers, readout_basis(w_u), settings)
    preview = pga_sweep(layers, readout_basis(w_u), preview_settings(settings))
    assert all(p.n_pairs == 3 * 128 * 127 // 2 < e.n_pairs and len(p.null) == 30 < len(e.null) == 100
               for p, e in zip(preview, exact, strict=True))  # 3 blocks of 128 tokens, the first 30 null draws
    assert interval_gap(preview, exact) == 0
    assert [np.sign(p.z) for p in preview] == [np.sign(e.z) for e in exact]  # planted structure found by both
    assert all(abs(p.z) > 3 for p in preview)
    first = null_bases(w_u.shape[1], 8, 30, settings.seed)
    assert np.array_equal(first, null_bases(w_u.shape[1], 8, 100, settings.seed)[:30])  # the exact's first 30 draws


def test_the_preview_agrees_with_the_exact_curve_on_a_tiny_model(neox_folder, tmp_path):
    cache = ResultCache(tmp_path)
    loaded = analyses.open_model(ModelChoice(str(neox_folder)), CPU)
    sampling, settings = Sampling(256, window=64), pga_settings(32)
    exact = analyses.model_pga(loaded, builtin_corpus(), sampling, settings, compute=CPU, cache=cache)
    preview = analyses.model_pga(loaded, builtin_corpus(), sampling, preview_settings(settings), compute=CPU,
                                 cache=cache)
    assert preview.preview and not exact.preview and "Preview" in preview.z_figure().layout.title.text
    assert analyses.model_pga(loaded, builtin_corpus(), sampling, preview_settings(settings), compute=CPU,
                              cache=cache, stored_only=True) is None  # a preview is never stored
    again = analyses.model_pga(loaded, builtin_corpus(), sampling, preview_settings(settings), compute=CPU, cache=cache)
    assert [r.z for r in again.results] == [r.z for r in preview.results]  # seeded: the same preview again
    assert not any(r.z_interval[1] - r.z_interval[0] == 0 for r in exact.at())
    assert tolerance(preview.at(), exact.at()) <= 1


class Stop(Exception):
    """What Streamlit raises inside a run when a newer move reruns the page."""


def test_stopped_work_keeps_every_finished_layer_and_nothing_else(tmp_path):
    states, w_u = planted_readout(n=120)
    layers = np.stack([states * (1 + i) for i in range(4)])
    basis, cache, settings = readout_basis(w_u), ResultCache(tmp_path), pga_settings(w_u.shape[1], (8,), n_null=10)

    def stop_at_layer_two(stage, done, total):
        if done == 2:
            raise Stop

    with pytest.raises(Stop):
        pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, settings, [0, 1, 2, 3], cache=cache,
                            progress=stop_at_layer_two)
    assert pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, settings, [0, 1], cache=cache,
                               stored_only=True) is not None
    assert pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, settings, [2], cache=cache, stored_only=True) is None
    resumed = pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, settings, [0, 1, 2, 3], cache=cache)
    whole = pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, settings, [0, 1, 2, 3],
                                cache=ResultCache(tmp_path / "other"))
    assert [r.z for r in resumed] == [r.z for r in whole]


def test_a_newer_move_stops_work_inside_a_layer_and_only_finished_layers_are_stored(tmp_path):
    states, w_u = planted_readout(n=120)
    layers = np.stack([states * (1 + i) for i in range(3)])
    basis, settings = readout_basis(w_u), pga_settings(w_u.shape[1], (8,), n_null=40)
    pauses = []

    @contextlib.contextmanager
    def slot(limit: int | None = None):
        def pause():  # the gate's pause: raises when a newer move has superseded this run
            pauses.append(1)
            if limit is not None and len(pauses) > limit:
                raise Stop
        yield pause

    pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, settings, [0], cache=ResultCache(tmp_path / "a"), slot=slot)
    per_layer, cache = len(pauses), ResultCache(tmp_path / "b")
    assert per_layer >= 2  # pause points inside a layer's 41 subspaces, not only between layers
    pauses.clear()
    with pytest.raises(Stop):  # stopped at the first pause inside layer 1
        pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, settings, [0, 1, 2], cache=cache,
                            slot=lambda: slot(per_layer))
    assert pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, settings, [0], cache=cache, stored_only=True)
    for layer in (1, 2):
        assert pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, settings, [layer], cache=cache,
                                   stored_only=True) is None


def test_along_the_sliders_nearest_settings_come_first_each_once_and_the_ends_before_the_exact_run():
    from dashboard.compute import along_sliders, before_exact

    grid = (1, 2, 4, 8, 16)
    assert along_sliders(grid, 4, 2, reach=1) == [(2, 2), (8, 2), (4, 1), (4, 3)]
    every = along_sliders(grid, 4, 2)
    assert every[:4] == along_sliders(grid, 4, 2, reach=1)
    assert len(every) == len(set(every)) and (4, 2) not in every
    assert set(every) == {(k, 2) for k in grid if k != 4} | {(4, c) for c in range(11) if c != 2}
    assert every.index((16, 2)) < every.index((4, 6)) < every.index((4, 10))  # both slider ends are reached
    assert along_sliders(grid, 16, 0, reach=2) == [(8, 0), (16, 1), (4, 0), (16, 2)]
    assert before_exact(grid, 4, 2) == [(2, 2), (8, 2), (4, 1), (4, 3), (1, 2), (16, 2), (4, 0), (4, 10)]
    assert before_exact(grid, 16, 0) == [(8, 0), (16, 1), (1, 0), (16, 10)]  # at an end: the other ends


def test_previews_remembered_layer_by_layer_make_the_next_move_instant(monkeypatch):
    states, w_u = planted_readout(n=200, seed=5)
    layers = np.stack([states, states * 0.5 + 0.1, states + 1.0])
    basis, settings = readout_basis(w_u), preview_settings(pga_settings(w_u.shape[1], (8,), (1,)))
    monkeypatch.setattr(pipeline, "_previews", type(pipeline._previews)())
    ahead = [pipeline.cached_pga(layers, {"s": "ahead"}, basis, {"w": 1}, settings, [layer])[0] for layer in range(3)]
    real, calls = pipeline.pga_sweep, []
    monkeypatch.setattr(pipeline, "pga_sweep", lambda *a, **kw: calls.append(a[3]) or real(*a, **kw))
    move = pipeline.cached_pga(layers, {"s": "ahead"}, basis, {"w": 1}, settings, [0, 1, 2])
    assert not calls and move == ahead  # the move's preview computed nothing
    fresh = pga_sweep(layers, basis, settings)
    assert [r.z for r in move] == [r.z for r in fresh]  # the same numbers as computing it now
    noisy = layers + np.random.default_rng(0).normal(size=layers.shape)
    other = pipeline.cached_pga(noisy, {"s": "other"}, basis, {"w": 1}, settings, [0, 1])
    assert calls == [[0, 1]] and [r.z for r in other] != [r.z for r in move[:2]]  # other states: computed anew
    monkeypatch.setattr(pipeline, "PREVIEWS_REMEMBERED", 2)
    pipeline.cached_pga(layers, {"s": "third"}, basis, {"w": 1}, settings, [0, 1, 2])
    assert len(pipeline._previews) == 2  # memory stays bounded


def test_one_heavy_computation_at_a_time_previews_first_then_requests_then_fill():
    from dashboard.compute import Gate

    gate, spans, order = Gate(), [], []

    def work(name: str, priority: int, delay: float):
        time.sleep(delay)
        with gate.hold(priority):
            start = time.perf_counter()
            order.append(name)
            time.sleep(0.4)
            spans.append((start, time.perf_counter()))

    threads = [threading.Thread(target=work, args=args) for args in
               (("fill-1", Gate.FILL, 0), ("fill-2", Gate.FILL, 0.05), ("exact", Gate.EXACT, 0.1),
                ("preview", Gate.PREVIEW, 0.15))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spans.sort()
    assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))
    assert order == ["fill-1", "preview", "exact", "fill-2"]  # the visitor's requests overtake the waiting fill


def test_long_work_steps_aside_for_a_preview_at_its_next_pause_and_carries_on():
    from dashboard.compute import Gate

    gate, events = Gate(), []

    def exact():
        with gate.hold(Gate.EXACT) as pause:
            for step in range(20):
                events.append(("exact", step, time.perf_counter()))
                time.sleep(0.05)  # a few subspaces of work
                pause()

    def preview():
        time.sleep(0.3)
        asked = time.perf_counter()
        with gate.hold(Gate.PREVIEW):
            events.append(("preview", asked, time.perf_counter()))
            time.sleep(0.2)
            events.append(("preview done", asked, time.perf_counter()))

    threads = [threading.Thread(target=exact), threading.Thread(target=preview)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    names = [e[0] for e in events]
    (_, asked, started), (_, _, done) = events[names.index("preview")], events[names.index("preview done")]
    assert started - asked < 0.15  # within one step of work, not after the whole layer (1 s)
    during = [e for e in events if e[0] == "exact" and started <= e[2] <= done]
    assert not during  # the exact work waited while the preview ran
    assert [e[1] for e in events if e[0] == "exact"] == list(range(20))  # and then carried on, nothing lost


def test_the_page_shows_the_exact_curve_and_fills_in_the_neighbours(tiny_models):
    model = tiny_models[("gpt2", False)]
    app = run_page("pages/readout.py", model=model, n_tokens=128, k=4)
    assert not app.exception and not app.error
    assert "Preview" not in app.get("plotly_chart")[0].proto.spec  # the exact curve replaced the preview
    ready = " ".join(c.value for c in app.caption if c.value.startswith("Nearby settings ready"))
    assert "k = 2, CCR-1 ✓" in ready and "k = 8, CCR-1 ✓" in ready and "k = 4, CCR-10 ✓" in ready


def test_the_page_previews_every_setting_along_both_sliders_in_memory(tiny_models, monkeypatch):
    from dashboard import compute

    model = tiny_models[("gpt_neox", False)]
    app = run_page("pages/readout.py", model=model, n_tokens=128, k=8, ccr=2, seed=11)
    assert not app.exception and not app.error
    view = compute.ViewState(model=str(model), n_tokens=128, seed=11)
    loaded = analyses.open_model(view.choice, CPU)
    states = analyses.model_hidden_states(loaded, builtin_corpus(), view.sampling, CPU)
    monkeypatch.setattr(pipeline, "pga_sweep", None)  # anything computed now would fail
    for k, ccr in compute.along_sliders(k_grid(32), 8, 2):
        settings = preview_settings(pga_settings(32, (k,), (ccr,), seed=11))
        run = analyses.model_pga(loaded, builtin_corpus(), view.sampling, settings, compute=CPU, states=states)
        assert run.preview and len(run.results) == states.value.n_layers


def test_a_failing_fill_says_so_and_leaves_nothing_half_written(tiny_models, monkeypatch):
    from dashboard import compute

    model = tiny_models[("llama", True)]
    real = pipeline.pga_sweep

    def out_of_memory_for_k2(states, basis, settings, *args, **kwargs):
        if settings.ks == (2,):
            raise MemoryError("no room for k = 2")
        return real(states, basis, settings, *args, **kwargs)

    monkeypatch.setattr(pipeline, "pga_sweep", out_of_memory_for_k2)
    app = run_page("pages/readout.py", model=model, n_tokens=128, k=4, seed=7)  # a seed no other test fills
    assert not app.exception
    assert any("Filling in k = 2, CCR-1 stopped" in shown(w.value) for w in app.warning)
    assert z_values(app)  # the page itself is drawn
    view = compute.ViewState(model=str(model), n_tokens=128, seed=7)
    loaded = analyses.open_model(view.choice, CPU)
    states = analyses.model_hidden_states(loaded, builtin_corpus(), view.sampling, CPU)
    assert analyses.model_pga(loaded, builtin_corpus(), view.sampling, pga_settings(32, (2,), seed=7), compute=CPU,
                              states=states, stored_only=True) is None  # nothing stored for the failed job


def test_the_token_map_and_training_pages_end_on_the_exact_view(tiny_models, tmp_path):
    import shutil

    app = run_page("pages/token_map.py", model=tiny_models[("gpt_neox", True)], n_tokens=128, layer=1, ccr=2)
    assert not app.exception and not app.error
    title = json.loads(app.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert "UMAP" in title and "Preview" not in title  # the preview plane was replaced

    for name in ("checkpoint-1", "checkpoint-2"):
        shutil.copytree(tiny_models[("gpt_neox", False)], tmp_path / "run" / name)
    app = run_page("pages/training.py", model=tmp_path / "run", n_tokens=128, k=4)
    assert not app.exception and not app.error
    app.number_input[0].set_value(16).run()  # a new k: previewed from the cached states, then measured
    assert not app.exception and not app.error
    spec = app.get("plotly_chart")[0].proto.spec
    assert "Preview" not in spec and "k = 16" in spec
