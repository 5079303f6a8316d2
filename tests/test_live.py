"""Live sliders: a preview at once, the exact curve after; stopped work keeps what it finished; one heavy
computation at a time; background fill that fails says so and leaves nothing half-written."""

import contextlib
import re
import threading
import time
import types
from dataclasses import replace

import numpy as np
import pytest
import torch

from analysis.data.corpus import Sampling, builtin_corpus
from analysis.geometry.ccr import remove_components
from analysis.geometry.pga import (
    _preview_projection,
    _project,
    layer_pcas,
    null_bases,
    pga_sweep,
    remembered_shapes,
)
from analysis.geometry.ranks import ranked_reference
from analysis.geometry.readout import readout_basis
from analysis.geometry.synthetic import masked_readout, planted_readout
from analysis.models.tiny import save_tiny_model
from analysis.results.collections import NULL_COLUMNS, PGARun
from analysis.runs import analyses, pipeline
from analysis.runs import settings as run_settings
from analysis.runs.settings import (
    Compute,
    ModelChoice,
    along_sliders,
    block_preview,
    first_draws_preview,
    k_grid,
    nearby,
    pga_settings,
    preview_first_layers,
    preview_layers,
    preview_n_null,
    preview_order,
    preview_settings,
    preview_subspaces,
)
from analysis.storage.cache import ResultCache
from analysis.storage.memory import EngineMemory, ModestMemory, default_limit_mb
from dashboard.admission import Admission, Priority
from tests.test_app import chart_specs, charts, decode, run_page, settled, shown, z_values

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
@pytest.mark.parametrize("kind, n_pairs", [(block_preview, 3 * 128 * 127 // 2), (first_draws_preview, 400 * 399 // 2)])
@pytest.mark.parametrize("draws", [30, 20])
def test_the_preview_agrees_with_the_exact_curve_on_planted_data(monkeypatch, make, kind, n_pairs, draws):
    """On 3 blocks of 128 tokens or on every pair, with the first 30 null draws, or 20 where a draw is wide."""
    states, w_u = make(n=400, seed=3)
    layers = np.stack([states, states * 0.5 + 0.1])
    settings = pga_settings(w_u.shape[1], (8,), (0, 1))
    if draws < 30:  # d x k eight times the width: the fewest draws
        monkeypatch.setattr(run_settings, "PREVIEW_WIDTH", w_u.shape[1])
    exact = pga_sweep(layers, readout_basis(w_u), settings)
    preview = pga_sweep(layers, readout_basis(w_u), kind(settings, w_u.shape[1]))
    assert all(p.n_pairs == n_pairs <= e.n_pairs and len(p.null) == draws < len(e.null) == 100
               for p, e in zip(preview, exact, strict=True))
    assert interval_gap(preview, exact) == 0
    assert [np.sign(p.z) for p in preview] == [np.sign(e.z) for e in exact]  # planted structure found by both
    assert all(abs(p.z) > 3 for p in preview)
    first = null_bases(w_u.shape[1], 8, 30, settings.seed)
    assert np.array_equal(first, null_bases(w_u.shape[1], 8, 100, settings.seed)[:30])  # the exact's first 30 draws
    assert np.allclose(null_bases(w_u.shape[1], 3, 30, settings.seed), first[..., :3], atol=1e-12)  # nested in k


@pytest.mark.parametrize("ccr_fit", ["same", "half"])
def test_ccr_and_k_moves_preview_from_the_remembered_ccr_0_projection_as_from_the_corrected_states(ccr_fit):
    """(H - mu)(I - U_c U_c^T) B = P_0 - ((H - mu) U_c)(U_c^T B): the preview of every CCR depth from one remembered
    projection per layer equals the preview projecting each depth's corrected states itself; so does the preview
    of a smaller or larger k (the bases are nested in k)."""
    states, w_u = planted_readout(n=300, d=48, k=8, seed=5)
    layers = np.stack([states, np.tanh(states)])
    settings = pga_settings(w_u.shape[1], (8,), (0, 1, 4), ccr_fit=ccr_fit)
    memory = EngineMemory()
    warm = pga_sweep(layers, readout_basis(w_u), preview_settings(settings, 48), memory=memory)
    assert memory.count("CCR-0 projection") == 2  # one per layer, for every depth
    cold = pga_sweep(layers, readout_basis(w_u), preview_settings(settings, 48), memory=EngineMemory(limit_bytes=1))
    for w, c in zip(warm, cold, strict=True):
        assert w.rho_readout == pytest.approx(c.rho_readout, abs=1e-5) and np.allclose(w.null, c.null, atol=1e-5)
    for move in ((4,), (12,)):  # k down: the remembered projection's first columns; up: only the added ones projected
        moved = replace(settings, ks=move)
        warm = pga_sweep(layers, readout_basis(w_u), preview_settings(moved, 48), memory=memory)
        cold = pga_sweep(layers, readout_basis(w_u), preview_settings(moved, 48), memory=EngineMemory(limit_bytes=1))
        for w, c in zip(warm, cold, strict=True):
            assert w.rho_readout == pytest.approx(c.rho_readout, abs=1e-5) and np.allclose(w.null, c.null, atol=1e-5)
    kept = [value for (kind, _), (value, _) in memory.items.items() if kind == "CCR-0 projection"]
    assert len(kept) == 2 and all(value.projection.shape[-1] == 12 for value in kept)  # widened to k = 12, per layer
    one_layer = 31 * (300 if ccr_fit == "same" else 150) * 8 * 4  # 31 subspaces' projections of the scored tokens
    for share, kept in ((8, 0), (64, 4)):  # a quarter of the memory holds two layers' projections, then all four
        bounded = EngineMemory(limit_bytes=share * one_layer)
        for layer in range(4):  # the dashboard previews one layer at a time: the bound is judged on every layer
            pga_sweep(np.stack([states + shift for shift in range(4)]), readout_basis(w_u),
                      preview_settings(settings, 48), [layer], memory=bounded)
        assert bounded.count("CCR-0 projection") == kept
    other = readout_basis(np.random.default_rng(9).standard_normal(w_u.shape))  # another readout, the same width
    warm = pga_sweep(layers, other, preview_settings(settings, 48), memory=memory)
    cold = pga_sweep(layers, other, preview_settings(settings, 48), memory=EngineMemory(limit_bytes=1))
    assert [w.rho_readout for w in warm] == pytest.approx([c.rho_readout for c in cold], abs=1e-5)
    x = torch.as_tensor(states, dtype=torch.float32)
    pca, bases = layer_pcas([x], 4)[0], torch.as_tensor(null_bases(48, 8, 3, 0), dtype=torch.float32)
    for c in (0, 1, 4):
        direct = _project(remove_components(x, pca, c).float(), bases)
        updated = _preview_projection((x.double() - pca.mean).float(), None, pca, c, bases, None, EngineMemory(), None)
        assert torch.allclose(updated, direct, atol=1e-5 * float(direct.abs().max()))
        if c:  # what the update removes is there to remove
            assert not torch.allclose(updated, _project(remove_components(x, pca, 0).float(), bases), atol=1e-3)


@pytest.mark.parametrize("ccr_fit", ["same", "half"])
def test_an_exact_sweep_leaves_the_ccr_0_projections_a_preview_starts_from(monkeypatch, ccr_fit):
    """P_0 = P_c + ((H - mu) U_c)(U_c^T B) of the exact sweep's first R' + 1 subspaces (the null draws are nested in R):
    a preview after it at the same or a smaller k, at any depth, projects nothing and equals a cold preview; a preview
    of more draws than were left projects them all."""
    from analysis.geometry import pga

    states, w_u = planted_readout(n=300, d=48, k=8, seed=5)
    layers, basis = np.stack([states, np.tanh(states)]), readout_basis(w_u)
    settings = pga_settings(w_u.shape[1], (8,), (1,), ccr_fit=ccr_fit)
    preview = preview_settings(settings, w_u.shape[1])
    memory = EngineMemory()
    pga_sweep(layers, basis, settings, memory=memory, for_previews=preview.n_null + 1)
    assert memory.count("CCR-0 projection") == 2  # one per layer
    projected = []
    monkeypatch.setattr(pga, "_project", lambda points, bases, out=None, pause=None: projected.append(bases.shape)
                        or _project(points, bases, out, pause))
    for moved in (preview, replace(preview, ccrs=(0, 3)), replace(preview, ks=(5,))):
        warm = pga_sweep(layers, basis, moved, memory=memory)
        cold = pga_sweep(layers, basis, moved, memory=EngineMemory(limit_bytes=1))
        for w, c in zip(warm, cold, strict=True):
            assert w.rho_readout == pytest.approx(c.rho_readout, abs=1e-5) and np.allclose(w.null, c.null, atol=1e-5)
    assert len(projected) == 2 * 4  # the cold previews' only
    projected.clear()
    pga_sweep(layers, basis, replace(preview, n_null=preview.n_null + 5), memory=memory)
    assert [shape[0] for shape in projected] == [preview.n_null + 6] * 2
    nothing_left = EngineMemory()
    pga_sweep(layers, basis, settings, memory=nothing_left)  # for_previews = 0: the CLI's and the GPU's sweeps
    assert nothing_left.count("CCR-0 projection") == 0


@pytest.mark.parametrize("ccr_fit", ["same", "half"])
def test_a_move_of_k_ranks_the_full_space_once_per_layer_depth_and_design(monkeypatch, ccr_fit):
    """The full space's ranked cosines are the same at every k: a sweep at another k, exact or preview, takes them
    from memory (one ranking per layer, depth and pair design) and equals a sweep that ranks them afresh."""
    from analysis.geometry import pga

    states, w_u = planted_readout(n=300, d=48, k=8, seed=5)
    layers, basis = np.stack([states, np.tanh(states)]), readout_basis(w_u)
    ranked, counting = [], [False]
    monkeypatch.setattr(pga, "ranked_reference", lambda values: ranked.append(counting[0]) or ranked_reference(values))
    memory, exact = EngineMemory(), pga_settings(w_u.shape[1], (8,), (1,), ccr_fit=ccr_fit, n_null=12)
    preview = block_preview(exact, w_u.shape[1])
    for settings in (exact, replace(exact, ks=(4,)), replace(exact, ks=(6,), ccrs=(1, 2)), preview,
                     replace(preview, ks=(4,))):
        counting[0] = True
        warm = pga_sweep(layers, basis, settings, memory=memory)
        counting[0] = False
        cold = pga_sweep(layers, basis, settings, memory=EngineMemory(limit_bytes=1))
        for w, c in zip(warm, cold, strict=True):  # a preview's projection from memory differs by its rounding
            assert w.rho_readout == pytest.approx(c.rho_readout, abs=1e-6) and np.allclose(w.null, c.null, atol=1e-6)
    assert sum(ranked) == 2 * 3  # two layers at CCR-1 on all pairs, at CCR-2, and at CCR-1 on the preview's design


@pytest.mark.parametrize("ccr_fit, batched, wide", [("same", False, False), ("half", False, False),
                                                   ("same", True, False), ("same", False, True)])
def test_a_jumps_preview_hands_its_projections_over_to_the_exact_sweep_after_it(monkeypatch, ccr_fit, batched, wide):
    """A preview that projects (almost) every column anew projects the corrected states as the exact sweep projects its
    first R' + 1 subspaces, and hands them over: the exact sweep after it projects only the other draws, and its
    results are those of an exact sweep without a preview, bit for bit (and of the CLI's, which splits nothing); with
    the projection's wide matmul and with its batched one (large k), each writing into the joined projection; and
    where d x k is wide enough for the preview to take fewer draws."""
    from analysis.geometry import pga

    if batched:
        monkeypatch.setattr(pga, "BATCHED_FROM_K", 1)
    if wide:
        monkeypatch.setattr(run_settings, "PREVIEW_WIDTH", 48 * 8 * 2 // 3)  # d x k 1.5 times the width: 20 draws

    states, w_u = planted_readout(n=300, d=48, k=8, seed=5)
    layers, basis = np.stack([states, np.tanh(states)]), readout_basis(w_u)
    settings = pga_settings(w_u.shape[1], (8,), (1,), ccr_fit=ccr_fit)
    preview, first = block_preview(settings, w_u.shape[1]), preview_subspaces(settings, w_u.shape[1], "cpu")
    assert first == preview.n_null + 1 == (21 if wide else 31)
    alone = pga_sweep(layers, basis, settings, memory=EngineMemory(), for_previews=first)
    cli = pga_sweep(layers, basis, settings, memory=EngineMemory())
    memory = EngineMemory()
    pga_sweep(layers, basis, preview, memory=memory)
    assert len(memory.handed[1]) == 2  # one per layer
    projected = []
    monkeypatch.setattr(pga, "_project", lambda points, bases, out=None, pause=None: projected.append(len(bases))
                        or _project(points, bases, out, pause))
    after = pga_sweep(layers, basis, settings, memory=memory, for_previews=first)
    assert projected == [settings.n_null + 1 - first] * 2 and not memory.handed[1]  # only the other draws; all taken
    for a, b, c in zip(after, alone, cli, strict=True):
        assert a.rho_readout == b.rho_readout and np.array_equal(a.null, b.null) and a.z == b.z
        assert a.rho_readout == pytest.approx(c.rho_readout, abs=1e-7) and np.allclose(a.null, c.null, atol=1e-7)
    projected.clear()
    pga_sweep(layers, basis, replace(settings, ccrs=(0,)), memory=memory, for_previews=first)
    assert projected == [settings.n_null + 1 - first] * 2  # handed over at CCR-1; at CCR-0, P_0 as the preview left it


@pytest.mark.parametrize("ccr_fit", ["same", "half"])
def test_a_moves_exact_sweep_takes_its_first_subspaces_from_the_ccr_0_projection(monkeypatch, ccr_fit):
    """After an exact sweep that left ``P_0`` of its first R' + 1 subspaces, the exact sweep of a move (another depth,
    a smaller k, a wider k once its preview widened ``P_0``) projects only the other draws, and equals a cold sweep up
    to float32 rounding; a sweep at CCR-0 takes ``P_0`` as it is."""
    from analysis.geometry import pga

    states, w_u = planted_readout(n=300, d=48, k=8, seed=5)
    layers, basis = np.stack([states, np.tanh(states)]), readout_basis(w_u)
    settings = pga_settings(w_u.shape[1], (6,), (1,), ccr_fit=ccr_fit)
    first = preview_settings(settings, w_u.shape[1]).n_null + 1
    memory = EngineMemory()
    pga_sweep(layers, basis, settings, memory=memory, for_previews=first)
    projected = []
    monkeypatch.setattr(pga, "_project", lambda points, bases, out=None, pause=None: projected.append(len(bases))
                        or _project(points, bases, out, pause))
    for moved in (replace(settings, ccrs=(3,)), replace(settings, ks=(4,)), replace(settings, ccrs=(0,)),
                  replace(settings, ks=(8,), ccrs=(2,))):
        if moved.ks == (8,):
            pga_sweep(layers, basis, preview_settings(moved, w_u.shape[1]), memory=memory)  # widens P_0 to k = 8
        projected.clear()
        warm = pga_sweep(layers, basis, moved, memory=memory, for_previews=first)
        assert projected == [settings.n_null + 1 - first] * 2  # only the draws P_0 does not hold
        cold = pga_sweep(layers, basis, moved, memory=EngineMemory())
        for w, c in zip(warm, cold, strict=True):
            assert w.rho_readout == pytest.approx(c.rho_readout, abs=1e-6) and np.allclose(w.null, c.null, atol=1e-6)
            assert w.z == pytest.approx(c.z, abs=1e-3)
    projected.clear()
    pga_sweep(layers, basis, replace(settings, ks=(12,)), memory=memory, for_previews=first)  # wider than P_0
    assert projected == [first, settings.n_null + 1 - first] * 2


@pytest.mark.parametrize("ccr_fit", ["same", "half"])
def test_a_preview_on_every_pair_is_the_exact_sweeps_first_subspaces_and_is_not_scored_again(monkeypatch, ccr_fit):
    """A preview on every pair with the first 30 draws scores the exact sweep's readout and first draws: their rhos
    are the exact ones, and the exact sweep after it (the same states, depth, k and draws) projects and ranks only the
    other 70 subspaces, hands nothing over, and equals a cold sweep and the CLI's; one at another depth or k scores
    all 101."""
    from analysis.geometry import pga

    states, w_u = planted_readout(n=300, d=48, k=8, seed=5)
    layers, basis = np.stack([states, np.tanh(states)]), readout_basis(w_u)
    settings = pga_settings(w_u.shape[1], (8,), (2,), ccr_fit=ccr_fit)
    preview, first = first_draws_preview(settings, w_u.shape[1]), preview_settings(settings, w_u.shape[1]).n_null + 1
    cli = pga_sweep(layers, basis, settings, memory=EngineMemory())
    memory = EngineMemory()
    pga_sweep(layers, basis, replace(settings, ccrs=(1,)), memory=memory, for_previews=first)  # the curve before
    seen = pga_sweep(layers, basis, preview, memory=memory)
    for p, c in zip(seen, cli, strict=True):
        assert p.n_pairs == c.n_pairs and p.rho_readout == pytest.approx(c.rho_readout, abs=1e-6)
        assert np.allclose(p.null, c.null[:first - 1], atol=1e-6)
    assert not memory.handed[1]
    scored, projected, real_rhos = [], [], pga._subspace_rhos
    monkeypatch.setattr(pga, "_subspace_rhos", lambda reference, points, *a: scored.append(len(points))
                        or real_rhos(reference, points, *a))
    monkeypatch.setattr(pga, "_project", lambda points, bases, out=None, pause=None: projected.append(len(bases))
                        or _project(points, bases, out, pause))
    after = pga_sweep(layers, basis, settings, memory=memory, for_previews=first)
    assert scored == projected == [settings.n_null + 1 - first] * 2  # per layer: only the draws the preview left
    for a, c in zip(after, cli, strict=True):
        assert a.rho_readout == pytest.approx(c.rho_readout, abs=1e-6) and np.allclose(a.null, c.null, atol=1e-6)
        assert a.z == pytest.approx(c.z, abs=1e-3) and len(a.null) == settings.n_null
    scored.clear()
    for moved in (replace(settings, ccrs=(3,)), replace(settings, ks=(6,))):
        pga_sweep(layers, basis, moved, memory=memory, for_previews=first)
    assert scored == [settings.n_null + 1] * 4


def test_a_preview_of_fewer_draws_finds_nothing_where_nothing_is_planted(monkeypatch):
    """States with no readout structure (isotropic noise): the preview of 20 draws and the exact run find none."""
    rng = np.random.default_rng(8)
    w_u, layers = rng.standard_normal((500, 64)), rng.standard_normal((3, 400, 64))
    settings = pga_settings(64, (8,), (1,))
    monkeypatch.setattr(run_settings, "PREVIEW_WIDTH", 64)  # d x k eight times the width: the fewest draws
    exact = pga_sweep(layers, readout_basis(w_u), settings)
    for kind in (block_preview, first_draws_preview):
        preview = pga_sweep(layers, readout_basis(w_u), kind(settings, 64))
        assert all(len(p.null) == 20 for p in preview)
        assert all(abs(p.z) < 3 for p in preview) and all(abs(e.z) < 3 for e in exact)


def test_previews_take_fewer_null_draws_where_a_draw_is_wide():
    """30 draws up to d x k = 2^18 (every k of the built-in model, d = 576), fewer in proportion above it, 20 at
    least, and never more than the exact run's R."""
    assert {preview_n_null(pga_settings(576, (k,)), 576) for k in k_grid(576)} == {30}
    for d, k, draws in ((1024, 256, 30), (1024, 512, 20), (2048, 128, 30), (2048, 256, 20), (2048, 1024, 20),
                        (4096, 64, 30), (4096, 80, 24), (4096, 100, 20)):
        settings = pga_settings(d, (k,))
        assert preview_n_null(settings, d) == preview_settings(settings, d).n_null == block_preview(settings, d).n_null
        assert preview_n_null(settings, d) == draws
    assert preview_n_null(pga_settings(4096, (64, 100)), 4096) == 20  # the widest k of several
    assert preview_n_null(pga_settings(576, (8,), n_null=12), 576) == 12
    assert preview_n_null(pga_settings(2048, (1024,), n_null=5), 2048) == 5
    assert preview_n_null(pga_settings(8192, (4096,)), 8192) == 20


def test_a_page_preview_on_blocks_draws_five_layers_first_and_three_where_each_is_a_large_projection():
    """Five layers first at the built-in model's every k and at the papers' sizes up to k = 512; three (the first,
    the last, the one shown) where (R' + 1) N d k passes 2^36 / 5: Pythia-1B's shape at k = 1024, or N = 2048."""
    def first(d, k, n_tokens=512):
        return preview_first_layers(block_preview(pga_settings(d, (k,)), d), n_tokens, d)

    assert {first(576, k) for k in k_grid(576)} == {5}
    assert [first(1024, 512), first(2048, 512), first(2048, 1024), first(2048, 512, 2048), first(4096, 2048)] == [
        5, 5, 3, 3, 3]
    assert first(2048, 1024, 1024) == 3 and first(2048, 256, 1024) == 5


def test_previews_score_every_pair_where_ranking_is_most_of_the_work():
    """Up to k = 16 the preview is the exact sweep's first draws on every pair; above, the pairs inside blocks."""
    for ks, blocks in (((1,), None), ((16,), None), ((4, 16), None), ((17,), 128), ((8, 32), 128), ((100,), 128)):
        preview = preview_settings(pga_settings(576, ks), 576)
        assert preview.preview and preview.n_null == 30 and preview.pair_blocks == blocks
        assert preview.max_pairs is None and preview.projection == "float32"


def test_values_handed_over_wait_for_one_taker_one_group_at_a_time_within_the_limit():
    memory = EngineMemory(limit_bytes=3 * 4 * 10)
    one = np.zeros(10, np.float32)
    assert memory.hand_over("a", 0, one) and memory.hand_over("a", 1, one)
    assert memory.take("a", 0) is one and memory.take("a", 0) is None
    assert memory.hand_over("a", 2, one) and memory.hand_over("a", 3, one) and not memory.hand_over("a", 4, one)
    assert memory.hand_over("b", 0, one) and memory.take("a", 1) is None  # another group dropped the first's
    assert memory.hand_over("b", 1, one) and memory.take("c", 0) is None and memory.take("b", 1) is None  # a taker of
    assert memory.used == 0  # another group drops what waited for a run that did not come; all beside the limit


def test_only_a_caller_that_draws_previews_keeps_the_exact_sweeps_projections(neox_folder, tmp_path):
    """The dashboard's exact curves leave each layer's projections for the slider previews; the CLI's do not."""
    loaded = analyses.open_model(ModelChoice(str(neox_folder)), CPU)
    for compute in (CPU, replace(CPU, previews=True)):
        memory = EngineMemory()
        run = analyses.model_pga(loaded, builtin_corpus(), Sampling(256, window=64), pga_settings(32), compute=compute,
                                 cache=ResultCache(tmp_path / str(compute.previews)), memory=memory)
        assert memory.count("CCR-0 projection") == (len(run.results) if compute.previews else 0)  # one per layer


def test_the_preview_agrees_with_the_exact_curve_on_a_tiny_model(neox_folder, tmp_path):
    cache = ResultCache(tmp_path)
    loaded = analyses.open_model(ModelChoice(str(neox_folder)), CPU)
    sampling, settings = Sampling(256, window=64), pga_settings(32)
    quick = preview_settings(settings, 32)
    exact = analyses.model_pga(loaded, builtin_corpus(), sampling, settings, compute=CPU, cache=cache)
    preview = analyses.model_pga(loaded, builtin_corpus(), sampling, quick, compute=CPU, cache=cache)
    assert preview.preview and not exact.preview and "Preview" in preview.z_figure().layout.title.text
    assert analyses.model_pga(loaded, builtin_corpus(), sampling, quick, compute=CPU,
                              cache=cache, stored_only=True, memory=EngineMemory()) is None  # a preview is never stored
    remembered = analyses.model_pga(loaded, builtin_corpus(), sampling, quick, compute=CPU,
                                    cache=cache, stored_only=True)  # but remembered, and found without computing
    assert [r.z for r in remembered.results] == [r.z for r in preview.results]
    again = analyses.model_pga(loaded, builtin_corpus(), sampling, quick, compute=CPU, cache=cache)
    assert [r.z for r in again.results] == [r.z for r in preview.results]  # seeded: the same preview again
    assert not any(r.z_interval[1] - r.z_interval[0] == 0 for r in exact.at())
    assert tolerance(preview.at(), exact.at()) <= 1


class Stop(Exception):
    """What Streamlit raises inside a run when a newer move reruns the page."""


def test_stopped_work_keeps_every_finished_layer_and_nothing_else(tmp_path):
    """What a stopped run stored, ``stored_only`` finds and ``pga_stored`` (keys looked up, nothing read) says: the
    finished layers, none of another k, states or readout basis; the resumed run equals an uninterrupted one."""
    states, w_u = planted_readout(n=120)
    layers = np.stack([states * (1 + i) for i in range(4)])
    basis, cache, settings = readout_basis(w_u), ResultCache(tmp_path), pga_settings(w_u.shape[1], (8,), n_null=10)

    def stop_at_layer_two(stage, done, total):
        if done == 2:
            raise Stop

    assert not pipeline.pga_stored({"s": 1}, {"w": 1}, settings, [0], cache)
    with pytest.raises(Stop):
        pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, settings, [0, 1, 2, 3], cache=cache,
                            progress=stop_at_layer_two)
    for asked in ([0], [0, 1], [2], [0, 1, 2, 3]):
        found = pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, settings, asked, cache=cache, stored_only=True)
        assert (found is not None) == (asked in ([0], [0, 1]))
        assert pipeline.pga_stored({"s": 1}, {"w": 1}, settings, asked, cache) == (found is not None)
    resumed = pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, settings, [0, 1, 2, 3], cache=cache)
    assert pipeline.pga_stored({"s": 1}, {"w": 1}, settings, [0, 1, 2, 3], cache)
    whole = pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, settings, [0, 1, 2, 3],
                                cache=ResultCache(tmp_path / "other"))
    assert [r.z for r in resumed] == [r.z for r in whole]
    other_k = pga_settings(w_u.shape[1], (4,), n_null=10)
    for elsewhere in (({"s": 1}, {"w": 1}, other_k), ({"s": 2}, {"w": 1}, settings), ({"s": 1}, {"w": 2}, settings)):
        assert not pipeline.pga_stored(*elsewhere, [0], cache)


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
    pauses.clear()  # the first run drew the null bases too, with pauses between their chunks
    pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, settings, [0], cache=ResultCache(tmp_path / "c"), slot=slot)
    per_layer, cache = len(pauses), ResultCache(tmp_path / "b")  # the draws remembered: a layer's own pauses
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
    grid = (1, 2, 4, 8, 16)
    assert along_sliders(grid, 4, 2, reach=1) == [(2, 2), (8, 2), (4, 1), (4, 3)]
    every = along_sliders(grid, 4, 2)
    assert every[:4] == along_sliders(grid, 4, 2, reach=1)
    assert len(every) == len(set(every)) and (4, 2) not in every
    assert set(every) == {(k, 2) for k in grid if k != 4} | {(4, c) for c in range(11) if c != 2}
    assert every.index((16, 2)) < every.index((4, 6)) < every.index((4, 10))  # both slider ends are reached
    assert along_sliders(grid, 16, 0, reach=2) == [(8, 0), (16, 1), (4, 0), (16, 2)]
    assert nearby(grid, 4, 2) == [(2, 2), (8, 2), (4, 1), (4, 3), (1, 2), (16, 2), (4, 0), (4, 10)]
    assert nearby(grid, 16, 0) == [(8, 0), (16, 1), (1, 0), (16, 10)]  # at an end: the other ends


def test_previews_remembered_layer_by_layer_make_the_next_move_instant(monkeypatch):
    states, w_u = planted_readout(n=200, seed=5)
    layers = np.stack([states, states * 0.5 + 0.1, states + 1.0])
    basis, settings = readout_basis(w_u), preview_settings(pga_settings(w_u.shape[1], (8,), (1,)), w_u.shape[1])
    memory = EngineMemory()
    ahead = [pipeline.cached_pga(layers, {"s": "ahead"}, basis, {"w": 1}, settings, [layer], memory=memory)[0]
             for layer in range(3)]
    real, calls = pipeline.pga_sweep, []
    monkeypatch.setattr(pipeline, "pga_sweep", lambda *a, **kw: calls.append(a[3]) or real(*a, **kw))
    move = pipeline.cached_pga(layers, {"s": "ahead"}, basis, {"w": 1}, settings, [0, 1, 2], memory=memory)
    assert not calls and move == ahead  # the move's preview computed nothing
    fresh = pga_sweep(layers, basis, settings, memory=EngineMemory())
    assert [r.z for r in move] == [r.z for r in fresh]  # the same numbers as computing it now
    noisy = layers + np.random.default_rng(0).normal(size=layers.shape)
    other = pipeline.cached_pga(noisy, {"s": "other"}, basis, {"w": 1}, settings, [0, 1], memory=memory)
    assert calls == [[0], [1]] and [r.z for r in other] != [r.z for r in move[:2]]  # other states: computed anew
    assert memory.count("preview") == 5

    shifted, before = layers + 2.0, memory.count("preview")

    @contextlib.contextmanager
    def stopped_after_one_layer():  # a preview ahead that a move stops once it has finished layer 0
        def pause():
            if memory.count("preview") > before:
                raise Stop
        yield pause

    with pytest.raises(Stop):
        pipeline.cached_pga(shifted, {"s": "shifted"}, basis, {"w": 1}, settings, [0, 1, 2],
                            slot=stopped_after_one_layer, memory=memory)
    calls.clear()
    pipeline.cached_pga(shifted, {"s": "shifted"}, basis, {"w": 1}, settings, [0, 1, 2], memory=memory)
    assert calls == [[1], [2]]  # the move's preview finds the finished layer


def test_the_engine_memory_keeps_to_its_byte_limit_least_recently_used_first_out():
    memory = EngineMemory(limit_bytes=3 * 800)
    for key in "abc":
        memory.put("array", key, np.zeros(100))  # 800 bytes each
    assert memory.get("array", "a") is not None  # "a" is now the most recently used
    memory.put("array", "d", np.zeros(100))
    assert memory.get("array", "b") is None and memory.count("array") == 3 and memory.used == 2400
    made = []
    assert memory.remember("array", "e", lambda: made.append(1) or np.ones(300)).shape == (300,)
    assert memory.count("array") == 1 and made == [1]  # larger than the limit: kept alone, the rest gone
    assert memory.remember("array", "e", lambda: made.append(1)) is not None and made == [1]
    states, w_u = planted_readout(n=120, seed=6)
    small = EngineMemory(limit_bytes=200_000)
    pga_sweep(np.stack([states] * 4), readout_basis(w_u), pga_settings(w_u.shape[1], (8,), n_null=10), memory=small)
    assert small.used <= 200_000 or len(small.items) == 1  # PCAs and bases of a sweep, bounded


def test_a_copy_of_the_engine_memory_holds_its_values_and_goes_its_own_way():
    memory = EngineMemory(limit_bytes=4 * 800)
    for kind, key in [("pca", 0), ("rows key", 0), ("candidate bases", 0)]:
        memory.put(kind, key, np.zeros(100))  # 800 bytes each
    memory.hand_over("sweep", 0, np.ones(3))
    whole, pcas = memory.copy(), memory.copy(("pca", "rows key"))
    assert list(whole.items) == list(memory.items) and whole.used == 2400 and whole.limit_bytes == memory.limit_bytes
    assert whole.get("pca", 0) is memory.get("pca", 0)  # the same value, not a copy of it
    assert [kind for kind, _ in pcas.items] == ["pca", "rows key"] and pcas.used == 1600
    assert pcas.take("sweep", 0) is None and whole.take("sweep", 0).sum() == 3  # handed over: only with every kind
    whole.put("array", "new", np.zeros(200))  # 1600 bytes: pushes the copy's least recent out, not the original's
    assert whole.get("rows key", 0) is None and memory.get("rows key", 0) is not None and memory.count("array") == 0
    assert memory.take("sweep", 0).sum() == 3  # the copy's take left the original's hand-over in place


def test_work_nobody_waits_for_remembers_only_what_fits_and_pushes_nothing_out():
    memory = EngineMemory(limit_bytes=3 * 800)
    for key in "ab":
        memory.put("array", key, np.zeros(100))  # 800 bytes each
    modest = ModestMemory(memory)
    modest.put("array", "c", np.zeros(100))  # fits beside them: remembered
    assert modest.put("array", "d", np.ones(100)).sum() == 100  # does not fit: handed back, not remembered
    assert modest.remember("array", "e", lambda: np.ones(100)).sum() == 100
    assert [key for _, key in memory.items] == ["a", "b", "c"] and memory.used == 2400
    assert modest.get("array", "a") is not None and modest.limit_bytes == memory.limit_bytes
    assert list(modest.copy().items) == list(memory.items)


def _bases_at(memory: EngineMemory, k: int) -> int:
    return sum(1 for kind, key in memory.items if kind == "candidate bases" and key[0][1] == k)


@pytest.mark.parametrize("fill_memory", [ModestMemory, lambda memory: memory])
def test_a_background_fill_leaves_the_visitors_candidate_bases_in_memory(fill_memory):
    states, w_u = planted_readout(n=120, seed=6)
    layers, basis = np.stack([states] * 2), readout_basis(w_u)
    memory = EngineMemory(limit_bytes=2**30)
    pga_sweep(layers, basis, pga_settings(w_u.shape[1], (16,), n_null=10), memory=memory)  # the visitor's move
    memory.limit_bytes = memory.used + 1000  # full: the fill's bases at k = 8 do not fit beside the visitor's
    fill = pga_settings(w_u.shape[1], (8,), n_null=10)
    filled = pga_sweep(layers, basis, fill, memory=fill_memory(memory))
    alone = pga_sweep(layers, basis, fill, memory=EngineMemory())
    assert [(r.rho_readout, r.z) for r in filled] == [(r.rho_readout, r.z) for r in alone]
    kept = _bases_at(memory, 16) == 1 and _bases_at(memory, 8) == 0
    assert kept == (fill_memory is ModestMemory)  # an ordinary fill pushes the visitor's bases out
    assert memory.used <= memory.limit_bytes


@pytest.mark.parametrize("gpu_gib, expected_mb", [(None, 1024), (4, 1024), (139, 139 * 1024 // 8)])
def test_the_engine_memorys_default_limit_is_an_eighth_of_a_large_gpu_else_1024_mb(monkeypatch, gpu_gib, expected_mb):
    monkeypatch.delenv("RG_ENGINE_MEMORY_MB", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu_gib is not None)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda index: types.SimpleNamespace(total_memory=(gpu_gib or 0) * 2**30))
    assert default_limit_mb() == expected_mb
    monkeypatch.setenv("RG_ENGINE_MEMORY_MB", "300")  # the setting wins either way
    assert default_limit_mb() == 300


class Script:
    """Threads that each take the admission slot and log that they ran."""

    def __init__(self, admission):
        self.admission, self.log = admission, []

    def thread(self, name, priority, owner=None):
        def work():
            with self.admission.hold(priority, name, owner=owner):
                self.log.append(name)

        return threading.Thread(target=work, name=name)


def waiting(admission, count):
    """Block until ``count`` requests wait (an event of the policy, not a time)."""
    with admission.condition:
        admission.condition.wait_for(lambda: len(admission.waiting) >= count, timeout=30)
    assert len(admission.waiting) >= count


def test_one_computation_at_a_time_by_priority_then_in_order_of_asking():
    admission = Admission()
    script = Script(admission)
    with admission.hold(Priority.PAGE, "first"):  # holds while the others ask, in this order
        threads = [script.thread("fill", Priority.BACKGROUND), script.thread("exact", Priority.NEXT),
                   script.thread("preview", Priority.PREVIEW), script.thread("load", Priority.PAGE),
                   script.thread("exact 2", Priority.NEXT)]
        for number, thread in enumerate(threads, 1):
            thread.start()
            waiting(admission, number)
    for thread in threads:
        thread.join()
    assert script.log == ["preview", "load", "exact", "exact 2", "fill"]


def test_while_a_page_is_drawn_its_own_work_runs_and_work_outside_it_waits():
    admission = Admission()
    script = Script(admission)
    admission.quiet(60)
    outside = [script.thread("exact", Priority.NEXT), script.thread("fill", Priority.BACKGROUND)]
    for thread in outside:
        thread.start()
    waiting(admission, 2)
    inside = [script.thread("load", Priority.PAGE), script.thread("preview", Priority.PREVIEW)]
    for thread in inside:
        thread.start()
        thread.join()
    assert script.log == ["load", "preview"] and len(admission.waiting) == 2
    admission.quiet(0)  # the page is drawn
    for thread in outside:
        thread.join()
    assert script.log == ["load", "preview", "exact", "fill"]


def test_each_visitors_quiet_holds_its_own_work_and_only_its_own_call_ends_it():
    admission = Admission()
    script = Script(admission)
    admission.quiet(60, "visitor A")  # A's page is drawn, its browser renders it
    admission.quiet(60, "visitor B")  # B's page run starts
    exact_a = script.thread("exact A", Priority.NEXT, "visitor A")
    exact_b = script.thread("exact B", Priority.NEXT, "visitor B")
    exact_a.start()
    waiting(admission, 1)
    admission.quiet(0, "visitor B")  # B's page is drawn: A's quiet stands, and holds A's exact curve
    with admission.condition:
        assert not admission.condition.wait_for(lambda: script.log, timeout=0.3)
    admission.quiet(60, "visitor B")  # B's next page run
    exact_b.start()
    waiting(admission, 2)
    admission.quiet(0, "visitor A")  # A's page is drawn: B's quiet does not hold A's work
    exact_a.join(30)
    assert script.log == ["exact A"] and len(admission.waiting) == 1
    admission.quiet(0, "visitor B")
    exact_b.join(30)
    assert script.log == ["exact A", "exact B"] and not admission.quiet_until


def test_a_stream_of_another_visitors_page_runs_does_not_stall_a_visitors_exact_curve():
    """A visitor (or a script) rerunning pages back to back keeps its own quiet alive; every other visitor's work
    outside its page run still runs."""
    admission, stop = Admission(), threading.Event()
    script = Script(admission)

    def reruns():
        while not stop.is_set():
            admission.quiet(10, "rerunning visitor")  # a page run starts, and another before it is drawn
            time.sleep(0.01)

    rerunning = threading.Thread(target=reruns)
    rerunning.start()
    try:
        exact = script.thread("exact", Priority.NEXT, "visitor")
        its_own = script.thread("its own fill", Priority.BACKGROUND, "rerunning visitor")
        its_own.start()
        exact.start()
        exact.join(30)
        assert script.log == ["exact"]  # its own background work is held, as long as it reruns
    finally:
        stop.set()
        rerunning.join()
    admission.quiet(0, "rerunning visitor")
    its_own.join(30)
    assert script.log == ["exact", "its own fill"]


class Clock:
    """A stand-in for ``time`` in the admission policy: the work in a test advances it, so use is counted exactly."""

    def __init__(self):
        self.now, self.lock = 1000.0, threading.Lock()

    def monotonic(self):
        return self.now

    def advance(self, seconds):
        with self.lock:
            self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    import dashboard.admission

    clock = Clock()
    monkeypatch.setattr(dashboard.admission, "time", clock)
    return clock


def ranked(admission, clock, first, second):
    """The order in which ``first`` and ``second`` ((name, priority, owner)), asking in that order while a third
    visitor holds the slot, run."""
    script = Script(admission)
    with admission.hold(Priority.PAGE, "a third visitor's page", owner="C"):
        threads = [script.thread(*first), script.thread(*second)]
        for number, thread in enumerate(threads, 1):
            thread.start()
            waiting(admission, number)
    for thread in threads:
        thread.join(30)
    return script.log


def test_against_another_visitor_a_request_ranks_by_its_visitors_recent_use_plus_its_prioritys_lead(clock):
    from dashboard.admission import HALF_LIFE, LEAD

    def after_use(seconds, ago=0.0):
        admission = Admission()
        with admission.hold(Priority.PAGE, "B's triage", owner="B"):
            clock.advance(seconds)
        clock.advance(ago)
        return admission

    exact_a, preview_b = ("exact A", Priority.NEXT, "A"), ("preview B", Priority.PREVIEW, "B")
    assert ranked(after_use(1.0), clock, exact_a, preview_b) == ["preview B", "exact A"]  # a preview goes first
    assert ranked(after_use(LEAD[Priority.NEXT] + 1), clock, exact_a, preview_b) == ["exact A", "preview B"]
    # the same use, long enough ago to count an eighth: the preview goes first again
    assert ranked(after_use(LEAD[Priority.NEXT] + 1, ago=3 * HALF_LIFE), clock, exact_a, preview_b) == [
        "preview B", "exact A"]
    # one visitor's own requests: by priority alone, whatever its use
    assert ranked(after_use(100.0), clock, ("exact B", Priority.NEXT, "B"), preview_b) == ["preview B", "exact B"]
    # background work comes after every other request, whoever asked and however much
    assert ranked(after_use(100.0), clock, ("fill A", Priority.BACKGROUND, "A"), ("exact B", Priority.NEXT, "B")) == [
        "exact B", "fill A"]


def test_a_visitor_asking_for_preview_after_preview_takes_turns_with_another_visitors_exact_curve(clock):
    """A stream of one visitor's previews (each 0.2 s, the next asked at once) held another visitor's exact curve off
    until the stream ended; by their use of the slot they now take turns."""
    admission, log = Admission(), []

    def previews():
        for _ in range(300):
            with admission.hold(Priority.PREVIEW, "preview", owner="B"):
                clock.advance(0.2)
                log.append("B")

    def exact():
        with admission.hold(Priority.NEXT, "exact", owner="A") as pause:
            for _ in range(100):  # 2 s of work, a pause point every 0.02 s
                clock.advance(0.02)
                log.append("A")
                pause()

    threads = [threading.Thread(target=exact), threading.Thread(target=previews)]
    with admission.hold(Priority.PAGE, "a third visitor's page", owner="C"):  # both ask before either runs
        for number, thread in enumerate(threads, 1):
            thread.start()
            waiting(admission, number)
    for thread in threads:
        thread.join(60)
    done = len(log) - log[::-1].index("A")
    assert log[:10] == ["B"] * 10  # B's first previews go before A's exact curve
    assert log[:done].count("B") < 50  # before, all 300 did
    turns = sum(1 for before, after in zip(log[:done - 1], log[1:done], strict=True) if before != after)
    assert turns >= 3  # taking turns: not all of B's previews, then all of A


def test_a_preview_ahead_before_an_exact_curve_asks_as_the_exact_curve_does(clock):
    """A session's thread runs its list in order, so work before the exact curve asks at the exact curve's priority:
    another visitor's previews (more use lately) do not hold it off, also when the list changes while it waits."""
    from dashboard.background import Background, Task

    admission, log = Admission(), []
    with admission.hold(Priority.PAGE, "B's triage", owner="B"):
        clock.advance(20.0)

    def task(name, priority):
        return Task(name, name, priority, lambda *_: log.append(name), "M")

    worker = Background(admission, "A")
    script = Script(admission)
    script.log = log  # one log for both visitors
    with admission.hold(Priority.PAGE, "a third visitor's page", owner="C"):
        worker.replace([task("ahead", Priority.BACKGROUND)])
        waiting(admission, 1)  # A's thread waits, as background work
        preview = script.thread("preview B", Priority.PREVIEW, "B")
        preview.start()
        waiting(admission, 2)
        worker.replace([task("ahead", Priority.BACKGROUND), task("exact", Priority.NEXT)])  # a move of A's
    preview.join(30)
    worker.join(30)
    assert log == ["ahead", "exact", "preview B"]  # as background work, the preview ahead came after B's preview


def test_a_page_run_a_newer_move_superseded_leaves_the_queue_and_stops_its_work_at_its_next_pause():
    """Streamlit starts a new script run beside one still waiting or computing (fast reruns) and tells the old one to
    stop: its request leaves the queue at once, and work it holds stops at its next pause point."""
    admission, log, superseded = Admission(), [], threading.Event()

    class Stopped(BaseException):
        pass

    def leave():
        if superseded.is_set():
            raise Stopped

    def stale_preview():
        try:
            with admission.hold(Priority.PREVIEW, "stale preview", "A", "visitor", leave):
                log.append("stale preview")
        except Stopped:
            log.append("left the queue")

    with admission.hold(Priority.NEXT, "exact", "A", "another visitor") as pause:
        stale = threading.Thread(target=stale_preview)
        stale.start()
        waiting(admission, 1)
        superseded.set()
        stale.join(30)
        assert log == ["left the queue"] and not admission.waiting
        pause()  # nothing waits: the exact run carries on
    superseded.clear()
    with pytest.raises(Stopped), admission.hold(Priority.PREVIEW, "preview", "A", "visitor", leave) as pause:
        pause()
        superseded.set()
        pause()  # the work stops here
        log.append("went on")
    assert log == ["left the queue"] and admission.holder is None and not admission.models


def test_a_stop_streamlit_asks_of_a_script_run_is_read_from_its_requests():
    from streamlit.runtime.scriptrunner_utils.script_requests import RerunData, ScriptRequests

    from dashboard.compute import stop_requested

    requests = ScriptRequests()
    assert not stop_requested(requests) and not stop_requested(None)
    requests.request_rerun(RerunData())
    assert not stop_requested(requests)  # a rerun request is Streamlit's to act on
    requests.request_stop()
    assert stop_requested(requests)


def test_a_sessions_background_work_is_its_own_to_the_quiet():
    """The session's background thread asks for the slot as that session: another visitor's page run does not hold
    its exact curve; its own does."""
    from dashboard.background import Background, Task

    admission, done = Admission(), threading.Event()
    admission.quiet(60, "another visitor")
    worker = Background(admission, "visitor")
    worker.replace([Task("k = 4, CCR-1", "Exact curve", Priority.NEXT, lambda *_: done.set(), "A", shows=True)])
    assert done.wait(30)
    worker.join(30)
    admission.quiet(60, "visitor")
    done.clear()
    worker.replace([Task("k = 8, CCR-1", "Exact curve", Priority.NEXT, lambda *_: done.set(), "A", shows=True)])
    assert not done.wait(0.5)
    admission.quiet(0, "visitor")
    assert done.wait(30)
    worker.join(30)


def test_a_visitor_who_leaves_stops_the_sessions_work_at_its_next_pause_and_its_return_resumes_it():
    from dashboard.background import Background, Task

    here, paused, steps = threading.Event(), threading.Event(), []
    here.set()

    def exact(progress, slot):
        for layer in range(1000):
            with slot() as pause:
                pause()
            steps.append(layer)
            if layer == 3:
                paused.set()
                while here.is_set():
                    time.sleep(0.01)

    def tasks():
        return [Task("k = 4, CCR-1", "Exact curve", Priority.NEXT, exact, "A", shows=True),
                Task("k = 2, CCR-1", "Previews ahead", Priority.BACKGROUND, lambda *_: steps.append("ahead"), "A")]

    worker = Background(Admission(), "visitor", here.is_set)
    worker.replace(tasks())
    assert paused.wait(30)
    here.clear()  # the tab loses its connection
    worker.join(30)
    assert steps == [0, 1, 2, 3] and [task.state for task in worker.tasks] == ["waiting", "waiting"]
    here.set()  # it reconnects: the status line's next refresh resumes the work
    paused.clear()
    worker.resume()
    assert paused.wait(30)
    assert worker.tasks[0].state == "running" and worker.tasks[1].state == "waiting"
    here.clear()
    worker.join(30)
    here.set()  # or the page's rerun asks for the same work again
    paused.clear()
    worker.replace(tasks())
    assert paused.wait(30)
    assert worker.tasks[0].state == "running" and steps[-1] == 3
    steps.clear()
    here.clear()
    worker.join(30)


def test_a_quiet_that_only_extends_leaves_a_longer_one_standing():
    admission = Admission()
    admission.quiet(60, "visitor")  # a page run
    admission.quiet(1, "visitor", extend=True)
    assert admission.quiet_until["visitor"] - time.monotonic() > 50
    admission.quiet(1, "visitor")  # the page is drawn: its own call shortens it
    admission.quiet(30, "visitor", extend=True)
    assert 20 < admission.quiet_until["visitor"] - time.monotonic() <= 30
    admission.quiet(0, "visitor", extend=True)
    assert admission.quiet_until["visitor"] - time.monotonic() > 20
    admission.quiet(0, "visitor")
    assert not admission.quiet_until


def test_a_shown_result_done_quiets_its_session_until_the_page_rerun_draws_it(monkeypatch):
    """When the exact curve is done, the session's next task (a preview ahead) does not take the cores it frees: it
    waits for the page's rerun (here its quiet ending), not beside it; another session's quiet is not touched."""
    from dashboard import background
    from dashboard.background import Background, Task

    monkeypatch.setattr(background, "RERUN_SECONDS", 60.0)
    admission, ahead = Admission(), threading.Event()
    admission.quiet(0.5, "another visitor")
    worker = Background(admission, "visitor")
    worker.replace([Task("k = 4, CCR-1", "Exact curve", Priority.NEXT, lambda progress, slot: None, "A", shows=True),
                    Task("k = 2, CCR-1", "Previews ahead", Priority.BACKGROUND, lambda *_: ahead.set(), "A")])
    with worker.changed:
        assert worker.changed.wait_for(lambda: worker.tasks[0].state == "done", timeout=30)
    assert not ahead.wait(1.0)  # the other visitor's quiet is over: this session's own holds it
    assert admission.quiet_until["visitor"] - time.monotonic() > 50
    admission.quiet(10, "visitor")  # the rerun starts: its page's quiet replaces it
    admission.quiet(0, "visitor")  # and the page is drawn
    assert ahead.wait(30)
    worker.join(30)


def test_long_work_steps_aside_for_a_preview_at_its_next_pause_and_carries_on():
    admission, log = Admission(), []

    def exact():
        with admission.hold(Priority.NEXT, "exact", "model-a") as pause:
            for step in range(6):
                log.append(("exact", step))
                if step == 2:  # a preview asks in the middle of the work
                    preview_thread.start()
                    waiting(admission, 1)
                pause()

    def preview():
        with admission.hold(Priority.PREVIEW, "preview", "model-a"):
            log.append(("preview", admission.models["model-a"]))

    preview_thread = threading.Thread(target=preview)
    exact_thread = threading.Thread(target=exact)
    exact_thread.start()
    exact_thread.join()
    preview_thread.join()
    assert log == [("exact", 0), ("exact", 1), ("exact", 2), ("preview", 2), ("exact", 3), ("exact", 4), ("exact", 5)]
    # the preview ran at the exact run's next pause, both on model-a (2 holds), and the exact work carried on


def test_a_second_model_waits_for_the_work_on_the_first_while_previews_of_the_first_go_ahead():
    admission = Admission(resident_models=1)
    log = []

    def exact():
        with admission.hold(Priority.NEXT, "exact on A", "A") as pause:
            for step in range(4):
                log.append(("exact A", step, sorted(admission.models)))
                if step == 1:
                    load.start()
                    waiting(admission, 1)
                    preview.start()
                    waiting(admission, 2)
                pause()

    def hold(name, priority, model):
        def work():
            with admission.hold(priority, name, model):
                log.append((name, None, sorted(admission.models)))
        return threading.Thread(target=work)

    load, preview = hold("load B", Priority.PAGE, "B"), hold("preview A", Priority.PREVIEW, "A")
    assert admission.waits(Priority.PAGE, "B") is None
    first = threading.Thread(target=exact)
    first.start()
    first.join()
    load.join()
    preview.join()
    assert [entry[0] for entry in log] == ["exact A", "exact A", "preview A", "exact A", "exact A", "load B"]
    assert all(models in (["A"], ["B"]) for *_, models in log)  # never two models in use at once
    assert not admission.models and not admission.waiting and admission.holder is None


def test_nested_holds_in_one_thread_are_one_hold():
    admission = Admission()
    with admission.hold(Priority.NEXT, "outer", "A") as outer:
        with admission.hold(Priority.PREVIEW, "inner", "A") as inner:
            inner()
            outer()
        assert admission.models["A"] == 1
    assert admission.holder is None and not admission.models


def test_a_progress_bar_is_sent_at_each_new_step_and_at_most_every_quarter_second_within_one(monkeypatch):
    from dashboard import compute

    sent, now = [], [100.0]
    monkeypatch.setattr(compute.st, "progress", lambda *shown: types.SimpleNamespace(
        progress=lambda *shown: sent.append(" ".join(re.findall(r"[a-z]+|\d+", shown[1])[:2]))))
    monkeypatch.setattr(compute.time, "monotonic", lambda: now[0])
    bar = compute.Bar("work")
    for step, total in (("layers", 10), ("bootstrap", 5)):
        for done in range(total):
            bar(step, done, total)
            now[0] += 0.1  # a quarter second is 2.5 reports
        bar.touch()  # a pause point, as often as the engine calls it: no send of its own
    assert sent == ["layers 0", "layers 3", "layers 6", "layers 9", "bootstrap 0", "bootstrap 3"]


def test_the_resident_models_are_bounded_and_the_released_one_named():
    admission = Admission(resident_models=1)
    assert admission.resident("a", "model A") == []
    assert admission.resident("a", "model A") == []
    assert admission.resident("b", "model B") == ["model A"]
    two = Admission(resident_models=2)
    assert [two.resident(i, i) for i in "abca"] == [[], [], ["a"], ["b"]]


def test_the_page_ends_its_run_on_the_preview_then_shows_the_exact_curve_and_fills_in_the_neighbours(tiny_models):
    from dashboard import compute

    model = tiny_models[("gpt2", False)]
    compute.policy().used.clear()
    app = run_page("pages/readout.py", settle=False, model=model, n_tokens=128, k=4, seed=3)
    assert not app.exception and not app.error
    assert "Preview" in chart_specs(app)[0]  # the run ended with the preview drawn
    worker = app.session_state["background"]
    assert [task.group for task in worker.tasks].count("Exact curve") == 1
    assert set(compute.policy().used) == {worker.owner}  # the page run's load, states and preview were its session's
    settled(app)
    assert "Preview" not in chart_specs(app)[0]  # the exact curve replaced the preview
    line = [shown(c.value) for c in app.caption if "Previews ahead" in shown(c.value)]
    assert len(line) == 1 and " ready" in line[0]  # one quiet line, no progress bars
    assert not app.get("progress")
    view = compute.ViewState(model=str(model), n_tokens=128, seed=3)
    loaded = analyses.open_model(view.choice, CPU)
    states = analyses.model_hidden_states(loaded, builtin_corpus(), view.sampling, CPU)
    for k, ccr in nearby(k_grid(32), 4, 1):
        assert analyses.model_pga(loaded, builtin_corpus(), view.sampling, pga_settings(32, (k,), (ccr,), seed=3),
                                  compute=CPU, states=states, stored_only=True) is not None


def test_the_page_previews_every_setting_along_both_sliders_in_memory(tiny_models, monkeypatch):
    from dashboard import compute

    model = tiny_models[("gpt_neox", False)]
    app = run_page("pages/readout.py", model=model, n_tokens=128, k=8, ccr=2, seed=11)
    assert not app.exception and not app.error
    view = compute.ViewState(model=str(model), n_tokens=128, seed=11)
    loaded = analyses.open_model(view.choice, CPU)
    states = analyses.model_hidden_states(loaded, builtin_corpus(), view.sampling, CPU)
    monkeypatch.setattr(pipeline, "pga_sweep", None)  # anything computed now would fail
    for k, ccr in along_sliders(k_grid(32), 8, 2):
        if k == 1:  # drawn exact at once, not previewed (the next test)
            continue
        settings = preview_settings(pga_settings(32, (k,), (ccr,), seed=11), 32)
        run = analyses.model_pga(loaded, builtin_corpus(), view.sampling, settings, compute=CPU, states=states)
        assert run.preview and len(run.results) == states.value.n_layers


def test_a_page_previews_at_a_few_exact_layers_where_ranking_is_most_of_the_work():
    """Up to k = 16 and N = 512: the first, the last, every sixth of the way and the layer shown; else blocks."""
    small = pga_settings(576, (8,))
    assert preview_layers(small, 512, 31, 15) == [0, 5, 10, 15, 20, 25, 30]
    assert preview_layers(small, 512, 31, 7) == [0, 5, 7, 10, 15, 20, 25, 30]
    assert preview_layers(small, 256, 25, -1) == [0, 4, 8, 12, 16, 20, 24]
    assert preview_layers(small, 512, 17, 8) == [0, 3, 6, 8, 9, 12, 15, 16]
    assert preview_layers(pga_settings(576, (16,)), 129, 15, 0) == [0, 3, 6, 9, 12, 14]
    assert preview_layers(pga_settings(576, (32,)), 512, 31, 15) is None  # above k = 16
    assert preview_layers(pga_settings(576, (8, 32)), 512, 31, 15) is None
    assert preview_layers(small, 513, 31, 15) is None  # the pairs inside blocks: less than a quarter of all pairs
    assert preview_layers(small, 512, 13, 6) is None  # seven layers of 13: the exact run nearly
    order = preview_order(31, 7)  # on blocks: the ends and the shown layer, then the one farthest from those before
    assert order[:7] == [0, 30, 7, 18, 24, 12, 3] and sorted(order) == list(range(31))
    assert preview_order(4, 1) == [0, 3, 1, 2] and preview_order(3, -1) == [0, 2, 1]


@pytest.fixture(scope="module")
def deep_model(tokenizer, tmp_path_factory):
    """A random GPT-NeoX of d = 32 and 16 blocks: 17 entries, enough for a preview at a few of them."""
    return save_tiny_model(tmp_path_factory.mktemp("deep") / "model", "gpt_neox", tokenizer, n_layers=16)


def test_the_page_draws_a_preview_made_ahead_else_the_exact_run_at_a_few_layers_else_on_blocks(tiny_models,
                                                                                                deep_model,
                                                                                                monkeypatch):
    """Up to k = 16 a preview made ahead scores the exact sweep's first draws on every pair (the exact run continues
    it); the page draws that one when it is remembered. Else it makes the quickest itself: the exact run at a few
    layers and the one it shows (stored: the exact run then computes only the others), or, on a model of few layers,
    on 128-token blocks."""
    from dashboard import compute

    def page(model, k: int, seed: int, **query):
        app = run_page("pages/readout.py", settle=False, model=model, n_tokens=256, k=k, ccr=2, seed=seed, **query)
        tasks = [task.group for task in app.session_state["background"].tasks]
        app.session_state["background"].replace([])
        assert not app.exception and "Preview" in chart_specs(app)[0]
        assert "Exact curve" in tasks
        return app, " ".join(shown(c.value) for c in app.caption)

    model = tiny_models[("gpt_neox", False)]
    assert "16,256 pairs inside blocks of 128 tokens, 30 null draws" in page(model, 4, 21)[1]  # 4 layers
    view = compute.ViewState(model=str(model), n_tokens=256, seed=22)
    loaded = analyses.open_model(view.choice, CPU)
    states = analyses.model_hidden_states(loaded, builtin_corpus(), view.sampling, CPU)
    ahead = preview_settings(pga_settings(32, (8,), (2,), seed=22), 32)  # as the previews ahead make it
    analyses.model_pga(loaded, builtin_corpus(), view.sampling, ahead, compute=CPU, states=states)
    assert "Preview on 32,640 pairs, 30 null draws" in page(model, 8, 22)[1]

    app, caption = page(deep_model, 4, 23, layer=4)
    assert "Preview on 32,640 pairs (exact), at 8 of 17 layers (the others follow)" in caption
    assert "Layer 4: rho_readout" in caption
    z = charts(app)[0]["data"][0]
    assert decode(z["x"]) == [0, 3, 4, 6, 9, 12, 15, 16]
    view = compute.ViewState(model=str(deep_model), n_tokens=256, seed=23)
    loaded = analyses.open_model(view.choice, CPU)
    states = analyses.model_hidden_states(loaded, builtin_corpus(), view.sampling, CPU)
    exact = pga_settings(32, (4,), (2,), seed=23)
    computed = []
    sweep = pipeline.pga_sweep
    monkeypatch.setattr(pipeline, "pga_sweep", lambda *a, **kw: computed.extend(a[3]) or sweep(*a, **kw))
    run = analyses.model_pga(loaded, builtin_corpus(), view.sampling, exact, compute=CPU, states=states)
    assert computed == [1, 2, 5, 7, 8, 10, 11, 13, 14]  # the exact run: only the layers the preview left
    assert [r.z for r in run.at()][4] == pytest.approx(decode(z["y"])[2])


def test_above_n_512_the_page_previews_on_blocks_a_few_layers_first_then_more_while_it_is_quick(deep_model,
                                                                                                  monkeypatch):
    """Where the exact run at a few layers would not pay, the page's own preview is on blocks: at the few layers
    first, then at more while it has taken less than ``PREVIEW_SECONDS`` (a jump to a wide k: its first chart in
    about a second, not after every layer's projections)."""
    from dashboard import compute

    def page(seed: int):
        app = run_page("pages/readout.py", settle=False, model=deep_model, n_tokens=1024, k=8, ccr=2, seed=seed,
                       layer=5)
        app.session_state["background"].replace([])
        assert not app.exception and "Preview" in chart_specs(app)[0]
        layers = decode(charts(app)[0]["data"][0]["x"])
        return layers, " ".join(shown(c.value) for c in app.caption)

    layers, caption = page(24)  # a tiny model: every layer within the time
    assert layers == list(range(17)) and "inside blocks of 128 tokens, 30 null draws, k = 8, CCR-2, seed" in caption
    monkeypatch.setattr(compute, "PREVIEW_SECONDS", -1.0)  # no time for more than the few layers
    layers, caption = page(25)
    assert layers == [0, 5, 10, 13, 16]
    assert "inside blocks of 128 tokens, 30 null draws, at 5 of 17 layers (the others follow)" in caption
    monkeypatch.setattr(run_settings, "PREVIEW_FIRST_WORK", 1)  # each layer's projections large: three layers first
    layers, caption = page(26)
    assert layers == [0, 5, 16] and "at 3 of 17 layers (the others follow)" in caption


def test_a_long_exact_run_is_drawn_layer_by_layer_in_the_previews_place_and_the_page_computes_nothing_more(
        deep_model, monkeypatch):
    """The exact run computes the layers spread out from the one shown (``preview_order``); while it stores them, the
    page draws each stored layer in its preview's place (filled markers; the preview's own open) and its rerun to draw
    them computes nothing; once every layer is stored, the exact curve."""
    from dashboard import compute

    monkeypatch.setattr(compute, "PREVIEW_SECONDS", -1.0)  # the preview's five first layers, no more

    def page(layer: int = 5):
        app = run_page("pages/readout.py", settle=False, model=deep_model, n_tokens=1024, k=8, ccr=2, seed=27,
                       layer=layer)
        tasks = app.session_state["background"].tasks
        app.session_state["background"].replace([])
        assert not app.exception
        return charts(app)[0], " ".join(shown(c.value) for c in app.caption), tasks

    spec, caption, tasks = page()
    assert [task.shows_layers for task in tasks if task.group == "Exact curve"] == [True]
    z = spec["data"][0]
    assert decode(z["x"]) == [0, 5, 10, 13, 16] and set(z["marker"]["symbol"]) == {"circle-open"}

    view = compute.ViewState(model=str(deep_model), n_tokens=1024, seed=27)
    loaded = analyses.open_model(view.choice, CPU)
    states = analyses.model_hidden_states(loaded, builtin_corpus(), view.sampling, CPU)
    exact, order = pga_settings(32, (8,), (2,), seed=27), preview_order(17, 5)
    stored = analyses.model_pga(loaded, builtin_corpus(), view.sampling, exact, order[:3] + [7], CPU, states=states)
    so_far = analyses.model_pga_so_far(loaded, exact, states)
    assert [(r.layer, r.z) for r in so_far] == sorted((r.layer, r.z) for r in stored.results)
    computed = []
    sweep = pipeline.pga_sweep
    monkeypatch.setattr(pipeline, "pga_sweep", lambda *a, **kw: computed.extend(a[3]) or sweep(*a, **kw))
    spec, caption, _ = page()
    assert computed == []  # the preview's own layers are remembered, the exact ones read
    z = spec["data"][0]
    layers, symbols = decode(z["x"]), dict(zip(decode(z["x"]), z["marker"]["symbol"], strict=True))
    assert layers == [0, 5, 7, 10, 13, 16] and "Preview" in spec["layout"]["title"]["text"]
    assert [layer for layer in layers if symbols[layer] == "circle"] == [0, 5, 7, 16]
    exact_z = {r.layer: r.z for r in stored.results}
    assert [y for layer, y in zip(layers, decode(z["y"]), strict=True) if layer in exact_z] == pytest.approx(
        [exact_z[layer] for layer in (0, 5, 7, 16)])
    assert ("the exact run (523,776 pairs, 100 null draws) at 4 layers (filled markers) and 65,024 pairs inside "
            "blocks of 128 tokens, 30 null draws at 2 (open markers), 6 of 17 layers (the others follow)") in caption

    spec, _, _ = page(layer=3)  # a layer move meanwhile, to one neither previewed nor stored: previewed now
    assert 3 in computed and 3 in decode(spec["data"][0]["x"])

    analyses.model_pga(loaded, builtin_corpus(), view.sampling, exact, compute=CPU, states=states)
    computed.clear()
    spec, caption, tasks = page()
    assert "Preview" not in spec["layout"]["title"]["text"] and "Preview on" not in caption
    assert decode(spec["data"][0]["x"]) == list(range(17)) and computed == []
    assert "Exact curve" not in [task.group for task in tasks]


def test_a_preview_at_some_layers_draws_its_lower_charts_at_every_layer_whose_pca_is_at_hand(deep_model, monkeypatch):
    """A preview at five layers of seventeen draws z there, and the PC angles and spectral metrics (the lower charts)
    at every layer whose PCA the engine remembers, equal to the exact run's: only z changes when it comes."""
    from dashboard import compute

    monkeypatch.setattr(compute, "PREVIEW_SECONDS", -1.0)  # the preview's five first layers, no more
    view = compute.ViewState(model=str(deep_model), n_tokens=1024, seed=28)
    loaded = analyses.open_model(view.choice, CPU)
    states = analyses.model_hidden_states(loaded, builtin_corpus(), view.sampling, CPU)
    analyses.warm_pga(loaded, builtin_corpus(), view.sampling, pga_settings(32, seed=28), CPU, states=states)
    app = run_page("pages/readout.py", settle=False, model=deep_model, n_tokens=1024, k=8, ccr=2, seed=28, layer=5)
    app.session_state["background"].replace([])
    assert not app.exception
    z, _, pc1, heatmap, spectral = charts(app)[:5]
    previewed, every = [0, 5, 10, 13, 16], list(range(17))
    assert decode(z["data"][0]["x"]) == previewed and "Preview" in z["layout"]["title"]["text"]
    assert decode(pc1["data"][0]["x"]) == every and decode(heatmap["data"][0]["x"]) == every
    assert decode(spectral["data"][0]["x"]) == previewed  # z's panel: the preview's layers
    assert all(decode(panel["x"]) == every for panel in spectral["data"][1:])
    exact = analyses.model_pga(loaded, builtin_corpus(), view.sampling, pga_settings(32, (8,), (2,), seed=28),
                               compute=CPU, states=states)
    assert decode(pc1["data"][0]["y"]) == pytest.approx([r.pc1_angle_deg for r in exact.results], abs=1e-9)
    for panel, field in zip(spectral["data"][1:], ("rankme", "alpha_req", "isotropy", "condition_number"),
                            strict=True):
        assert decode(panel["y"]) == pytest.approx([getattr(r, field) for r in exact.results], rel=1e-9)


def test_a_previews_lower_charts_and_their_table_take_the_shapes_at_the_layers_it_lacks():
    """``PGARun.shaped``: a preview at layers 0 and 2 of 4 with the shapes of 1 and 3 draws the PC charts and the four
    spectral panels as the exact run does, z's panel at its own layers; its lower charts' table has every layer, the
    null's columns empty at 1 and 3 and the rest equal to the exact run's."""
    rng = np.random.default_rng(4)
    states, basis = rng.standard_normal((4, 300, 24)), readout_basis(rng.standard_normal((50, 24)))
    memory = EngineMemory()
    settings = pga_settings(24, (4,), (1,), n_null=20)
    exact = PGARun(tuple(pga_sweep(states, basis, settings, memory=memory)), settings)
    preview = replace(exact, results=tuple(r for r in exact.results if r.layer in (0, 2)), preview=True,
                      of_layers=4, shapes=tuple(remembered_shapes(states, basis, settings, [1, 3], memory=memory)))
    assert [r.layer for r in preview.shaped()] == [0, 1, 2, 3]
    assert preview.pc1_figure() == exact.pc1_figure() and preview.pc_heatmap() == exact.pc_heatmap()
    panels = preview.spectral_figure().data
    assert panels[0].x == (0, 2) and panels[1:] == exact.spectral_figure().data[1:]
    table, whole = preview.lower_table(), exact.lower_table()
    assert list(table.layer) == [0, 1, 2, 3] and table.z.isna().tolist() == [False, True, False, True]
    empty = [*NULL_COLUMNS, "variance_in_readout"]
    assert table.loc[[1, 3], empty].isna().all().all()
    assert table.drop(columns=empty).equals(whole.drop(columns=empty)) and table.loc[[0, 2]].equals(whole.loc[[0, 2]])


def test_the_exact_runs_layers_take_a_previews_place_and_all_of_them_are_the_exact_run():
    """``PGARun.with_exact``: the exact results replace the preview's at their layers and add the others (layer order,
    filled markers against the preview's open ones); at every layer the result is the exact run, settings and all."""
    rng = np.random.default_rng(3)
    states, w_u = rng.standard_normal((4, 300, 24)), rng.standard_normal((50, 24))
    exact_settings = pga_settings(24, (4,), (0, 1), n_null=20)
    exact = analyses.arrays_pga(states, w_u, exact_settings, device="cpu")
    preview = replace(analyses.arrays_pga(states, w_u, block_preview(exact_settings, 24), [0, 2], "cpu"),
                      preview=True, of_layers=4)

    mixed = preview.with_exact([r for r in exact.results if r.layer in (2, 3)], exact_settings)
    assert [(r.layer, r.ccr) for r in mixed.results] == [(0, 0), (0, 1), (2, 0), (2, 1), (3, 0), (3, 1)]
    assert mixed.preview and mixed.exact_layers == (2, 3) and mixed.of_layers == 4
    assert [r.z for r in mixed.results[2:]] == [r.z for r in exact.results[4:]]
    assert mixed.z_figure().data[0].marker.symbol == ("circle-open", "circle", "circle")
    assert ("Preview on the exact run (44,850 pairs, 20 null draws) at 2 layers (filled markers) and 16,256 pairs "
            "inside blocks of 128 tokens, 20 null draws at 1 (open markers), 3 of 4 layers (the others follow), k = 4, "
            "CCR 0, 1, seed 0") in mixed.describe()  # the two R in words, not one after them
    assert "the exact z may lie outside them" in mixed.error_bars()  # at layer 0, the preview's own on blocks
    assert "the exact run (44,850 pairs, 20 null draws) at 1 of 4 layers (the others follow), k = 4" in replace(
        preview, results=()).with_exact([r for r in exact.results if r.layer == 3], exact_settings).describe()

    whole = mixed.with_exact([r for r in exact.results if r.layer in (0, 1)], exact_settings)
    assert not whole.preview and whole.settings == exact_settings and whole.of_layers is None
    assert [(r.layer, r.ccr, r.z) for r in whole.results] == [(r.layer, r.ccr, r.z) for r in exact.results]
    assert whole.z_figure().data[0].marker.symbol is None and whole.describe() == exact.describe()
    assert whole.error_bars() == exact.error_bars() == "Error bars: 95 % bootstrap interval over the null draws."
    all_exact = preview.with_exact([r for r in exact.results if r.layer in (0, 2)], exact_settings)
    assert all_exact.preview and "outside" not in all_exact.error_bars()  # no layer of the preview's own left


def test_a_shown_results_layers_rerun_the_page_every_few_seconds_while_as_long_is_left(monkeypatch):
    """A task whose layers the page draws as they come (``shows_layers``) reruns the page once its time left is known
    (a second after its first layer) and then ``LAYERS_SECONDS`` apart while at least as long is left; one whose time
    left is never known, or that does not draw its layers, reruns it only when it is done."""
    from dashboard import background
    from dashboard.background import Background, Task

    page, finish = _Page(), threading.Event()
    monkeypatch.setattr(background, "st", page)
    monkeypatch.setattr(background, "LAYERS_SECONDS", 0.5)

    def long_run(progress, slot):  # a layer every 0.05 s of 1000, until finished
        for layer in range(1000):
            progress("PGA by layer", layer, 1000)
            if finish.wait(0.05):
                return

    def short_run(progress, slot):  # done within the first second after its first layer: no time left known
        for layer in range(3):
            progress("PGA by layer", layer, 3)
        time.sleep(0.5)

    def status_of(run, shows_layers: bool):
        worker = Background(Admission())
        worker.replace([Task("k = 4, CCR-1", "Exact curve", Priority.NEXT, run, "A", shows=True,
                             shows_layers=shows_layers)])
        background.show_status(worker)  # the page run's own call
        return worker, page.run_every[0]

    worker, status = status_of(long_run, True)
    begun = time.monotonic()
    with pytest.raises(_Rerun, match="app"):
        status()
    first = time.monotonic()
    assert first - begun > 0.9 and worker.tasks[0].state == "running"
    with pytest.raises(_Rerun, match="app"):
        status()
    assert time.monotonic() - first > 0.45 and worker.tasks[0].state == "running"
    finish.set()
    worker.join(30)

    for run, shows_layers in ((long_run, False), (short_run, True)):
        finish.clear()
        threading.Timer(2.0, finish.set).start()
        worker, status = status_of(run, shows_layers)
        with pytest.raises(_Rerun, match="app"):
            status()
        assert worker.tasks[0].state == "done"
        worker.join(30)


def test_at_k_1_the_page_draws_the_exact_curve_at_once_and_readies_k_1_settings_exactly_in_the_previews_place(
        tiny_models):
    """At k = 1 the exact sweep counts its tie runs, as quick as a preview: the page run draws the exact curve (no
    preview, no exact run left to the background); no k = 1 setting is previewed ahead: each is filled in exactly
    where its preview would be in the background's order (before the farther settings' previews), once. Away from
    k = 1, the slider's end at k = 1 is readied exactly among the nearby settings' previews, not after all of them."""
    model = tiny_models[("gpt_neox", False)]
    app = run_page("pages/readout.py", settle=False, model=model, n_tokens=128, k=1, ccr=2, seed=11)
    assert not app.exception and not app.error
    spec = chart_specs(app)[0]
    assert "Preview" not in spec and "k = 1" in spec
    assert not [task for task in app.session_state["background"].tasks if task.group == "Exact curve"]

    def readied_in_order(app, k: int) -> None:
        """The page's background list at (k, CCR-2) is the PCA, the null bases of the widest k wanted, each wanted
        setting once in order (a preview ahead, or at k = 1 its exact fill), then the previewed nearby settings'
        fills; its work is stopped (none of it is left to the next tests)."""
        keys = [(task.group, task.key) for task in app.session_state["background"].tasks]
        app.session_state["background"].replace([])
        near = nearby(k_grid(32), k, 2)
        wanted = list(dict.fromkeys(near + along_sliders(k_grid(32), k, 2)))
        readied = [("Previews ahead" if wk > 1 else "Nearby settings", f"k = {wk}, CCR-{c}") for wk, c in wanted]
        filled = [("Nearby settings", f"k = {wk}, CCR-{c}") for wk, c in near if wk > 1]
        ahead = [key for key in keys if key[0] != "Exact curve"]  # at k = 4, unless another test stored it
        assert ahead == [("Previews ahead", "PCA of every layer"), ("Previews ahead", "bases of k = 16"), *readied,
                         *filled]  # the bases of the k slider's end first; k = 1 in its place, once
        assert ("Nearby settings", "k = 1, CCR-2" if k == 4 else "k = 1, CCR-1") in readied[:6]

    readied_in_order(app, 1)  # no k = 1 setting previewed ahead; k = 2, CCR-2 is
    readied_in_order(run_page("pages/readout.py", settle=False, model=model, n_tokens=128, k=4, ccr=2, seed=11), 4)


def test_where_no_setting_needs_a_preview_every_setting_along_the_sliders_is_filled_in_exactly_once(tiny_models,
                                                                                                     monkeypatch):
    """As on a GPU (no preview pays at any k): the page draws the exact curve itself, and the background fills in
    every wanted setting exactly, in the order wanted, after the PCA; no preview ahead, no fill repeated after them."""
    from dashboard import compute

    monkeypatch.setattr(compute, "needs_preview", lambda device="auto", k=None: False)
    model = tiny_models[("gpt_neox", False)]
    app = run_page("pages/readout.py", settle=False, model=model, n_tokens=128, k=4, ccr=2, seed=11)
    assert not app.exception and not app.error
    assert "Preview" not in chart_specs(app)[0]
    keys = [(task.group, task.key) for task in app.session_state["background"].tasks]
    app.session_state["background"].replace([])
    wanted = dict.fromkeys(nearby(k_grid(32), 4, 2) + along_sliders(k_grid(32), 4, 2))
    assert keys == [("Previews ahead", "PCA of every layer"),
                    *(("Nearby settings", f"k = {k}, CCR-{c}") for k, c in wanted)]


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
    assert any("Nearby settings (k = 2, CCR-1) stopped: no room for k = 2" in shown(w.value) for w in app.warning)
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
    title = charts(app)[0]["layout"]["title"]["text"]
    assert "UMAP" in title and "Preview" not in title  # the preview plane was replaced

    for name in ("checkpoint-1", "checkpoint-2"):
        shutil.copytree(tiny_models[("gpt_neox", False)], tmp_path / "run" / name)
    app = run_page("pages/training.py", model=tmp_path / "run", n_tokens=128, k=4)
    assert not app.exception and not app.error
    app.select_slider(key="k").set_value(16).run()  # a new k: previewed from the cached states, then measured
    assert not app.exception and not app.error
    spec = chart_specs(app)[0]
    assert "Preview" not in spec and "k = 16" in spec


def titles(app) -> list[str]:
    return [chart["layout"]["title"]["text"] for chart in charts(app)]


def test_the_capacity_page_draws_a_preview_histogram_at_once_then_the_histogram_of_every_pair(tiny_models,
                                                                                              monkeypatch):
    monkeypatch.setattr(pipeline, "PREVIEW_ROWS", 100)  # the tiny vocabulary (512 rows) as a large one
    app = run_page("pages/capacity.py", settle=False, model=tiny_models[("llama", False)])
    assert not app.exception and not app.error
    assert {"Preview: Embedding: pairwise cosines", "Preview: Unembedding: pairwise cosines"} <= set(titles(app))
    captions = " ".join(shown(c.value) for c in app.caption)
    assert ("preview: all 4,950 pairs among 100 random rows of 512 (the histogram of all 130,816 pairs follows)"
            in captions)
    epsilon = next(m for m in app.metric if m.label == "epsilon").value  # exact from the start: the closed form
    assert [task.group for task in app.session_state["background"].tasks] == ["Cosine histogram"] * 2
    recomputed, closed_form = [], pipeline.cosine_stats
    monkeypatch.setattr(pipeline, "cosine_stats", lambda *args: recomputed.append(args) or closed_form(*args))
    settled(app)
    assert not recomputed  # the histogram of every pair takes the statistics the preview cached
    assert "Embedding: pairwise cosines" in titles(app) and not any(t.startswith("Preview") for t in titles(app))
    assert "all 130,816 pairs of 512 rows" in " ".join(shown(c.value) for c in app.caption)
    assert next(m for m in app.metric if m.label == "epsilon").value == epsilon
    monkeypatch.setattr(pipeline, "rows_histogram", None)  # both histograms stored: nothing is previewed again
    again = run_page("pages/capacity.py", settle=False, model=tiny_models[("llama", False)])
    assert not again.exception and not again.error and not any(t.startswith("Preview") for t in titles(again))
    assert not again.session_state["background"].tasks


def test_the_probes_page_draws_probes_on_a_quarter_of_the_texts_at_once_then_on_all_of_them(tiny_models):
    from analysis.activations.pooling import pooled_states
    from analysis.data.labelled import Labelled, word_order_task

    model = tiny_models[("llama", False)]
    app = run_page("pages/probes.py", settle=False, model=model, n_tokens=128, seed=5)
    assert not app.exception and not app.error
    assert titles(app) == ["Preview: Probe accuracy by layer (z follows)"]  # no hidden states yet: no z
    assert "Preview on 64 random texts of 240 (all of them follow)" in " ".join(shown(c.value) for c in app.caption)
    assert [task.group for task in app.session_state["background"].tasks] == ["Probes", "Exact curve"]
    settled(app)
    assert titles(app) == ["Probe accuracy and z by layer"]
    caption = " ".join(shown(c.value) for c in app.caption)
    assert "168 training and 72 held-out texts" in caption and "Preview" not in caption
    loaded = analyses.open_model(analyses.ModelChoice(str(model)), CPU)
    data = word_order_task()
    np.testing.assert_allclose(pipeline.model_pooled(loaded, data.texts, seed=5),  # two cached parts, in order
                               pooled_states(loaded, data.texts), rtol=1e-5, atol=1e-6)
    labels = ["a"] * 100
    for i in np.setdiff1d(np.arange(100), pipeline.preview_texts(100, 5))[:3]:
        labels[i] = "b"  # class b lies outside the preview's texts
    lopsided = Labelled(data.texts[:100], labels, "three texts of class b")
    assert analyses.model_probes(loaded, lopsided, 5, preview=True).of_texts is None  # b missing: all texts


def test_with_the_hidden_states_at_hand_the_probes_page_draws_z_at_once_then_the_probes_as_they_are_pooled(
        tiny_models, monkeypatch):
    model = tiny_models[("llama", False)]
    settled(run_page("pages/readout.py", settle=False, model=model, n_tokens=128, seed=37))  # states and z stored
    held, real = threading.Event(), pipeline.pooled_states
    monkeypatch.setattr(pipeline, "pooled_states", lambda loaded, texts, *args, **kwargs: (
        len(texts) == 64 or held.wait(60)) and real(loaded, texts, *args, **kwargs))  # all texts wait for the test
    app = run_page("pages/probes.py", settle=False, model=model, n_tokens=128, seed=37)
    assert not app.exception and not app.error
    assert titles(app) == ["Preview: z by layer (probe accuracy follows)"]  # nothing pooled in the page run
    accuracy, z = charts(app)[0]["data"]  # the accuracy axis drawn, empty
    assert not decode(accuracy["y"]) and "yaxis" not in accuracy and z["name"] == "z (readout alignment)"
    exact = run_page("pages/readout.py", settle=False, model=model, n_tokens=128, seed=37)
    assert decode(z["y"]) == pytest.approx(z_values(exact))  # the stored exact z
    assert "probe accuracy follows, once the 240 texts are pooled" in " ".join(shown(c.value) for c in app.caption)
    worker = app.session_state["background"]
    assert [task.key for task in worker.tasks] == ["64 texts first", "all 240 texts"]
    while worker.tasks[0].state != "done":
        time.sleep(0.05)
    app.run()  # as the status line reruns the page: the probes on 64 texts, z beside them
    assert titles(app) == ["Preview: Probe accuracy and z by layer"]
    assert "Preview on 64 random texts of 240" in " ".join(shown(c.value) for c in app.caption)
    held.set()
    settled(app)
    assert titles(app) == ["Probe accuracy and z by layer"]
    assert "168 training and 72 held-out texts" in " ".join(shown(c.value) for c in app.caption)


def test_a_failure_while_the_texts_are_pooled_is_a_warning_under_the_z_it_leaves_drawn(tiny_models, monkeypatch):
    """With the hidden states at hand the probes page draws z and pools the texts in the background: a pooling failure
    (out of memory here) is said as that work's warning, and z stays drawn."""
    model = tiny_models[("llama", False)]
    settled(run_page("pages/readout.py", settle=False, model=model, n_tokens=128, seed=31))  # states and z stored

    def failing(*args, real=analyses.model_probes, **kwargs):
        if kwargs.get("stored_only"):
            return real(*args, **kwargs)
        raise MemoryError("out of memory while pooling")

    monkeypatch.setattr(analyses, "model_probes", failing)
    app = settled(run_page("pages/probes.py", settle=False, model=model, n_tokens=128, seed=31))
    app.run()  # as the status line reruns the page once nothing runs
    assert not app.exception, app.exception
    assert not app.error, [e.value for e in app.error]
    warnings = [shown(w.value) for w in app.warning]
    assert any(w.startswith("Probes (") and w.endswith("stopped: out of memory while pooling") for w in warnings), \
        warnings
    (figure,) = charts(app)
    z = next(trace for trace in figure["data"] if trace.get("name") == "z (readout alignment)")
    assert len(decode(z["y"])) == 4  # embeddings + 3 blocks


def test_background_work_gives_way_to_a_request_on_another_model_and_a_move_stops_what_is_no_longer_asked():
    from dashboard.background import Background, Task

    admission = Admission(resident_models=1)
    admission.resident("A", "model A")
    worker, steps, asked = Background(admission), [], threading.Event()  # the fill runs until B is asked for

    def long_fill(progress, slot):
        for step in range(1000):
            steps.append(step)
            if step == 3:
                asked.set()
                waiting(admission, 1)  # the request on B is in
            with slot() as pause:
                pause()
            progress("fill", step, 1000)

    worker.replace([Task("k = 2, CCR-1", "Nearby settings", Priority.BACKGROUND, long_fill, "A")])
    asked.wait(30)
    with admission.hold(Priority.PAGE, "load B", "B"):  # admitted once the fill on A has given way
        assert admission.models == {"B": 1}
    worker.join(30)
    assert worker.tasks[0].state == "stopped" and len(steps) < 1000

    moved = threading.Event()
    def until_moved(progress, slot):
        while True:
            moved.set()
            progress("exact", 0, 1)
    worker.replace([Task("k = 4, CCR-1", "Exact curve", Priority.NEXT, until_moved, "A", shows=True)])
    moved.wait(30)
    worker.replace([Task("k = 8, CCR-1", "Exact curve", Priority.NEXT, lambda progress, slot: None, "A",
                         shows=True)])  # a move: the k = 4 run stops at its next pause, k = 8 runs
    worker.join(30)
    assert [task.state for task in worker.tasks] == ["done"] and worker.to_draw() and not worker.to_draw()


def test_work_no_longer_asked_for_leaves_while_it_waits_at_a_pause_and_runs_no_further_step():
    """A page's preview holds the slot while a preview ahead waits at its pause point; the page's run then replaces the
    list without it: it leaves the queue as the list changes, not after one more step once the preview is done."""
    from dashboard.background import Background, Task

    admission = Admission()
    worker, steps, asking = Background(admission), [], threading.Event()

    def ahead(progress, slot):
        for step in range(1000):
            steps.append(step)
            if step == 1:
                asking.set()
                waiting(admission, 1)  # the page's preview asks: the next pause gives way to it
            progress("PGA by layer", step, 1000)

    worker.replace([Task("k = 512, CCR-2", "Previews ahead", Priority.BACKGROUND, ahead, "A")])
    assert asking.wait(30)
    with admission.hold(Priority.PREVIEW, "a preview", "A"):
        assert steps == [0, 1]
        thread = worker.thread
        worker.replace([])  # the page run's list, without it
        thread.join(5)
        assert not thread.is_alive() and worker.thread is None  # it left while the preview held the slot
    assert steps == [0, 1]


def test_the_status_line_waits_on_a_shown_result_until_it_is_done_and_not_on_work_the_page_does_not_show():
    """While the exact curve runs, the status line's refresh waits for it (the page reruns as soon as it is done,
    not at a later refresh); a fill the page does not show is not waited for."""
    from dashboard.background import Background, Task

    worker, started, finish = Background(Admission()), threading.Event(), threading.Event()

    def exact(progress, slot):
        progress("PGA by layer", 0, 10)
        started.set()
        finish.wait(30)

    fill = Task("k = 2, CCR-1", "Nearby settings", Priority.BACKGROUND, None, "A", state="running")
    worker.replace([Task("k = 4, CCR-1", "Exact curve", Priority.NEXT, exact, "A", shows=True), fill])
    assert started.wait(30) and worker.showing()
    waited = threading.Event()
    threading.Thread(target=lambda: (worker.wait_shown(60), waited.set()), daemon=True).start()
    assert not waited.wait(0.2)  # the exact run goes on: the refresh waits
    finish.set()
    assert waited.wait(30) and worker.tasks[0].state == "done" and worker.to_draw()
    assert not worker.showing() and not worker.idle()  # the fill still runs, and is not waited for
    begun = time.monotonic()
    worker.wait_shown(60)
    assert time.monotonic() - begun < 1


class _Rerun(Exception):
    pass


class _Page:
    """What :func:`show_status` uses of Streamlit: a fragment run by hand, one placeholder, the session state (reading
    it is where a visitor's newer move stops the run), ``rerun``."""

    def __init__(self):
        self.captions, self.moved, self.reads = [], threading.Event(), 0
        page = self

        class State:
            def __contains__(self, key):
                page.reads += 1
                if page.moved.is_set():
                    raise _Rerun("move")
                return True

        self.session_state = State()

    def fragment(self, function, run_every):
        self.run_every = function, run_every
        return function

    def empty(self):
        return types.SimpleNamespace(caption=lambda text: self.captions.append((time.monotonic(), str(text))))

    def warning(self, *args, **kwargs):
        pass

    def rerun(self, scope):
        raise _Rerun(scope)


def test_the_status_refresh_reruns_the_page_once_its_result_is_done_and_stops_for_a_visitors_move(monkeypatch):
    """While the exact curve is to come the first refresh is soon; it stays in its run, redraws the changed line once
    a second, and reruns the page as soon as the curve is done; a visitor's move ends it at the next look (it is not
    held to the curve's end). Work the page does not show refreshes the line once a second."""
    from dashboard import background
    from dashboard.background import Background, Task

    page = _Page()
    monkeypatch.setattr(background, "st", page)
    worker, finish = Background(Admission()), threading.Event()

    def exact(progress, slot):
        for layer in range(1000):
            progress("PGA by layer", layer, 1000)
            if finish.wait(0.01):
                return

    worker.replace([Task("k = 4, CCR-1", "Exact curve", Priority.NEXT, exact, "A", shows=True)])
    background.show_status(worker)  # the page run's own call draws the line and returns
    status, every = page.run_every
    assert every == background.FIRST_REFRESH_SECONDS and len(page.captions) == 1
    threading.Timer(2.5, finish.set).start()
    begun = time.monotonic()
    with pytest.raises(_Rerun, match="app"):
        status()  # a refresh: until the curve is done
    assert 2.4 < time.monotonic() - begun < 2.5 + 0.5
    drawn = [at for at, _ in page.captions[1:]]
    assert 2 <= len(drawn) <= 3 and np.diff(drawn).min() >= 0.99
    assert page.reads >= 15  # looked for a move every POLL_SECONDS

    finish.clear()
    worker.replace([Task("k = 8, CCR-1", "Exact curve", Priority.NEXT, exact, "A", shows=True)])
    threading.Timer(0.3, page.moved.set).start()
    begun = time.monotonic()
    with pytest.raises(_Rerun, match="move"):
        status()
    assert time.monotonic() - begun < 0.3 + 2 * background.POLL_SECONDS + 0.2
    finish.set()
    worker.join(30)

    worker.replace([Task("k = 16, CCR-1", "Previews ahead", Priority.BACKGROUND, exact, "A")])  # not shown
    finish.clear()
    background.show_status(worker)
    assert page.run_every[1] == background.REFRESH_SECONDS
    finish.set()
    worker.join(30)


def test_the_status_refresh_reruns_the_page_for_each_result_it_shows_as_it_is_done(monkeypatch):
    """Of two results the page shows (the probes on a subset of the texts, then on all of them), the first is drawn
    while the second is computed, not when both are done."""
    from dashboard import background
    from dashboard.background import Background, Task

    page = _Page()
    monkeypatch.setattr(background, "st", page)
    worker, finish = Background(Admission()), threading.Event()
    worker.replace([Task("64 texts first", "Probes", Priority.NEXT, lambda progress, slot: None, "A", shows=True),
                    Task("all 240 texts", "Probes", Priority.NEXT,
                         lambda progress, slot: progress("pooled states", 16, 176) or finish.wait(30), "A",
                         shows=True)])
    background.show_status(worker)
    status, _ = page.run_every
    threading.Timer(3.0, finish.set).start()
    begun = time.monotonic()
    with pytest.raises(_Rerun, match="app"):
        status()
    assert time.monotonic() - begun < 1.0 and worker.tasks[1].state == "running"
    while worker.tasks[1].total == 0:
        time.sleep(0.01)
    assert worker.line() == "Probes: 1/2 ready (all 240 texts, pooled states: 16/176)"  # what the page waits for
    worker.join(30)


def test_blocks_of_128_tokens_without_the_preview_flag_are_an_exact_setting_and_stored(tmp_path):
    states, w_u = planted_readout(n=300)
    layers, basis, cache = np.stack([states, states * 2]), readout_basis(w_u), ResultCache(tmp_path)
    blocks = pga_settings(w_u.shape[1], (8,), pair_blocks=128, n_null=10)
    assert not blocks.preview and "preview" not in blocks.spec
    pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, blocks, [0, 1], cache=cache)
    assert pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, blocks, [0, 1], cache=cache, stored_only=True)
    preview = preview_settings(blocks, w_u.shape[1])
    assert preview.preview and preview.spec["preview"] is True
    pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, preview, [0, 1], cache=cache)
    # the flag, not the block size, keeps it out of the disk cache
    assert pipeline.cached_pga(layers, {"s": 1}, basis, {"w": 1}, preview, [0, 1], cache=cache,
                               stored_only=True, memory=EngineMemory()) is None


def test_a_text_file_is_read_once_per_version_not_at_every_call(tmp_path, monkeypatch):
    from analysis.data import corpus as corpora
    from dashboard import compute

    text = tmp_path / "notes.txt"
    text.write_text("one two three " * 50)
    reads, real = [], corpora.corpus_from_bytes
    monkeypatch.setattr(corpora, "corpus_from_bytes", lambda *a, **kw: reads.append(1) or real(*a, **kw))
    view = compute.ViewState(corpus=str(text))
    first = [compute.corpus(view) for _ in range(5)]
    assert len(reads) == 1 and len({c.sha256 for c in first}) == 1
    text.write_text("four five six " * 60)  # a new version of the file: read again
    assert compute.corpus(view).sha256 != first[0].sha256 and len(reads) == 2


def test_a_move_runs_its_exact_curve_before_the_preview_ahead_it_still_wants_which_then_runs_again():
    from dashboard.background import Background, Task

    worker, log, started = Background(Admission()), [], threading.Event()

    def preview_ahead(progress, slot):  # runs until a move puts more urgent work in front of it
        log.append("preview")
        for step in range(1000):
            started.set()
            if step == 2 and log.count("preview") == 1:
                worker.replace([exact, ahead])  # the move: the same preview is still wanted, after its exact curve
            progress("preview", step, 1000)

    ahead = Task("k = 2, CCR-1", "Previews ahead", Priority.BACKGROUND, preview_ahead, "A")
    exact = Task("k = 4, CCR-1", "Exact curve", Priority.NEXT, lambda progress, slot: log.append("exact"), "A",
                 shows=True)
    worker.replace([ahead])
    started.wait(30)
    worker.join(30)
    assert log == ["preview", "exact", "preview"]  # put back in line at its next pause point, then run whole
    assert [task.state for task in worker.tasks] == ["done", "done"] and ahead.run is None
    pcas = Task("PCA of every layer", "Previews ahead", Priority.BACKGROUND,
                lambda progress, slot: [log.append("pca") or progress("pca", step, 3) for step in range(3)], "A")
    exact = Task("k = 8, CCR-1", "Exact curve", Priority.NEXT, lambda progress, slot: log.append("exact"), "A")
    worker.replace([pcas, exact])  # work the list puts first runs first, whatever its priority
    worker.join(30)
    assert log[3:] == ["pca", "pca", "pca", "exact"]
