"""Rank correlation of many vectors against one, batched in torch, with average ranks for ties.

``spearman_many(reference, rows)`` equals ``scipy.stats.spearmanr(reference, row)`` for every row
(tested) at little more than the cost of one sort per row. In sorted order a row without ties has
the centred ranks ``c_j = j - (n - 1) / 2``, so its correlation is the dot product of ``c`` with the
reference's centred ranks gathered in that order. Ties (common among 10^5 float32 values) only
move the ranks inside each run of equal values to the run's mean, so they enter as a sparse
correction of the dot product and the classic ``sum (t^3 - t) / 12`` correction of the norm.

On the CPU the sort is numpy's vectorised sort of 64-bit keys ``(order-preserving bits of the float32
value) << 32 | position``, a few rows at a time on every core: one key sort yields both the order and
the ties, 5-7x faster than ``torch.sort`` of the values (``bench/pga.py`` prints both).

``spearman_ranked`` is the path of the PGA sweep, whose rows share one reference: ranked once
(:class:`RankedReference`), then each row by a compiled radix sort whose keys carry the reference's place of
their column (``analysis.geometry.radix``), reading each value where it lies (a pair's entry of a Gram matrix):
no comparison sort, no gathered copy, ties averaged on both sides, rho equal to the plain reference (tested).
``spearman_cosines`` is the same for rows made by the core that ranks them: each subspace's cosine similarities,
made a chunk of its Gram matrices at a time and turned into keys while the chunk is in the core's cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from analysis.cores import WORKERS, each_on_every_core, on_every_core
from analysis.geometry.radix import (
    count_subspaces,
    pair_weights,
    rank_sorted,
    rank_subspaces,
    rho_parts,
    scratch,
    settle_runs,
    sorted_keys,
)

GRAM_ROWS = 64  # rows of a Gram matrix made at a time: [64, <= T] float32 stays in a core's L2 cache
SIGNS_AT_ONCE = 8  # k = 1: subspaces counted a call (~0.6 ms on one core); alone, each took the GIL after 0.07 ms
TASK_VALUES = 2**20  # values sorted per task: a few rows of 10^5 pairs, most rows of 10^4
_LOW = np.int64(0xFFFFFFFF)
_MAGNITUDE = np.int32(0x7FFFFFFF)


def _sort_keys(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted keys' value part, order) of ``rows`` ``[m, n]`` float32: the value part is a monotone integer
    image of the float (equal exactly where the floats are equal), the order the positions it came from."""
    bits = (rows + np.float32(0)).view(np.int32)  # + 0 makes -0.0 into +0.0
    keys = (bits ^ ((bits >> 31) & _MAGNITUDE)).astype(np.int64) << 32
    keys |= np.arange(rows.shape[1], dtype=np.int64)
    keys.sort(axis=-1)
    return keys >> 32, keys & _LOW


def _row_tasks(count: int, per_row: int, task) -> list:
    """``task(rows)`` over ranges ``rows`` of consecutive row numbers ``0..count - 1``, a few rows at a time (about
    ``TASK_VALUES`` values, ``per_row`` a row) on every core."""
    step = max(1, min(TASK_VALUES // per_row, -(-count // WORKERS)))
    return on_every_core(task, [range(i, min(count, i + step)) for i in range(0, count, step)])


def _key_sorted(rows: torch.Tensor) -> bool:
    return rows.device.type == "cpu" and rows.dtype == torch.float32


def _sort_doubles(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted values, order) of ``rows`` ``[m, n]`` float64, stable: the key sort of their float32 roundings (monotone
    in the value), then each run of equal roundings put in the values' order (:func:`analysis.geometry.radix.
    settle_runs`; few and short among 10^5 distinct values)."""
    with np.errstate(over="ignore"):  # beyond float32's range a value rounds to +-inf: a run like any other
        coarse, order = _sort_keys(rows.astype(np.float32))
    for row in range(len(rows)):
        settle_runs(coarse[row], order[row], rows[row])
    return np.take_along_axis(rows, order, axis=-1), order


def sort_rows(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row of ``rows`` ``[m, n]`` sorted: (a tensor whose rows are equal exactly where the sorted values are
    equal, the order ``[m, n]`` int64). Stable key sorts for float32 and float64 on the CPU (for 10^5 float64 values
    4x faster than ``torch.sort``), else ``torch.sort``."""
    if rows.device.type == "cpu" and rows.dtype in (torch.float32, torch.float64):
        values = rows.detach().contiguous().numpy()
        sort = _sort_keys if rows.dtype == torch.float32 else _sort_doubles
        parts = _row_tasks(len(values), values.shape[1], lambda some: sort(values[some.start:some.stop]))
        return (torch.from_numpy(np.concatenate([p[0] for p in parts])),
                torch.from_numpy(np.concatenate([p[1] for p in parts])))
    return torch.sort(rows, dim=-1)


def _tie_runs(sorted_values: torch.Tensor):
    """Runs of equal values in sorted rows: (row, first position, length) of each run, ``[R]`` each."""
    row, pos = torch.nonzero(sorted_values[:, 1:] == sorted_values[:, :-1], as_tuple=True)
    if len(row) == 0:
        return row, pos, pos
    new = torch.ones_like(row, dtype=torch.bool)
    new[1:] = (row[1:] != row[:-1]) | (pos[1:] != pos[:-1] + 1)
    run = torch.cumsum(new, 0) - 1
    length = torch.bincount(run) + 1
    return row[new], pos[new], length


def _run_members(run_start: torch.Tensor, run_length: torch.Tensor):
    """For every element of every run: (index of its run, its offset inside the run)."""
    owner = torch.repeat_interleave(torch.arange(len(run_start), device=run_start.device), run_length)
    offset = torch.arange(len(owner), device=run_start.device) - torch.repeat_interleave(
        torch.cumsum(run_length, 0) - run_length, run_length)
    return owner, offset


def _ranked_dot(gathered: torch.Tensor, sorted_values: torch.Tensor):
    """Numerator and norm of the rank correlation for each row, ties averaged.

    ``gathered[i, j]`` is the reference's centred rank at the j-th smallest value of row ``i``.
    """
    n = gathered.shape[-1]
    plain = torch.arange(n, device=gathered.device, dtype=torch.float64) - (n - 1) / 2
    numerator = gathered @ plain
    norm_sq = torch.full_like(numerator, float(plain @ plain))
    run_row, run_start, run_length = _tie_runs(sorted_values)
    if len(run_row):
        owner, offset = _run_members(run_start, run_length)
        delta = ((run_length[owner] - 1) / 2 - offset).double()  # average rank minus plain rank
        rows = run_row[owner]
        numerator.index_add_(0, rows, gathered[rows, run_start[owner] + offset] * delta)
        t = run_length.double()
        norm_sq.index_add_(0, run_row, -(t**3 - t) / 12)
    return numerator, norm_sq.sqrt()


@dataclass(frozen=True)
class RankedReference:
    """A reference vector ``[n]`` ranked once for many rows: ``flagged`` ``[n]`` uint32 (each column's place in the
    reference's stable ascending order, flagged inside its tie runs: :func:`analysis.geometry.radix.rank_sorted`),
    ``centred`` ``[n]`` float64 (its centred average ranks, as :func:`centred_ranks`) and ``shift`` ``[n]`` float64 by
    place (average rank minus place: nonzero only inside the reference's tie runs)."""

    flagged: np.ndarray
    centred: torch.Tensor
    shift: np.ndarray

    @property
    def norm(self) -> float:
        return float(self.centred.norm())

    def rho(self, numerators: np.ndarray, norms: np.ndarray) -> torch.Tensor:
        """``[m]`` rho from the rows' numerators and rank norms ``[m]`` against this reference (NaN for a constant
        row)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return torch.from_numpy(numerators / (self.norm * norms))


def ranked_reference(values: torch.Tensor) -> RankedReference:
    """``values`` ``[n]`` ranked as :class:`RankedReference` (ties averaged): float32 on the CPU by a compiled radix
    sort (:func:`analysis.geometry.radix.sorted_keys`; 130,816 pairs in ~1 ms against ~6 ms by the key sort), else
    by :func:`sort_rows`."""
    if _key_sorted(values):
        sorted_values, order = sorted_keys(values.detach().contiguous().numpy())
    else:
        sorted_values, order = (part[0].cpu().numpy() for part in sort_rows(values[None]))
    flagged, centred, shift = rank_sorted(sorted_values, order)
    return RankedReference(flagged, torch.as_tensor(centred, device=values.device), shift)


def spearman_ranked(reference: RankedReference, values: torch.Tensor, flat: torch.Tensor | None = None) -> torch.Tensor:
    """``[m]`` Spearman correlations with one reference of the rows ``values[:, flat]``: ``values`` ``[m, G]`` (e.g.
    each subspace's Gram matrices, flattened), ``flat`` ``[n]`` int64 positions in a row (default: all). Equal to
    :func:`spearman_many` of the gathered rows (ties averaged; NaN for a constant row). On the CPU a compiled radix
    sort of each row that reads the values in place and carries the reference's places
    (:func:`analysis.geometry.radix.rho_parts`), a few rows per core; elsewhere the gathered rows' sort."""
    if not _key_sorted(values):
        return spearman_many(reference.centred, values if flat is None else values.index_select(1, flat))
    rows = values.detach().contiguous().numpy()
    positions = np.arange(rows.shape[1]) if flat is None else flat.cpu().numpy().astype(np.int64, copy=False)
    numerators, norms = np.empty(len(rows)), np.empty(len(rows))
    _row_tasks(len(rows), len(positions), lambda some: rho_parts(
        rows[some.start:some.stop], positions, reference.flagged, reference.shift, numerators[some.start:some.stop],
        norms[some.start:some.stop]))
    return reference.rho(numerators, norms)


@dataclass(frozen=True)
class PairRows:
    """Pairs inside blocks of ``block`` consecutive tokens, grouped by the token of their row: the pairs of token
    ``i`` (its block's row ``i % block``) are ``t`` in ``starts[i]..starts[i + 1] - 1`` ``[T + 1]`` int64, at column
    ``cols[t]`` ``[n]`` int32 of the block. The tokens are the points' rows taken in ``order`` ``[T]`` (None: as they
    come)."""

    block: int
    starts: np.ndarray
    cols: np.ndarray
    order: np.ndarray | None = None


def pair_rows(flat: np.ndarray, block: int, tokens: int, order: np.ndarray | None = None) -> PairRows:
    """:class:`PairRows` of the pairs ``flat`` ``[n]`` (ascending flat indices into the ``[tokens // block, block,
    block]`` Gram matrices, above their diagonals) among the points' rows taken in ``order``."""
    flat = np.asarray(flat, dtype=np.int64)
    starts = np.searchsorted(flat // block, np.arange(tokens + 1))
    return PairRows(block, starts, (flat % block).astype(np.int32), order)


def spearman_cosines(reference: RankedReference, points: np.ndarray, pairs: PairRows,
                     pause: Callable[[], None] | None = None, every: int = 1) -> torch.Tensor:
    """``[m]`` Spearman correlations with ``reference`` of each subspace's cosine similarities at ``pairs``:
    ``points`` ``[m, N, k]`` float32 (taken in ``pairs.order``, the tokens fall in blocks of ``pairs.block``). Each core
    takes the next subspace and ranks it in one compiled call (:func:`analysis.geometry.radix.rank_subspaces`: its
    points taken in that order and normalised, their Gram matrices made ``GRAM_ROWS`` rows at a time and keyed while
    in the core's cache (:func:`analysis.geometry.radix.cosine_keys`), then sorted; no Python between the steps, so
    the cores do not wait for the interpreter, which the dashboard's server shares); at k = 1 it counts the three tie
    runs instead (:func:`analysis.geometry.radix.count_subspaces`, 15x faster), ``SIGNS_AT_ONCE`` subspaces a call.
    ``pause`` is called before each ``every`` subspaces after the first (:func:`each_on_every_core`).
    Equal to :func:`spearman_ranked` of the Gram matrices up to their float32 rounding (tested). BLAS calls on every
    core: call it under :func:`analysis.cores.one_blas_thread`."""
    m = len(points)
    numerators, norms = np.empty(m), np.empty(m)
    order = np.arange(points.shape[1]) if pairs.order is None else np.asarray(pairs.order, np.int64)
    counted = points.shape[-1] == 1  # k = 1: every cosine is -1, 0 or +1, ranked by counting
    at_once = SIGNS_AT_ONCE if counted else 1

    def rank(item: int, space: tuple) -> None:
        first, stop = item * at_once, min(m, (item + 1) * at_once)
        if counted:
            count_subspaces(points, first, stop, order, pairs.starts, pairs.cols, pairs.block, space, numerators,
                            norms)
        else:
            rank_subspaces(points, first, stop, order, pairs.starts, pairs.cols, pairs.block, GRAM_ROWS,
                           reference.flagged, reference.shift, *space, numerators, norms)

    if counted:
        weights = pair_weights(reference.flagged, reference.shift)  # 0.05 ms: made per call, never remembered
        each_on_every_core(rank, -(-m // at_once), lambda: weights, pause, max(1, every // at_once))
    else:
        each_on_every_core(rank, m, lambda: scratch(len(pairs.cols)), pause, every)
    return reference.rho(numerators, norms)


def compile_kernels() -> None:
    """The compiled rank kernels built (or read from numba's disk cache) with the types the sweeps pass them: the
    chunked path, the small blocks' path, the count at k = 1 and the in-place path, on a few random tokens."""
    tokens = 3 * GRAM_ROWS
    points = np.random.default_rng(0).standard_normal((1, tokens, 2)).astype(np.float32)
    for block in (tokens, 2):
        rows, cols = np.triu_indices(block, 1)
        flat = (np.arange(tokens // block)[:, None] * block**2 + rows * block + cols).ravel()
        reference = ranked_reference(torch.from_numpy(np.arange(len(flat), dtype=np.float32)))
        for width in (2, 1):
            spearman_cosines(reference, np.ascontiguousarray(points[..., :width]), pair_rows(flat, block, tokens))
    spearman_ranked(reference, torch.zeros((1, len(flat))))


def centred_ranks(values: torch.Tensor) -> torch.Tensor:
    """``[n]`` average ranks of a vector minus their mean, float64, in the original order."""
    return ranked_reference(values).centred


def spearman_many(reference_centred: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``[m]`` Spearman correlations of each row of ``rows`` ``[m, n]`` with one reference vector.

    ``reference_centred`` is ``centred_ranks(reference)``.
    """
    if _key_sorted(rows):  # sort, gather and dot a few rows at a time on every core, in cache
        values = rows.detach().contiguous().numpy()

        def task(some: range):
            sorted_values, order = (torch.from_numpy(part) for part in _sort_keys(values[some.start:some.stop]))
            return _ranked_dot(reference_centred[order], sorted_values)

        parts = _row_tasks(len(values), values.shape[1], task)
        numerator, norms = (torch.cat(part) for part in zip(*parts, strict=True))
    else:
        sorted_values, order = sort_rows(rows)
        numerator, norms = _ranked_dot(reference_centred[order], sorted_values)
    return numerator / (reference_centred.norm() * norms)
