import numpy as np
import pytest
import torch

from analysis.capacity.epsilon import (
    cosine_histogram,
    cosine_stats,
    paired_cosines,
    pairwise_stats_by_blocks,
    rows_histogram,
    unit_rows,
)
from analysis.errors import InputError


def brute_force(matrix):
    x = matrix[np.abs(matrix).max(axis=1) > 0]
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    sims = (x @ x.T)[np.triu_indices(len(x), 1)]
    return sims.mean(), sims.std(), sims


@pytest.mark.parametrize("seed", [0, 1])
def test_closed_form_equals_brute_force_with_zero_rows(seed):
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((700, 24)) + 0.3  # a common direction: mu clearly above 0
    matrix[[3, 50, 699]] = 0
    mu, sigma, _ = brute_force(matrix)
    stats = cosine_stats(matrix, device="cpu")
    assert (stats.n_rows, stats.n_zero_rows, stats.d) == (697, 3, 24)
    assert stats.mu == pytest.approx(mu, abs=1e-9) and stats.sigma == pytest.approx(sigma, abs=1e-9)
    assert stats.epsilon == pytest.approx(mu + 2 * sigma, abs=1e-9)
    blocks = pairwise_stats_by_blocks(matrix, device="cpu")
    assert blocks.mu == pytest.approx(mu, abs=1e-7) and blocks.sigma == pytest.approx(sigma, abs=1e-7)


def test_orthonormal_rows_have_zero_epsilon_and_identical_rows_one():
    assert cosine_stats(np.eye(16)).epsilon == pytest.approx(0.0, abs=1e-12)
    same = cosine_stats(np.ones((10, 4)))
    assert same.mu == pytest.approx(1.0) and same.sigma == pytest.approx(0.0, abs=1e-6)


def test_exact_block_histogram_matches_numpy_and_counts_every_pair(monkeypatch):
    import analysis.capacity.epsilon as epsilon

    monkeypatch.setattr(epsilon, "BLOCK_ROWS", 128)  # several blocks, and a ragged last one
    matrix = np.random.default_rng(2).standard_normal((1000, 16)) + 0.2
    _, _, sims = brute_force(matrix)
    histogram = cosine_histogram(matrix, bins=300, device="cpu")
    expected, _ = np.histogram(sims, bins=300, range=(-1, 1))
    assert histogram.counts.sum() == 1000 * 999 // 2 and histogram.sampled is None
    # float32 similarities land in the neighbouring bin only when within rounding of an edge
    assert np.abs(histogram.counts - expected).sum() <= 1e-4 * len(sims)
    assert histogram.mean == pytest.approx(sims.mean(), abs=2e-3)


def test_sampled_histogram_states_its_size_and_agrees():
    matrix = np.random.default_rng(3).standard_normal((800, 16)) + 0.2
    exact = cosine_histogram(matrix, device="cpu")
    sampled = cosine_histogram(matrix, sample_pairs=200_000, seed=1, device="cpu")
    assert sampled.sampled == 200_000 and sampled.counts.sum() == 200_000
    assert sampled.mean == pytest.approx(exact.mean, abs=5e-3)
    again = cosine_histogram(matrix, sample_pairs=200_000, seed=1, device="cpu")
    np.testing.assert_array_equal(sampled.counts, again.counts)


def test_preview_histogram_counts_every_pair_among_random_rows_and_finds_planted_clusters():
    rng = np.random.default_rng(4)
    centres = rng.standard_normal((2, 64)) * 3
    matrix = centres[rng.integers(0, 2, 6000)] + rng.standard_normal((6000, 64))  # two clusters: two modes
    matrix[[5, 17]] = 0
    preview = rows_histogram(matrix, bins=200, rows=500, seed=2, device="cpu")
    assert preview.sampled == 500 * 499 // 2 == preview.counts.sum()
    rows = np.sort(np.random.default_rng([2, 5998]).permutation(np.flatnonzero(np.abs(matrix).max(1) > 0))[:500])
    _, _, sims = brute_force(matrix[rows])
    expected, _ = np.histogram(sims, bins=200, range=(-1, 1))
    assert np.abs(preview.counts - expected).sum() <= 1e-4 * len(sims)  # a plain reference on the same rows
    exact = cosine_histogram(matrix, bins=200, device="cpu")
    assert preview.mean == pytest.approx(exact.mean, abs=0.01)
    shares = preview.shares
    within, across = shares[np.searchsorted(preview.edges, 0.85) - 1], shares[np.searchsorted(preview.edges, 0.0)]
    assert within > 5 * across > 0 or across > 5 * within > 0  # the two modes, not one bump
    noise = rows_histogram(rng.standard_normal((3000, 64)), bins=200, rows=500, device="cpu")
    assert abs(noise.mean) < 0.01 and noise.counts[np.abs(noise.edges[:-1]) > 0.6].sum() == 0  # nothing planted
    everything = rows_histogram(matrix[:300], bins=200, rows=1000, device="cpu")  # fewer rows than asked: all
    np.testing.assert_array_equal(everything.counts, cosine_histogram(matrix[:300], bins=200, device="cpu").counts)


def test_paired_cosines():
    a = np.random.default_rng(4).standard_normal((50, 8))
    np.testing.assert_allclose(paired_cosines(a, 3 * a), 1.0)
    np.testing.assert_allclose(paired_cosines(a, -a), -1.0)


def test_bad_matrices():
    with pytest.raises(InputError, match="0 non-zero rows.*all-zero"):
        cosine_stats(np.zeros((5, 3)))
    with pytest.raises(InputError, match="\\[V, d\\] matrix"):
        cosine_stats(np.zeros(5))
    for bad in (np.nan, np.inf):
        matrix = np.random.default_rng(0).standard_normal((3000, 8))
        matrix[2500, 3] = bad  # in the third block of rows
        with pytest.raises(InputError, match="NaN or Inf"):
            cosine_stats(matrix)


def test_too_large_for_memory_says_how_much(monkeypatch):
    import analysis.capacity.epsilon as epsilon

    monkeypatch.setattr(epsilon, "available_bytes", lambda device: 1000)
    with pytest.raises(InputError, match="needs about .* GiB.*sample rows"):
        unit_rows(torch.ones(100, 10), torch.device("cpu"))


def test_compiled_bin_counts_equal_numpy_at_the_edges_and_count_only_pairs_above_the_diagonal():
    from analysis.capacity.binning import count_bins

    edges = np.linspace(-1, 1, 9)
    # every edge, both ends, values past +-1 (clamped into the end bins), NaN (not counted), and noise
    values = np.concatenate([edges, [-1.5, 1.5, np.nan], np.random.default_rng(5).uniform(-1, 1, 9988)])
    block = torch.as_tensor(values.astype(np.float32).reshape(100, 100))
    expected, _ = np.histogram(np.clip(values[np.isfinite(values)].astype(np.float32), -1, 1), bins=8, range=(-1, 1))
    np.testing.assert_array_equal(count_bins(block, 8), expected)
    rows, cols = np.triu_indices(100, 1)  # rows split over the cores: each part keeps its place in the square
    above, _ = np.histogram(np.clip(block.numpy()[rows, cols], -1, 1), bins=8, range=(-1, 1))
    np.testing.assert_array_equal(count_bins(block, 8, upper=True), above)
