"""Cosine-similarity statistics of a matrix's rows: mu, sigma, epsilon = mu + 2 sigma, histograms.

Rows that are exactly zero are dropped, the rest L2-normalised; the statistics are over the signed
cosine similarity of every pair i < j (no centring). With normalised rows ``x_i``, ``s = sum x_i`` and
``G = X^T X`` (``[d, d]``), the pair sums need no ``[V, V]`` matrix:
``sum_{i<j} cos = (||s||^2 - V) / 2`` and ``sum_{i<j} cos^2 = (||G||_F^2 - V) / 2`` (float64).
The histogram (default 300 bins over [-1, 1], y = share of pairs) needs the pairs: exactly, by
row blocks on the chosen device, or from a seeded uniform sample of pairs when asked.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import torch

from analysis.capacity.binning import count_bins
from analysis.cores import gram64
from analysis.errors import InputError, require
from analysis.models.devices import pick_device
from analysis.progress import Progress, report
from analysis.storage.codec import storable

BLOCK_ROWS = 1024
SAMPLE_CHUNK = 1 << 13  # pairs gathered at a time: two [8192, d] row gathers stay in cache (2x faster than 1 << 16)


@storable
@dataclass(frozen=True)
class CosineStats:
    """Moments of the pairwise cosine similarities of a matrix's non-zero rows."""

    mu: float
    sigma: float
    n_rows: int
    n_zero_rows: int
    d: int

    @property
    def epsilon(self) -> float:
        """``mu + 2 sigma``."""
        return self.mu + 2 * self.sigma

    @property
    def n_pairs(self) -> int:
        return self.n_rows * (self.n_rows - 1) // 2


@storable
@dataclass(frozen=True)
class Histogram:
    """Counts of values in bins ``edges`` (``[bins + 1]``); ``sampled`` is the number of sampled pairs
    (None when every pair was counted)."""

    edges: np.ndarray
    counts: np.ndarray
    sampled: int | None = None

    @property
    def shares(self) -> np.ndarray:
        return self.counts / max(int(self.counts.sum()), 1)

    @property
    def mean(self) -> float:
        centres = (self.edges[:-1] + self.edges[1:]) / 2
        return float((self.shares * centres).sum())


def available_bytes(device: torch.device) -> int:
    """Free memory on ``device``: CUDA's free bytes, or the machine's physical memory for the CPU."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def unit_rows(matrix: np.ndarray | torch.Tensor, device: torch.device) -> tuple[torch.Tensor, int]:
    """(non-zero rows normalised to unit length, float32 on ``device``; number of zero rows dropped), normalised in
    float64 a block of rows at a time (not in a float64 copy of the matrix: 0.8 GB at 50,304 x 2,048)."""
    matrix = torch.as_tensor(matrix)
    require(matrix.ndim == 2, f"Expected a [V, d] matrix; got shape {tuple(matrix.shape)}.")
    need = matrix.shape[0] * matrix.shape[1] * 4 * 2
    if need > available_bytes(device):
        raise InputError(f"A {tuple(matrix.shape)} matrix needs about {need / 2**30:.1f} GiB on {device}, "
                         f"more than is free; sample rows instead (max_rows / --max-rows).")
    rows = matrix.to(device=device, dtype=torch.float32)
    nonzero = torch.cat([block.ne(0).any(dim=1) for block in rows.split(BLOCK_ROWS)])
    n_kept = int(nonzero.sum())
    require(n_kept >= 2, f"The matrix has {n_kept} non-zero rows; epsilon needs at least 2 "
                         "(an all-zero matrix has no directions).")
    unit, done = torch.empty(n_kept, rows.shape[1], device=device), 0
    for block, keep in zip(rows.split(BLOCK_ROWS), nonzero.split(BLOCK_ROWS), strict=True):
        exact = block[keep].to(torch.float64)
        norms = exact.norm(dim=1, keepdim=True)
        require(bool(torch.isfinite(norms).all()), "The matrix holds NaN or Inf values.")
        unit[done:done + len(exact)] = exact / norms
        done += len(exact)
    return unit, len(rows) - n_kept


def cosine_stats(matrix: np.ndarray | torch.Tensor, device: str = "auto") -> CosineStats:
    """Exact mu and sigma of all pairwise cosines by the closed form (no ``[V, V]`` matrix)."""
    torch_device = pick_device(device)
    x, n_zero = unit_rows(matrix, torch_device)
    n, d = x.shape
    total = sum(block.sum(dim=0, dtype=torch.float64) for block in x.split(BLOCK_ROWS))
    gram = gram64(x, torch_device)
    pairs = n * (n - 1) / 2
    mean = (float(total @ total) - n) / 2 / pairs
    mean_square = (float(gram.square().sum()) - n) / 2 / pairs
    return CosineStats(mean, math.sqrt(max(mean_square - mean**2, 0.0)), n, n_zero, d)


def pair_blocks(x: torch.Tensor, block_rows: int = BLOCK_ROWS):
    """Yield the cosines of every pair i < j of unit rows ``x``, one flat tensor per block of rows."""
    n = len(x)
    for start in range(0, n, block_rows):
        rows = x[start:start + block_rows]
        square = rows @ rows.T
        yield square[torch.ones_like(square, dtype=torch.bool).triu(1)]
        if start + block_rows < n:
            yield (rows @ x[start + block_rows:].T).flatten()


def pairwise_stats_by_blocks(matrix: np.ndarray | torch.Tensor, device: str = "auto") -> CosineStats:
    """The same moments from explicit similarity blocks: the slow reference for the closed form."""
    torch_device = pick_device(device)
    x, n_zero = unit_rows(matrix, torch_device)
    first = second = 0.0
    for values in pair_blocks(x):
        values = values.to(torch.float64)
        first += float(values.sum())
        second += float(values.square().sum())
    pairs = len(x) * (len(x) - 1) / 2
    mean = first / pairs
    return CosineStats(mean, math.sqrt(max(second / pairs - mean**2, 0.0)), len(x), n_zero, x.shape[1])


def cosine_histogram(matrix: np.ndarray | torch.Tensor, bins: int = 300, sample_pairs: int | None = None,
                     seed: int = 0, device: str = "auto", progress: Progress | None = None) -> Histogram:
    """Histogram of all pairwise cosines over [-1, 1] (exact, by blocks), or of ``sample_pairs``
    pairs drawn uniformly (seeded, i != j, with replacement)."""
    require(isinstance(bins, int) and bins >= 1, f"The histogram needs at least 1 bin; got bins = {bins!r}.")
    require(sample_pairs is None or sample_pairs >= 1, f"sample_pairs must be at least 1; got {sample_pairs}.")
    torch_device = pick_device(device)
    x, _ = unit_rows(matrix, torch_device)
    n = len(x)
    edges = np.linspace(-1.0, 1.0, bins + 1)
    counts = torch.zeros(bins, dtype=torch.int64, device=torch_device)
    if sample_pairs is not None:
        require(sample_pairs >= 1, f"sample_pairs must be at least 1; got {sample_pairs}.")
        rng = np.random.default_rng(seed)
        for start in range(0, sample_pairs, SAMPLE_CHUNK):
            size = min(SAMPLE_CHUNK, sample_pairs - start)
            i = torch.as_tensor(rng.integers(0, n, size), device=torch_device)
            j = (i + torch.as_tensor(rng.integers(1, n, size), device=torch_device)) % n  # uniform j != i
            counts += _bin((x[i] * x[j]).sum(1), bins)
        return Histogram(edges, counts.cpu().numpy(), sample_pairs)
    total, done = n * (n - 1) // 2, 0
    buffer = torch.empty(min(n, BLOCK_ROWS) * n, device=torch_device)  # one block's cosines, reused
    for start in range(0, n, BLOCK_ROWS):
        report(progress, "pairs counted, per cent", 100 * done // max(total, 1), 100)
        rows = x[start:start + BLOCK_ROWS]
        block = torch.matmul(rows, x[start:].T, out=buffer[:len(rows) * (n - start)].view(len(rows), n - start))
        counts += _count_pairs(block, bins)  # row i's pairs: columns j > i
        done += len(rows) * (n - start) - len(rows) * (len(rows) + 1) // 2
    report(progress, "pairs counted, per cent", 100, 100)
    return Histogram(edges, counts.cpu().numpy())


def _count_pairs(block: torch.Tensor, bins: int) -> torch.Tensor:
    """int64 counts per bin over [-1, 1] of ``block[i, j]`` for ``j > i``: counted in place, on every core, on the
    CPU; gathered, then :func:`_bin`, elsewhere."""
    if block.device.type == "cpu":
        return torch.from_numpy(count_bins(block, bins, upper=True))
    return _bin(block[torch.ones_like(block, dtype=torch.bool).triu(1)], bins)


PREVIEW_ROWS = 2048  # a preview histogram counts every pair among this many random rows: ~2 x 10^6 pairs, < 1 s


def rows_histogram(matrix: np.ndarray | torch.Tensor, bins: int = 300, rows: int = PREVIEW_ROWS, seed: int = 0,
                   device: str = "auto") -> Histogram:
    """Histogram of every pairwise cosine among ``rows`` seeded random non-zero rows (all rows when there are
    fewer): one ``[rows, rows]`` Gram matrix, an honest first look at the all-pairs histogram (each pair of
    distinct rows is equally likely to be counted). ``sampled`` is the number of pairs counted."""
    require(isinstance(bins, int) and bins >= 1, f"The histogram needs at least 1 bin; got bins = {bins!r}.")
    require(rows >= 2, f"A preview needs at least 2 rows; got {rows}.")
    torch_device = pick_device(device)
    x = torch.as_tensor(matrix)
    nonzero = torch.nonzero(x.abs().amax(dim=1) > 0)[:, 0].numpy()
    chosen = np.sort(np.random.default_rng([seed, len(nonzero)]).permutation(nonzero)[:rows])
    unit, _ = unit_rows(x[torch.as_tensor(chosen)], torch_device)
    return Histogram(np.linspace(-1.0, 1.0, bins + 1), _count_pairs(unit @ unit.T, bins).cpu().numpy(),
                     len(unit) * (len(unit) - 1) // 2)


def _bin(values: torch.Tensor, bins: int, chunk: int = 1 << 23) -> torch.Tensor:
    """int64 counts per bin over [-1, 1] of ``values`` (any shape): on the CPU the compiled kernel
    (:func:`~analysis.capacity.binning.count_bins`, the one bin rule there); elsewhere ``torch.histc``, which counts
    in the input's float32, exact only below 2**24 per bin, so it runs on chunks of 2**23 values, ``values``
    clamped in place (rounding can pass +-1)."""
    if values.device.type == "cpu":
        return torch.from_numpy(count_bins(values.reshape(1, -1), bins))
    flat = values.reshape(-1).clamp_(-1, 1)
    counts = torch.zeros(bins, dtype=torch.int64, device=values.device)
    for start in range(0, len(flat), chunk):
        counts += torch.histc(flat[start:start + chunk], bins, -1, 1).to(torch.int64)
    return counts


def paired_cosines(first: np.ndarray | torch.Tensor, second: np.ndarray | torch.Tensor) -> np.ndarray:
    """``[V]`` cos(first_i, second_i), e.g. each token's embedding against its unembedding row.

    Rows where either vector is zero are dropped.
    """
    a, b = torch.as_tensor(first, dtype=torch.float64), torch.as_tensor(second, dtype=torch.float64)
    require(a.shape == b.shape, f"The two matrices differ in shape: {tuple(a.shape)} vs {tuple(b.shape)}.")
    norms = a.norm(dim=1) * b.norm(dim=1)
    keep = norms > 0
    return ((a[keep] * b[keep]).sum(1) / norms[keep]).numpy()


@storable
@dataclass(frozen=True)
class MatrixGeometry:
    """Cosine statistics and histogram of one stored matrix (W_E or W_U) of a model, and where it was read."""

    which: str
    stats: CosineStats
    histogram: Histogram
    tied_embeddings: bool
    model_type: str
    tensor_name: str
