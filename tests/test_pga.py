from dataclasses import replace

import numpy as np
import pytest
import scipy.stats
import torch
from scipy.spatial.distance import pdist

from analysis.errors import InputError
from analysis.geometry import pga
from analysis.geometry.ccr import fit_pca, fit_pcas, remove_components
from analysis.geometry.eigen import top_eigh
from analysis.geometry.pga import PGASettings, null_bases, pga_sweep, sample_pairs
from analysis.geometry.radix import count_subspaces, sorted_keys
from analysis.geometry.ranks import (
    centred_ranks,
    ranked_reference,
    sort_rows,
    spearman_cosines,
    spearman_many,
    spearman_ranked,
)
from analysis.geometry.readout import readout_basis
from analysis.geometry.synthetic import masked_readout, planted_readout
from analysis.runs.pipeline import cached_pga
from analysis.runs.settings import block_preview
from analysis.storage.cache import ResultCache
from analysis.storage.codec import decode, encode
from analysis.storage.memory import EngineMemory

FAST = dict(n_null=30, n_bootstrap=200)


def one(states, w_u, **settings):
    (result,) = pga_sweep(states, readout_basis(w_u), PGASettings(**{**FAST, **settings}))
    return result


def test_planted_readout_gives_large_positive_z():
    states, w_u = planted_readout(seed=1)
    result = one(states, w_u, ks=(8,))
    assert result.z > 5 and result.rho_readout > 0.99
    assert result.p_value == pytest.approx(1 / 31)
    assert result.z_interval[0] <= result.z <= result.z_interval[1]
    # signal variance 8 inside V_k; noise 64 x 0.01, of which 8/64 inside
    assert result.pc1_angle_deg < 10 and result.variance_in_readout == pytest.approx(8.08 / 8.64, abs=0.02)


def test_variance_and_pc_angles_in_readout_equal_plain_ones_at_every_k_and_ccr_depth():
    states, w_u = planted_readout(seed=2)
    basis, memory = readout_basis(w_u), EngineMemory()
    results = pga_sweep(states, basis, PGASettings(**{**FAST, "ks": (8, 3), "ccrs": (0, 2)}), memory=memory)
    (variances,) = [value for (kind, _), (value, _) in memory.items.items() if kind == "readout variances"]
    assert len(variances) == 8  # the rows' variance along the first 8 readout directions: k = 3 sums the first 3
    results += pga_sweep(states, basis, PGASettings(**{**FAST, "ks": (12,), "ccrs": (0,)}), memory=memory)
    (variances,) = [value for (kind, _), (value, _) in memory.items.items() if kind == "readout variances"]
    assert len(variances) == 12  # grown by the 4 directions k = 12 adds
    covariance = np.cov(states.astype(np.float64), rowvar=False)
    directions = np.linalg.eigh(covariance)[1][:, ::-1][:, :10]
    for r in results:  # each k's own, the same at every CCR depth
        top = basis.top(r.k)
        assert r.variance_in_readout == pytest.approx(np.trace(top.T @ covariance @ top) / np.trace(covariance),
                                                      rel=1e-9)
        inside = np.linalg.norm(top.T @ directions, axis=0)
        assert np.allclose(r.pc_angles_deg, np.degrees(np.arccos(np.minimum(inside, 1))), atol=1e-6)
    assert len({r.pc1_angle_deg for r in results}) == 3  # k = 8, 3 and 12 differ; CCR depths share


@pytest.mark.parametrize("states_key", [None, "these states"])
def test_remembered_shapes_equal_the_sweeps_fields_at_the_layers_whose_pca_it_remembers(states_key):
    """A preview at some layers draws the lower charts of the others from :func:`pga.remembered_shapes`: the planted
    layer's PC1 inside V_k and the noise layer's far from it, equal to the exact sweep's, nothing fitted."""
    states, w_u = planted_readout(n=120, seed=5)
    noise = np.random.default_rng(6).standard_normal(states.shape).astype(np.float32)
    layers, basis = np.stack([states, noise, states * 3 - 1]), readout_basis(w_u)
    settings = PGASettings(**{**FAST, "ks": (8, 3), "ccrs": (0, 2)})
    memory = EngineMemory()
    assert pga.remembered_shapes(layers, basis, settings, [0, 1, 2], memory=memory, states_key=states_key) == []
    swept = pga_sweep(layers, basis, settings, [0, 1], memory=memory, states_key=states_key)
    shapes = pga.remembered_shapes(layers, basis, settings, [0, 1, 2], memory=memory, states_key=states_key)
    assert [(s.layer, s.k, s.ccr) for s in shapes] == [(r.layer, r.k, r.ccr) for r in swept]  # layer 2: no PCA
    for shape, result in zip(shapes, swept, strict=True):
        assert np.array_equal(shape.pc_angles_deg, result.pc_angles_deg)
        assert np.array_equal(shape.pc_share_in_readout, result.pc_share_in_readout)
        assert [shape.rankme, shape.alpha_req, shape.isotropy, shape.condition_number] == [
            result.rankme, result.alpha_req, result.isotropy, result.condition_number]
    planted, plain = (min(s.pc1_angle_deg for s in shapes if s.layer == layer) for layer in (0, 1))
    assert planted < 10 and plain > 45
    assert memory.count("pca") == 2  # nothing fitted for layer 2
    half = replace(settings, ccr_fit="half")  # the corrected spectrum is fitted on the scored rows: not at hand
    assert pga.remembered_shapes(layers, basis, half, [0, 1], memory=memory, states_key=states_key) == []


def test_readout_basis_equals_the_svd_of_w_u():
    """V_k from W_U^T W_U (its row blocks: ``test_cores``) spans W_U's top-k right singular vectors, with its
    singular values; the planted spectrum and top direction are found."""
    rng = np.random.default_rng(8)
    rotation = np.linalg.qr(rng.standard_normal((30, 30)))[0]
    scales = np.geomspace(10, 0.5, 30)
    scales[0] = 30  # a planted top direction: rotation's first column
    w_u = (rng.standard_normal((700, 30)) * scales) @ rotation.T
    basis = readout_basis(torch.tensor(w_u, dtype=torch.float32))
    _, singular, vt = np.linalg.svd(w_u.astype(np.float32).astype(np.float64), full_matrices=False)
    np.testing.assert_allclose(basis.singular_values, singular, rtol=1e-9)
    for k in (1, 5, 29):
        np.testing.assert_allclose(basis.top(k) @ basis.top(k).T, vt[:k].T @ vt[:k], rtol=0, atol=1e-8)
    assert abs(basis.top(1)[:, 0] @ rotation[:, 0]) > 0.99  # the planted top direction


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_readout_basis_of_an_unembedding_with_nan_or_inf_says_so(bad):
    w_u = np.random.default_rng(0).standard_normal((100, 12)).astype(np.float32)
    w_u[57, 4] = bad
    with pytest.raises(InputError, match="The unembedding holds NaN or Inf values"):
        readout_basis(w_u)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_random_readout_gives_no_signal(seed):
    states, _ = planted_readout(seed=seed)
    w_random = np.random.default_rng(100 + seed).standard_normal((500, 64))
    result = one(states, w_random, ks=(8,), seed=seed)
    assert abs(result.z) < 4 and result.p_value > 0.01


def test_masking_direction_negative_at_ccr0_recovered_at_ccr1():
    states, w_u = masked_readout()
    ccr0, ccr1 = pga_sweep(states, readout_basis(w_u), PGASettings(ks=(8,), ccrs=(0, 1), **FAST))
    assert ccr0.z < -3 and ccr1.z > 3
    assert ccr0.pc1_angle_deg > 85  # the dominant direction is "dark": orthogonal to the readout


def test_k_equal_d_keeps_every_distance():
    states, w_u = planted_readout(d=24, k=4)
    assert one(states, w_u, ks=(24,)).rho_readout > 0.9999


def test_rotating_data_and_unembedding_together_changes_nothing():
    states, w_u = planted_readout(seed=2)
    rotation, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((64, 64)))
    a = one(states, w_u, ks=(8,))
    b = one((states @ rotation).astype(np.float32), w_u @ rotation, ks=(8,))
    assert b.rho_readout == pytest.approx(a.rho_readout, abs=1e-4)


@pytest.mark.parametrize("batched_from_k", [1, 10**6])  # both forms of the projection: batched, one wide matmul
def test_matches_a_plain_reference_implementation(monkeypatch, batched_from_k):
    """numpy cosine distances + scipy.stats.spearmanr, subspace by subspace."""
    monkeypatch.setattr(pga, "BATCHED_FROM_K", batched_from_k)
    states, w_u = masked_readout(n=60, seed=3)
    settings = PGASettings(ks=(8,), ccrs=(1,), n_null=5, n_bootstrap=10)
    result = pga_sweep(states, readout_basis(w_u), settings)[0]
    x = states.astype(np.float64) - states.mean(0)
    u = np.linalg.svd(x, full_matrices=False)[2][0]
    x = x - np.outer(x @ u, u)
    full = pdist(x, "cosine")
    top = np.linalg.svd(w_u, full_matrices=False)[2][:8].T
    bases = [top, *null_bases(64, 8, 5, settings.seed)]
    rhos = [scipy.stats.spearmanr(full, pdist(x @ q, "cosine")).statistic for q in bases]
    assert result.rho_readout == pytest.approx(rhos[0], abs=2e-4)
    np.testing.assert_allclose(result.null, rhos[1:], atol=2e-4)
    null = np.asarray(rhos[1:])
    assert result.z == pytest.approx((rhos[0] - null.mean()) / null.std(ddof=1), rel=1e-2)


def test_pairs_inside_blocks_match_a_plain_reference_on_those_pairs():
    """The preview's design: every pair inside seeded blocks of b tokens, each token in b - 1 pairs."""
    n, b = 230, 40  # 5 blocks; 30 tokens left out
    states, w_u = masked_readout(n=n, seed=3)
    design = sample_pairs(n, None, 0, b)
    block, position = np.divmod(design.flat, b * b)
    first, second = (design.order[block * b + i] for i in np.divmod(position, b))
    assert design.n_pairs == 5 * b * (b - 1) // 2 and (first != second).all()
    assert set(np.bincount(np.concatenate([first, second]), minlength=n)) == {0, b - 1}
    assert len(set(zip(np.minimum(first, second), np.maximum(first, second), strict=True))) == design.n_pairs
    settings = PGASettings(ks=(8,), ccrs=(1,), n_null=5, n_bootstrap=10, pair_blocks=b)
    result = pga_sweep(states, readout_basis(w_u), settings)[0]
    x = states.astype(np.float64) - states.mean(0)
    u = np.linalg.svd(x, full_matrices=False)[2][0]
    x = x - np.outer(x @ u, u)

    def cosines(points):
        unit = points / np.linalg.norm(points, axis=1, keepdims=True)
        return (unit[first] * unit[second]).sum(1)

    top = np.linalg.svd(w_u, full_matrices=False)[2][:8].T
    rhos = [scipy.stats.spearmanr(cosines(x), cosines(x @ q)).statistic
            for q in [top, *null_bases(64, 8, 5, settings.seed)]]
    assert result.n_pairs == design.n_pairs
    assert result.rho_readout == pytest.approx(rhos[0], abs=2e-4)
    np.testing.assert_allclose(result.null, rhos[1:], atol=2e-4)


def test_a_bfloat16_projection_moves_rho_little_and_finds_the_same_structure():
    states, w_u = masked_readout(n=300, seed=4)
    exact = pga_sweep(states, readout_basis(w_u), PGASettings(ks=(8,), ccrs=(0, 1), **FAST))
    rounded = pga_sweep(states, readout_basis(w_u), PGASettings(ks=(8,), ccrs=(0, 1), projection="bfloat16", **FAST))
    for e, r in zip(exact, rounded, strict=True):
        assert abs(e.rho_readout - r.rho_readout) < 5e-3 and np.abs(e.null - r.null).max() < 5e-3
        assert np.sign(e.z) == np.sign(r.z) and abs(e.z) > 3


def test_vectorised_spearman_equals_scipy_with_and_without_ties():
    rng = np.random.default_rng(0)
    reference = rng.standard_normal(2000)
    rows = rng.standard_normal((6, 2000))
    rows[1] = reference + 0.3 * rows[1]
    rows[2] = np.round(rows[2], 1)  # heavy ties
    rows[3] = rows[3] > 0  # two values only
    for ref in (reference, np.round(reference, 1)):
        for dtype in (torch.float64, torch.float32):  # float32 rows take the key sort, float64 torch.sort
            typed = torch.tensor(rows, dtype=dtype)
            ours = spearman_many(centred_ranks(torch.tensor(ref)), typed).numpy()
            expected = [scipy.stats.spearmanr(ref, r).statistic for r in typed.double().numpy()]
            np.testing.assert_allclose(ours, expected, atol=1e-12)


def plain_spearman(reference: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """scipy's rho of each row with the reference, on the same float32 values the engine ranks."""
    return np.array([scipy.stats.spearmanr(reference.astype(np.float64), r.astype(np.float64)).statistic
                     for r in rows])


def unit_cosines(points: np.ndarray) -> np.ndarray:
    """float32 cosine of every pair i < j of ``points`` ``[N, k]``."""
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    return (unit @ unit.T)[np.triu_indices(len(points), 1)].astype(np.float32)


def test_exact_ranks_against_a_shared_reference_equal_scipy_on_planted_tied_and_constant_rows():
    rng = np.random.default_rng(7)
    reference = rng.standard_normal(20000).astype(np.float32)
    rows = np.tanh(0.3 * (reference + rng.standard_normal((9, 20000)) * np.linspace(0.1, 4, 9)[:, None]))
    rows[1, :500] = rows[1, 500:1000]  # exact ties, as duplicate tokens give
    rows[2] = np.round(rows[2], 2)  # heavy ties
    rows[3] = -rows[3]  # anti-correlated
    rows[4] = 0.5  # constant
    rows[5, :50] = -0.0  # signed zeros tie with zeros
    rows[5, 50:100] = 0.0
    rows[7] = np.sign(rows[7])  # two values only
    rows = rows.astype(np.float32)
    varying = [0, 1, 2, 3, 5, 6, 7, 8]
    for ref in (reference, np.round(reference, 1), np.where(reference > 0, reference, 0)):  # no, many, one long run
        ours = spearman_ranked(ranked_reference(torch.tensor(ref)), torch.tensor(rows)).numpy()
        np.testing.assert_allclose(ours[varying], plain_spearman(ref, rows[varying]), rtol=0, atol=1e-12)
        assert np.isnan(ours[4])
        np.testing.assert_allclose(ours, spearman_many(centred_ranks(torch.tensor(ref)), torch.tensor(rows)).numpy(),
                                   atol=1e-12)  # the gathering path, and the GPU's
    assert spearman_ranked(ranked_reference(torch.tensor(reference)), torch.tensor(rows[:1]))[0] > 0.9
    # read in place: the values lie at shuffled positions of wider rows (as a design's pairs in Gram matrices),
    # the rest NaN, which would rank above every value if it were read
    flat = rng.permutation(30000)[:20000]
    wide = np.full((len(rows), 30000), np.nan, np.float32)
    wide[:, flat] = rows
    ranked = ranked_reference(torch.tensor(reference))
    np.testing.assert_array_equal(spearman_ranked(ranked, torch.tensor(wide), torch.tensor(flat)).numpy(),
                                  spearman_ranked(ranked, torch.tensor(rows)).numpy())
    unrelated = rng.standard_normal((4, 20000)).astype(np.float32)
    found = spearman_ranked(ranked_reference(torch.tensor(reference)), torch.tensor(unrelated)).numpy()
    assert np.all(np.abs(found) < 0.04)  # nothing planted: nothing found


def test_cosines_ranked_a_chunk_at_a_time_equal_scipy_on_every_design(monkeypatch):
    """Each subspace's cosines made a few Gram rows at a time and ranked against the full space's, for all pairs,
    a sample of pairs and pairs inside blocks (the preview's, made whole; larger ones in chunks that do not divide
    them): equal to
    scipy's rho on the same pairs; ties at k = 1 and from duplicate tokens; nothing found in unrelated subspaces."""
    monkeypatch.setattr("analysis.geometry.ranks.GRAM_ROWS", 24)
    rng = np.random.default_rng(3)
    readout = np.linalg.qr(rng.standard_normal((40, 6)))[0]
    states = (rng.standard_normal((130, 40)) + 3 * rng.standard_normal((130, 6)) @ readout.T).astype(np.float32)
    states[60:70] = states[:10]  # duplicate tokens: tied cosines
    bases = [readout, readout[:, :1], *(np.linalg.qr(rng.standard_normal((40, 6)))[0] for _ in range(5))]
    designs = [sample_pairs(130, None, 0), sample_pairs(130, 999, 0), sample_pairs(130, None, 0, pair_blocks=50),
               sample_pairs(130, None, 0, pair_blocks=40)]  # chunks of 24 rows; then whole blocks of 40 <= 2 x 24
    for design in designs:
        full = pga._cosine_grams(torch.tensor(states[design.order])[None], design.block)[0, design.flat]
        points = np.stack([np.pad(states @ b.astype(np.float32), ((0, 0), (0, 6 - b.shape[1]))) for b in bases])
        found = spearman_cosines(ranked_reference(full), points, design.rows).numpy()  # the blocks taken in order
        cosines = pga._cosine_grams(torch.tensor(points[:, design.order]), design.block)[:, design.flat].numpy()
        np.testing.assert_allclose(found, plain_spearman(full.numpy(), cosines), rtol=0, atol=1e-6)
        assert found[0] > 0.5 and np.all(np.abs(found[2:]) < found[0] - 0.3)  # planted in the readout only
        assert set(np.unique(cosines[1])) <= {-1.0, 1.0}  # k = 1: two tie runs


def test_k_1_counted_equals_the_radix_sort_and_scipy_with_zeros_and_reference_ties(monkeypatch):
    """At k = 1 the cosines (-1, 0 or +1) are ranked by counting: the same numerators and rho as the radix sort of the
    same cosines (a zero second coordinate keeps them, not the width), equal to scipy; the side of a planted split
    found, nothing in an unrelated direction. On every design, with points at +-0.0 (cosines of 0: the general count)
    and without (the count of agreeing signs), and a reference with ties."""
    rng = np.random.default_rng(5)
    side = np.where(np.arange(150) % 2 == 0, 1.0, -1.0)
    states = (rng.standard_normal((150, 30)) + 4 * side[:, None] * np.eye(30)[0]).astype(np.float32)
    states[10:20] = states[:10]  # duplicate tokens: the reference's cosines tie
    unrelated = rng.standard_normal(30) * (np.arange(30) > 0)  # orthogonal to the split
    directions = np.stack([np.eye(30)[0], unrelated, np.eye(30)[0], unrelated], axis=1).astype(np.float32)
    points = (states @ directions).T[:, :, None].copy()
    points[0, 30:33, 0], points[1, 40, 0] = 0.0, -0.0  # cosines of exactly 0; none in subspaces 2 and 3
    counts = []
    monkeypatch.setattr("analysis.geometry.ranks.count_subspaces", lambda points, first, stop, *rest: counts.append(
        stop - first) or count_subspaces(points, first, stop, *rest))
    for design in [sample_pairs(150, None, 0), sample_pairs(150, 999, 0), sample_pairs(150, None, 0, pair_blocks=50)]:
        full = pga._cosine_grams(torch.tensor(states[design.order])[None], design.block)[0, design.flat]
        reference = ranked_reference(full)
        counted = spearman_cosines(reference, points, design.rows).numpy()
        assert sum(counts) == 4 and not counts.clear()  # each subspace counted
        sorted_ = spearman_cosines(reference, np.pad(points, ((0, 0), (0, 0), (0, 1))), design.rows).numpy()
        np.testing.assert_array_equal(counted, sorted_)
        cosines = pga._cosine_grams(torch.tensor(points[:, design.order]), design.block)[:, design.flat].numpy()
        assert set(np.unique(cosines)) == {-1.0, 0.0, 1.0}
        np.testing.assert_allclose(counted, plain_spearman(full.numpy(), cosines), rtol=0, atol=1e-9)
        assert counted[0] > 0.5 and abs(counted[1]) < 0.1  # the split found along its direction only
        assert counted[2] > 0.5 and abs(counted[3]) < 0.1


def test_exact_sweep_equals_scipy_on_planted_states_at_k_1_and_on_a_tiny_model(tiny_models, tmp_path):
    """The sweep's rho for the readout and every null subspace, against scipy on float32 cosines computed plainly:
    on planted states, at k = 1 (every projected cosine is +-1: two tie runs) and on a tiny model's states."""
    from analysis.activations.hidden import extract, token_sample
    from analysis.data.corpus import Sampling, builtin_corpus
    from analysis.models import arch
    from analysis.models.loading import load
    from analysis.models.refs import resolve
    from analysis.storage.cache import ResultCache

    planted, w_planted = planted_readout(n=120, seed=4)
    loaded = load(resolve(str(tiny_models[("gpt_neox", False)])), device="cpu", dtype="float32")
    sample = token_sample(loaded, builtin_corpus(), Sampling(n_tokens=120, window=40, skip=2, per_window=12, seed=0),
                          ResultCache(tmp_path))
    tiny_states = extract(loaded, sample).states
    w_tiny = arch.unembedding(loaded.model).detach().numpy()
    cases = [(planted, w_planted, 8, 0), (planted, w_planted, 1, 0), (tiny_states[2], w_tiny, 4, 1),
             (tiny_states[-1], w_tiny, 1, 1)]
    for states, w_u, k, ccr in cases:
        settings = PGASettings(ks=(k,), ccrs=(ccr,), n_null=12, n_bootstrap=10)
        (result,) = pga_sweep(states, readout_basis(w_u), settings, device="cpu")
        pca = fit_pca(torch.tensor(states))
        corrected = remove_components(torch.tensor(states), pca, ccr).float().numpy()
        bases = [readout_basis(w_u).top(k), *null_bases(states.shape[1], k, 12, settings.seed)]
        full = unit_cosines(corrected)
        projected = np.stack([unit_cosines(corrected @ q.astype(np.float32)) for q in bases])
        if k == 1:
            assert set(np.unique(projected)) <= {-1.0, 1.0}
        rhos = plain_spearman(full, projected)
        assert result.rho_readout == pytest.approx(rhos[0], abs=1e-6)
        np.testing.assert_allclose(result.null, rhos[1:], atol=1e-6)
        assert result.z == pytest.approx((rhos[0] - rhos[1:].mean()) / rhos[1:].std(ddof=1), abs=1e-4)


def test_key_sort_orders_like_a_stable_sort_with_signed_zeros_and_ties():
    rng = np.random.default_rng(1)
    rows = torch.tensor(rng.standard_normal((19, 3001)), dtype=torch.float32)  # 19: a ragged last task
    rows[:, :40] = 0.25
    rows[0, :3], rows[1, 7] = -0.0, 0.0
    rows[2] = -rows[2].abs()
    tied, order = sort_rows(rows)
    expected_values, expected_order = torch.sort(rows, dim=-1, stable=True)
    assert torch.equal(order, expected_order)
    assert torch.equal(torch.gather(rows, 1, order), expected_values)
    assert torch.equal(tied[:, 1:] == tied[:, :-1], expected_values[:, 1:] == expected_values[:, :-1])


def test_the_references_radix_sort_orders_like_a_stable_sort_with_signed_zeros_and_ties():
    """:func:`sorted_keys` (the full space's pairs ranked once per layer): the order of a stable sort, keys equal
    exactly where the values are (-0.0 and 0.0 too), on values spread over every digit and on one long run."""
    rng = np.random.default_rng(3)
    values = (rng.standard_normal(70001) * np.exp(rng.uniform(-20, 20, 70001))).astype(np.float32)
    values[:500] = 0.25
    values[600:610], values[700:705] = -0.0, 0.0
    values[800:900] = np.float32(-3e-38)
    for row in (values, np.abs(values), np.full(1000, 0.5, np.float32)):
        keys, order = sorted_keys(row)
        expected_values, expected_order = torch.sort(torch.from_numpy(row), stable=True)
        np.testing.assert_array_equal(order, expected_order.numpy())
        np.testing.assert_array_equal(keys[1:] == keys[:-1], (expected_values[1:] == expected_values[:-1]).numpy())
        assert np.all(keys[1:] >= keys[:-1])


def test_double_key_sort_orders_like_a_stable_sort_inside_runs_of_equal_float32_roundings():
    rng = np.random.default_rng(2)
    rows = torch.tensor(rng.standard_normal((5, 3001)), dtype=torch.float64)
    rows[0, :100] = 0.25 + 1e-12 * torch.tensor(rng.permutation(100), dtype=torch.float64)  # a long run: merge sort
    rows[1, :10] = 0.5 - 1e-13 * torch.arange(10, dtype=torch.float64)  # a short run, descending: insertion
    rows[2, :50] = 0.75  # ties
    rows[2, 50:60] = 0.75 + 1e-14
    rows[3, :3], rows[3, 7] = -0.0, 0.0
    rows[4, :40] = torch.linspace(1e300, 1e299, 40, dtype=torch.float64)  # beyond float32: all round to inf
    rows[4, 40:80] = torch.linspace(1e-300, 1e-301, 40, dtype=torch.float64)  # below it: all round to 0
    assert len(torch.unique(rows[0, :100].float())) == 1 and len(torch.unique(rows[0, :100])) == 100
    tied, order = sort_rows(rows)
    expected_values, expected_order = torch.sort(rows, dim=-1, stable=True)
    assert torch.equal(order, expected_order)
    assert torch.equal(tied[:, 1:] == tied[:, :-1], expected_values[:, 1:] == expected_values[:, :-1])


def test_ccr_leaves_nothing_along_removed_directions():
    states, _ = masked_readout()
    pca = fit_pca(torch.tensor(states))
    for c in (1, 3, 5):
        corrected = remove_components(torch.tensor(states), pca, c)
        assert corrected.mean(0).abs().max() < 1e-8
        assert (corrected @ pca.components[:, :c]).abs().max() < 1e-8
    wide = torch.tensor(np.random.default_rng(0).standard_normal((20, 50)))  # N < d: the dual path
    dual = fit_pca(wide)
    assert (remove_components(wide, dual, 4) @ dual.components[:, :4]).abs().max() < 1e-8


def test_top_components_equal_the_full_eigendecomposition_both_ways(monkeypatch):
    rng = np.random.default_rng(3)
    scales = np.geomspace(10, 0.1, 60)  # a planted spectrum: axis i has standard deviation scales[i]
    scales[0] = 40
    for n in (400, 40):  # N > d: the covariance's eigenproblem; N < d: the dual's
        states = torch.tensor(rng.standard_normal((n, 60)) * scales + 5)
        full = fit_pca(states)
        with monkeypatch.context() as patched:  # the top components come from the tridiagonal path, not eigh
            patched.setattr(np.linalg, "eigh", None)
            top = fit_pca(states, 8)
        assert top.components.shape == (60, 8) and len(top.variances) == len(full.variances)
        torch.testing.assert_close(top.variances, full.variances, rtol=1e-9, atol=1e-12)
        torch.testing.assert_close((top.components * full.components[:, :8]).sum(0).abs(),
                                   torch.ones(8, dtype=torch.float64), rtol=0, atol=1e-9)
        assert top.components[0, 0].abs() > 0.99  # the planted top axis


@pytest.mark.parametrize("n, top", [(3, 1), (40, 8), (300, 32)])
def test_the_compiled_tridiagonal_route_equals_eigh(n, top):
    rng = np.random.default_rng(n)
    axes = np.linalg.qr(rng.standard_normal((n, n)))[0]
    spectrum = np.geomspace(100, 1e-3, n)
    spectrum[1] = spectrum[2]  # a repeated eigenvalue below the top one
    matrix = (axes * spectrum) @ axes.T
    values, vectors, info = top_eigh(matrix.copy(), top)
    expected_values, expected_vectors = np.linalg.eigh(matrix)
    assert info == 0 and vectors.shape == (top, n)
    np.testing.assert_allclose(values, expected_values, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(vectors @ vectors.T, np.eye(top), atol=1e-10)  # orthonormal, also where values repeat
    np.testing.assert_allclose(matrix @ vectors.T, vectors.T * values[-top:], atol=1e-9)  # eigenpairs of the top
    assert abs(vectors[-1] @ expected_vectors[:, -1]) > 1 - 1e-10  # the planted top axis


def test_layers_fitted_a_layer_per_core_equal_those_fitted_one_at_a_time():
    rng = np.random.default_rng(5)
    scales = np.geomspace(5, 0.1, 40)
    scales[0] = 20  # a planted top axis, rolled to axis i in layer i
    layers = [torch.tensor((rng.standard_normal((300, 40)) * np.roll(scales, i)).astype(np.float32)) for i in range(5)]
    for i, (states, pca) in enumerate(zip(layers, fit_pcas(layers, 8), strict=True)):
        alone = fit_pca(states, 8)
        torch.testing.assert_close(pca.variances, alone.variances, rtol=1e-12, atol=0)
        torch.testing.assert_close(pca.mean, alone.mean, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close((pca.components * alone.components).sum(0).abs(), torch.ones(8, dtype=torch.float64),
                                   rtol=0, atol=1e-9)
        assert pca.components[i, 0].abs() > 0.99  # each layer's own planted top axis


@pytest.mark.parametrize("k, gram_rows", [(8, 64), (32, 64), (32, 5), (40, 64), (64, 64)])
def test_null_bases_orthonormalise_their_own_gaussian_columns_nested_in_r_and_k(k, gram_rows, monkeypatch):
    """Cholesky QR up to d / 2 (its Gram matrix in one block, or in several of uneven sizes), Householder QR above."""
    monkeypatch.setattr(pga, "GRAM_ROWS", gram_rows)
    d, seed = 64, 3
    bases = null_bases(d, k, 6, seed)
    for j, q in enumerate(bases):
        gaussian = np.random.default_rng([seed, pga.NULL_STREAM, j]).standard_normal((k, d)).T
        plain, _ = np.linalg.qr(gaussian)  # the plain reference: Householder, up to each column's sign
        signs = np.sign(np.sum(plain * q, axis=0))
        assert np.allclose(q, plain * signs, atol=1e-12) and np.allclose(q.T @ q, np.eye(k), atol=1e-12)
    assert np.array_equal(null_bases(d, k, 6, seed, first=2), bases[2:])  # nested in R: draw j is draw j
    assert np.allclose(null_bases(d, k // 2, 6, seed), bases[..., :k // 2], atol=1e-12)  # nested in k
    many = null_bases(d, k, 2 * pga.NULL_CHUNK + 3, seed, first=1)  # drawn in chunks, the last one ragged
    assert np.array_equal(many[:5], bases[1:])
    into = null_bases(d, k, 2 * pga.NULL_CHUNK + 3, seed, first=1, out=torch.empty(len(many), d, k))  # float32
    assert torch.equal(into, torch.as_tensor(many, dtype=torch.float32))


@pytest.mark.parametrize("k", [1, 7, 16, 30])
def test_the_gram_matrix_by_blocks_is_the_lower_triangle_of_the_whole_product(k, monkeypatch):
    monkeypatch.setattr(pga, "GRAM_ROWS", 2)  # up to 8 blocks, of uneven sizes where 8 does not divide k
    rows = torch.from_numpy(np.random.default_rng(k).standard_normal((3, k, 40)))
    whole, blocks = rows @ rows.mT, pga._lower_gram(rows)
    torch.testing.assert_close(blocks.tril(), whole.tril(), rtol=1e-12, atol=1e-12)  # what Cholesky reads
    torch.testing.assert_close(torch.linalg.cholesky(blocks), torch.linalg.cholesky(whole), rtol=1e-12, atol=1e-12)


def test_large_null_draws_are_drawn_in_smaller_chunks_with_a_pause_between(monkeypatch):
    """Where a draw is large (d k^2), fewer draws a chunk, and the caller's pause between chunks (a visitor's exact
    curve waited 3.7 s for thirty draws at d = 2048, k = 1024); the draws are the same either way."""
    d, k, seed, paused = 64, 16, 3, []
    whole = null_bases(d, k, 12, seed, first=1, pause=lambda: paused.append(1))
    assert len(paused) == 1  # 11 draws: chunks of 8 and 3
    monkeypatch.setattr(pga, "NULL_CHUNK_VALUES", 3 * d * k * k)
    paused.clear()
    small = null_bases(d, k, 12, seed, first=1, pause=lambda: paused.append(1))
    assert len(paused) == 3 and np.allclose(small, whole, atol=1e-12)  # chunks of 3, 3, 3 and 2
    monkeypatch.setattr(pga, "NULL_CHUNK_VALUES", 1)
    paused.clear()
    _, bases = pga._candidates(EngineMemory(), readout_basis(np.random.default_rng(0).standard_normal((50, d))), k, 5,
                               seed, torch.float32, torch.device("cpu"), lambda: paused.append(1))
    assert len(paused) == 4 and torch.allclose(bases[2:], torch.as_tensor(whole[:4], dtype=torch.float32))  # draws 1-4


@pytest.mark.parametrize("k, m, chunk_projected, pauses",
                         [(64, 40, 2**31, 2), (64, 16, 2**31, 0), (8, 40, 2**31, 0), (64, 40, 4 * 50 * 96 * 64, 9)])
def test_a_large_projection_pauses_between_chunks_of_subspaces(k, m, chunk_projected, pauses, monkeypatch):
    """At large k (the batched product) the subspaces are projected ``CHUNK_SUBSPACES`` at a time with the caller's
    pause between (a layer's projections at d = 2048, k = 1024 held other work off for 1.1 s), fewer where n d k is
    large (``CHUNK_PROJECTED``: here 4 at a time); the same values."""
    monkeypatch.setattr(pga, "CHUNK_PROJECTED", chunk_projected)
    rng = np.random.default_rng(4)
    points, bases = torch.as_tensor(rng.standard_normal((50, 96)), dtype=torch.float32), torch.as_tensor(
        null_bases(96, k, m, 0), dtype=torch.float32)
    paused = []
    chunked = pga._project(points, bases, pause=lambda: paused.append(1))
    assert len(paused) == pauses and torch.allclose(chunked, pga._project(points, bases), atol=1e-6)
    into = torch.empty_like(chunked)
    assert pga._project(points, bases, out=into, pause=lambda: None) is into and torch.equal(into, chunked)


def test_candidate_bases_of_a_larger_r_draw_only_the_draws_they_add_and_serve_a_smaller_r(monkeypatch):
    _, w_u = planted_readout(n=64, d=32, k=4, seed=2)
    basis, memory, firsts = readout_basis(w_u), EngineMemory(), []
    drawn = pga.null_bases
    monkeypatch.setattr(pga, "null_bases",
                        lambda *args, first=0, **out: firsts.append(first) or drawn(*args, first=first, **out))
    candidates = [pga._candidates(memory, basis, 4, r, 0, torch.float32, torch.device("cpu")) for r in (30, 100, 30)]
    assert firsts == [0, 30]
    assert len({key for key, _ in candidates}) == 1
    (_, preview), (_, exact), (_, again) = candidates
    assert torch.equal(exact[:31], preview) and torch.equal(again, preview)
    fresh = pga._candidates(EngineMemory(), basis, 4, 100, 0, torch.float32, torch.device("cpu"))[1]
    assert torch.equal(exact, fresh) and torch.equal(exact[0], torch.as_tensor(basis.top(4), dtype=torch.float32))


def test_candidate_bases_drawn_before_a_stop_are_kept_and_the_next_call_draws_only_the_rest(monkeypatch):
    """Work stopped at a pause while drawing (the background's, for a visitor's jump) leaves the chunks drawn so far
    in memory: the next call draws only the rest, into the same tensor, and the bases equal those drawn at once; a
    larger R then grows them into a new tensor, drawing only what it adds."""
    _, w_u = planted_readout(n=64, d=32, k=4, seed=2)
    basis, memory, firsts, pauses = readout_basis(w_u), EngineMemory(), [], []

    def stop_at_the_second_pause():
        pauses.append(1)
        if len(pauses) == 2:
            raise KeyboardInterrupt  # what a stopped task raises from its pause, as far as the engine knows

    with pytest.raises(KeyboardInterrupt):
        pga._candidates(memory, basis, 4, 20, 0, torch.float32, torch.device("cpu"), stop_at_the_second_pause)
    (kept, count), = [value for (kind, _), (value, _) in memory.items.items() if kind == "candidate bases"]
    assert count == 1 + 2 * pga.NULL_CHUNK  # V_k and the first two chunks
    drawn = pga.null_bases
    monkeypatch.setattr(pga, "null_bases",
                        lambda *args, first=0, **out: firsts.append(first) or drawn(*args, first=first, **out))
    _, resumed = pga._candidates(memory, basis, 4, 20, 0, torch.float32, torch.device("cpu"))
    _, larger = pga._candidates(memory, basis, 4, 30, 0, torch.float32, torch.device("cpu"))
    assert firsts == [2 * pga.NULL_CHUNK, 20] and resumed.data_ptr() == kept.data_ptr()
    fresh = pga._candidates(EngineMemory(), basis, 4, 30, 0, torch.float32, torch.device("cpu"))[1]
    assert torch.equal(resumed, fresh[:21]) and torch.equal(larger, fresh)


def test_bases_readied_ahead_are_those_a_preview_there_draws_and_it_draws_none(monkeypatch):
    """``ready_bases`` leaves in memory the candidate bases a sweep of the same settings projects onto: the preview at
    that k then draws no null basis, and its results are those of a preview that drew its own."""
    states, w_u = planted_readout(n=96, d=32, k=4, seed=3)
    basis, settings = readout_basis(w_u), block_preview(PGASettings(ks=(16,), ccrs=(1,)), 32)
    memory, drawn = EngineMemory(), []
    pga.ready_bases(basis, settings, "cpu", memory)
    assert memory.count("candidate bases") == 1
    real = pga.null_bases
    monkeypatch.setattr(pga, "null_bases", lambda *args, **kwargs: drawn.append(args) or real(*args, **kwargs))
    warm = pga_sweep(states[None], basis, settings, device="cpu", memory=memory)
    assert drawn == []
    cold = pga_sweep(states[None], basis, settings, device="cpu", memory=EngineMemory())
    assert len(drawn) == 1 and [r.z for r in warm] == [r.z for r in cold]


def test_same_seed_same_null_other_seed_other_null():
    states, w_u = planted_readout()
    a, b, c = (one(states, w_u, ks=(8,), seed=s) for s in (7, 7, 8))
    np.testing.assert_array_equal(a.null, b.null)
    assert not np.array_equal(a.null, c.null)


def test_pair_subsample_and_held_out_half():
    states, w_u = planted_readout(n=200)
    sampled = one(states, w_u, ks=(8,), max_pairs=5000)
    assert sampled.n_pairs == 5000 and sampled.z > 3
    half = one(states, w_u, ks=(8,), ccr_fit="half")
    assert half.n_tokens == 100 and half.n_pairs == 100 * 99 // 2 and half.z > 3


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(ks=(0,)), "k = 0 is out of range.*between 1 and d = 64"),
    (dict(ks=(65,)), "k = 65 is out of range"),
    (dict(ccrs=(64,)), "CCR depth 64 is too large.*min\\(N, d\\) = 64"),
    (dict(n_null=1), "at least 2; got 1"),
])
def test_bad_settings_are_named(kwargs, pattern):
    states, w_u = planted_readout()
    with pytest.raises(InputError, match=pattern):
        pga_sweep(states, readout_basis(w_u), PGASettings(**{"ks": (8,), **kwargs}))


def test_bad_arrays_are_named():
    states, w_u = planted_readout()
    basis = readout_basis(w_u)
    stacked = np.stack([states, states, states])
    stacked[2, 5, 3] = np.nan
    cases = [(states[:2], "N = 2"), (states[:, :30], "width 30 but W_U has d = 64"),
             (stacked, "NaN or Inf at layer\\(s\\) \\[2\\]"), (states[0], "1-D"), (stacked[None], "4-D")]
    for array, pattern in cases:
        with pytest.raises(InputError, match=pattern):
            pga_sweep(array, basis, PGASettings(ks=(8,), **FAST))
    with pytest.raises(InputError, match="Layer 3 is out of range.*0..2"):
        pga_sweep(np.stack([states] * 3), basis, PGASettings(ks=(8,), **FAST), layers=[3])


def test_cached_pga_computes_each_layer_k_ccr_once(tmp_path):
    states, w_u = planted_readout()
    stacked = np.stack([states, states * 2])
    cache, basis = ResultCache(tmp_path), readout_basis(w_u)
    settings = PGASettings(ks=(4, 8), ccrs=(0, 1), **FAST)
    first = cached_pga(stacked, {"id": "s"}, basis, {"id": "w"}, settings, [0, 1], cache=cache)
    calls = []
    again = cached_pga(stacked, {"id": "s"}, basis, {"id": "w"}, settings, [0, -1], cache=cache,
                       progress=lambda *a: calls.append(a))
    assert calls == [] and [r.z for r in again] == [r.z for r in first]
    assert [(r.layer, r.k, r.ccr) for r in again][:4] == [(0, 4, 0), (0, 4, 1), (0, 8, 0), (0, 8, 1)]


def count_fits(monkeypatch) -> list[int]:
    """The number of rows of every PCA fitted from now on (a layer's, on any core, or a scored half's spectrum)."""
    from analysis.geometry import ccr
    from analysis.geometry import pga as engine

    fits = []
    monkeypatch.setattr(ccr, "fit_pca", lambda x, top=None: fits.append(len(x)) or fit_pca(x, top))
    monkeypatch.setattr(engine, "fit_pca", ccr.fit_pca)
    return fits


@pytest.mark.parametrize("ccr_fit", ["same", "half"])
def test_remembered_pcas_are_the_ones_a_sweep_uses(monkeypatch, ccr_fit):
    from analysis.geometry import pga as engine

    states, w_u = planted_readout(n=90, seed=11)
    layers = np.stack([states, states * 2 + 1, states[::-1].copy()])
    settings = PGASettings(ks=(8,), ccrs=(1,), n_null=5, n_bootstrap=10, ccr_fit=ccr_fit, seed=4)
    cold = pga_sweep(layers, readout_basis(w_u), settings, memory=EngineMemory())
    memory, fits = EngineMemory(), count_fits(monkeypatch)
    stored = engine.fit_layer_pcas(layers, [0, 1, 2], settings, memory=memory)
    assert len(fits) == 3 and memory.count("pca") == 3
    warm = pga_sweep(layers, readout_basis(w_u), settings, memory=memory)
    assert len(fits) == (3 if ccr_fit == "same" else 6)  # no PCA refitted ("half": each layer's scored rows' spectrum)
    assert [r.z for r in warm] == [r.z for r in cold] and [r.rankme for r in warm] == [r.rankme for r in cold]
    memory = EngineMemory()  # a new process: the stored PCAs, through the cache's codec, instead of fitting
    assert all(engine.remember_fitted(layers, layer, settings, decode(encode(fitted)), memory=memory)
               for layer, fitted in enumerate(stored))
    assert not engine.remember_fitted(layers, 0, settings, stored[1], memory=memory)  # another layer's rows
    fits.clear()
    restored = pga_sweep(layers, readout_basis(w_u), settings, memory=memory)
    assert len(fits) == (0 if ccr_fit == "same" else 3)
    assert [r.z for r in restored] == [r.z for r in cold] and [r.pc1_angle_deg for r in restored] == [
        r.pc1_angle_deg for r in cold]


@pytest.mark.parametrize("ccr_fit", ["same", "half"])
def test_states_named_by_the_caller_are_hashed_once_per_layer(monkeypatch, ccr_fit):
    states, w_u = planted_readout(n=90, seed=13)
    layers, basis = np.stack([states, np.tanh(states)]), readout_basis(w_u)
    settings = PGASettings(ks=(8,), ccrs=(1,), n_null=5, n_bootstrap=10, ccr_fit=ccr_fit, seed=4)
    hashed, digest = [], pga._pca_key
    monkeypatch.setattr(pga, "_pca_key", lambda rows: hashed.append(len(rows)) or digest(rows))
    memory = EngineMemory()
    for c in (1, 2, 3):  # three slider moves on the same states
        named = pga_sweep(layers, basis, replace(settings, ccrs=(c,)), memory=memory, states_key="these states")
    per_layer = 1 if ccr_fit == "same" else 2  # each layer's rows once: the fitted ones, and the scored ones apart
    assert len(hashed) == 2 * per_layer
    plain = pga_sweep(layers, basis, replace(settings, ccrs=(3,)), memory=EngineMemory())
    assert [r.z for r in named] == [r.z for r in plain] and [r.rankme for r in named] == [r.rankme for r in plain]
    hashed.clear()
    pga_sweep(layers, basis, settings, memory=memory, states_key="other states")  # another name: hashed again
    assert len(hashed) == 2 * per_layer


def test_a_restarted_process_reads_the_layers_pcas_from_the_disk_cache(tmp_path, monkeypatch):
    from analysis.runs import pipeline

    states, w_u = planted_readout(n=90, seed=12)
    layers = np.stack([states, states * 3 - 1])
    basis, settings = readout_basis(w_u), PGASettings(ks=(8,), ccrs=(2,), n_null=5, n_bootstrap=10)
    first = cached_pga(layers, {"id": "restart"}, basis, {"id": "w"}, settings, [0, 1], cache=ResultCache(tmp_path),
                       memory=EngineMemory())
    fits = count_fits(monkeypatch)
    other = PGASettings(ks=(4,), ccrs=(2,), n_null=5, n_bootstrap=10)  # a new k: computed, on stored PCAs
    again = cached_pga(layers, {"id": "restart"}, basis, {"id": "w"}, other, [0, 1], cache=ResultCache(tmp_path),
                       memory=EngineMemory())
    assert fits == [] and [r.pc1_angle_deg for r in again] != [] and [r.rankme for r in again] == [
        r.rankme for r in first]
    changed, memory = layers * 2.0, EngineMemory()  # a spec reused for other states: not theirs, so fitted
    pipeline.ready_pcas(changed, {"id": "restart"}, other, cache=ResultCache(tmp_path), memory=memory)
    assert len(fits) == 2
    remembered = pga_sweep(changed, basis, other, memory=memory)
    assert [r.rankme for r in remembered] == [r.rankme for r in pga_sweep(changed, basis, other,
                                                                           memory=EngineMemory())]  # refitted
