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

``spearman_ranked`` is the exact path of the PGA sweep, whose rows share one reference: each key carries
the reference's rank ``p`` of its column in place of the column (``RankedReference.position``), so the key
sort yields the reference's rank ``p_j`` of the row's j-th smallest value and the numerator is the integer
dot ``sum_j j p_j``: no gather of the reference per value. The reference's few tie runs are corrected with
the row's average ranks of the tied columns, found by binary search in the sorted row.

For previews, ``spearman_quantised`` ranks each row by its values quantised to 16 bits over the row's
range (65,536 levels), sorted by numpy's radix sort (the stable argsort of ``uint16``), ties broken by
position: no 64-bit keys and no tie correction, within ~1e-6 of the exact rho on 10^4-10^5 continuous
values (tested), 3-5x cheaper. A row where most values tie (a one-dimensional subspace, whose cosines
are all +-1) gets average ranks instead, as the exact path gives.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

TASK_VALUES = 2**20  # values sorted per task: a few rows of 10^5 pairs, most rows of 10^4
WORKERS = max(1, min(torch.get_num_threads(), os.cpu_count() or 1))
_SORTERS = ThreadPoolExecutor(WORKERS)
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


def _row_tasks(rows: torch.Tensor, task):
    """``task(values [a few, n] float32 numpy)`` over consecutive rows, on every core."""
    values = rows.detach().contiguous().numpy()
    step = max(1, min(TASK_VALUES // values.shape[1], -(-len(values) // WORKERS)))
    return list(_SORTERS.map(task, [values[i:i + step] for i in range(0, len(values), step)]))


def _key_sorted(rows: torch.Tensor) -> bool:
    return rows.device.type == "cpu" and rows.dtype == torch.float32


def sort_rows(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row of ``rows`` ``[m, n]`` sorted: (a tensor whose rows are equal exactly where the sorted
    values are equal, the order ``[m, n]`` int64). Key sorts for float32 on the CPU, else ``torch.sort``."""
    if not _key_sorted(rows):
        return torch.sort(rows, dim=-1)
    parts = _row_tasks(rows, _sort_keys)
    return (torch.from_numpy(np.concatenate([p[0] for p in parts])),
            torch.from_numpy(np.concatenate([p[1] for p in parts])))


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


def _runs_np(row: np.ndarray, pos: np.ndarray):
    """:func:`_tie_runs` from the ``(row, position)`` of each sorted value equal to the next one, in numpy:
    (row, first position, length) of each run."""
    new = np.ones(len(row), dtype=bool)
    new[1:] = (row[1:] != row[:-1]) | (pos[1:] != pos[:-1] + 1)
    length = np.bincount(np.cumsum(new) - 1) + 1
    return row[new], pos[new], length


@dataclass(frozen=True)
class RankedReference:
    """A reference vector ``[n]`` ranked once for many rows: ``position`` ``[n]`` int64 (each column's place in
    the reference's stable ascending order), ``centred`` ``[n]`` float64 (its centred average ranks, as
    :func:`centred_ranks`), the columns inside its tie runs ``tied`` ``[T]`` and their ``shift`` ``[T]`` (average
    rank minus plain rank ``position - (n - 1) / 2``)."""

    position: np.ndarray
    centred: torch.Tensor
    tied: np.ndarray
    shift: np.ndarray

    @property
    def norm(self) -> float:
        return float(self.centred.norm())


def ranked_reference(values: torch.Tensor) -> RankedReference:
    """``values`` ``[n]`` ranked as :class:`RankedReference` (ties averaged)."""
    sorted_values, order = (part[0] for part in sort_rows(values[None]))
    n = values.shape[-1]
    plain = torch.arange(n, device=values.device, dtype=torch.float64) - (n - 1) / 2
    shift = torch.zeros_like(plain)
    _, run_start, run_length = _tie_runs(sorted_values[None])
    if len(run_start):
        owner, offset = _run_members(run_start, run_length)
        shift[run_start[owner] + offset] = ((run_length[owner] - 1) / 2 - offset).double()
    position, centred = torch.empty_like(order), torch.empty_like(plain)
    position[order], centred[order] = torch.arange(n, device=values.device), plain + shift
    tied = order[shift != 0]
    return RankedReference(position.cpu().numpy(), centred, tied.cpu().numpy(), shift[shift != 0].cpu().numpy())


def _ranked_task(reference: RankedReference, n: int):
    """``task(values [a few, n] float32 numpy)`` -> (numerators, norms) of rho: with ``c = (n - 1) / 2``, the keys
    ``value << 32 | p`` sorted give ``sum_j (j - c)(p_j - c) = sum_j j p_j - n c^2``, the row's tie runs shift ``j``
    (their ``p_j`` are at hand), the reference's shift its tied columns, weighted by the row's average ranks
    there (binary search in the sorted row)."""
    c = (n - 1) / 2
    positions = np.arange(n, dtype=np.int64)

    def task(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        bits = (values + np.float32(0)).view(np.int32)  # + 0 makes -0.0 into +0.0
        bits ^= (bits >> 31) & _MAGNITUDE  # now monotone in the value
        keys = bits.astype(np.int64)
        keys <<= 32
        keys |= reference.position
        keys.sort(axis=-1)
        ranks = keys & _LOW
        numerator = (ranks @ positions).astype(np.float64) - n * c * c
        norm_sq = np.full(len(values), n * (n * n - 1) / 12)
        values_only = keys >> 32
        tie = np.flatnonzero(values_only[:, 1:] == values_only[:, :-1])
        if len(tie):
            run_row, run_start, run_length = _runs_np(tie // (n - 1), tie % (n - 1))
            owner = np.repeat(np.arange(len(run_row)), run_length)
            offset = np.arange(len(owner)) - np.repeat(np.cumsum(run_length) - run_length, run_length)
            rows, at = run_row[owner], run_start[owner] + offset
            shift = (run_length[owner] - 1) / 2 - offset
            numerator += np.bincount(rows, shift * (ranks[rows, at] - c), minlength=len(values))
            t = run_length.astype(np.float64)
            norm_sq -= np.bincount(run_row, (t**3 - t) / 12, minlength=len(values))
        if len(reference.tied):
            for i, sorted_row in enumerate(values_only):
                wanted = bits[i, reference.tied]
                average = (np.searchsorted(sorted_row, wanted, "left") + np.searchsorted(sorted_row, wanted, "right")
                           - 1) / 2
                numerator[i] += reference.shift @ (average - c)
        return numerator, np.sqrt(norm_sq)

    return task


def spearman_ranked(reference: RankedReference, rows: torch.Tensor) -> torch.Tensor:
    """``[m]`` Spearman correlations of each row of ``rows`` ``[m, n]`` with one reference: equal to
    :func:`spearman_many` (ties averaged; NaN for a constant row), without gathering the reference per value."""
    if not _key_sorted(rows):
        return spearman_many(reference.centred, rows)
    parts = _row_tasks(rows, _ranked_task(reference, rows.shape[1]))
    numerator, norms = (np.concatenate(part) for part in zip(*parts, strict=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        return torch.from_numpy(numerator / (reference.norm * norms))


def centred_ranks(values: torch.Tensor) -> torch.Tensor:
    """``[n]`` average ranks of a vector minus their mean, float64, in the original order."""
    return ranked_reference(values).centred


LEVELS = 2**16  # quantisation levels of a preview's ranks
HEAVY_TIES = 0.5  # a row where more than this share of its values ties with a neighbour gets average ranks


def _quantised(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each row of ``values`` ``[m, n]`` quantised to 16 bits over the row's range, uint16; whether each row
    varies ``[m]``)."""
    low = values.min(axis=1, keepdims=True)
    span = values.max(axis=1, keepdims=True) - low
    return ((values - low) * ((LEVELS - 1) / np.where(span > 0, span, 1))).astype(np.uint16), span[:, 0] > 0


def _quantised_task(reference: np.ndarray):
    """``task(values [a few, n])`` -> (numerators, norms) of rho against the reference's centred ranks ``[n]``:
    each row ranked by its 16-bit levels in numpy's radix sort (the stable argsort of ``uint16``), ties by
    position, or averaged (:func:`_ranked_dot`) where more than ``HEAVY_TIES`` of its values tie (the cosines
    of a one-dimensional projection are all +-1); NaN for a constant row."""
    n = len(reference)
    plain = np.arange(n, dtype=np.float64) - (n - 1) / 2

    def task(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        levels, varies = _quantised(values)
        order = np.argsort(levels, axis=1, kind="stable")
        sorted_levels = np.take_along_axis(levels, order, axis=1)
        gathered = np.take(reference, order)
        numerator = np.einsum("ij,j->i", gathered, plain)  # not BLAS: no threads inside threads
        norms = np.full(len(values), math.sqrt(n * (n * n - 1) / 12))  # ||plain||
        tied = np.count_nonzero(sorted_levels[:, 1:] == sorted_levels[:, :-1], axis=1)
        heavy = np.flatnonzero(varies & (tied > HEAVY_TIES * n))
        if len(heavy):
            averaged = _ranked_dot(torch.from_numpy(gathered[heavy]), torch.from_numpy(sorted_levels[heavy]))
            numerator[heavy], norms[heavy] = (part.numpy() for part in averaged)
        return np.where(varies, numerator, np.nan), norms

    return task


def centred_ranks_quantised(values: torch.Tensor) -> torch.Tensor:
    """``[n]`` average ranks of a vector's values quantised to 16 bits, minus their mean, float64, in the
    original order: :func:`centred_ranks` for previews."""
    levels, _ = _quantised(values.detach().cpu().float().numpy()[None])
    return centred_ranks(torch.from_numpy(levels[0].astype(np.float32))).to(values.device)


def spearman_quantised(reference_centred: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``[m]`` Spearman correlations of each row of ``rows`` ``[m, n]`` with one reference vector, each row
    ranked by its values quantised to 16 bits over its range (ties by position; averaged where they are
    most of the row): :func:`spearman_many` to ~1e-6 on continuous values, for previews (NaN for a constant
    row, as there). ``torch.sort`` (exact ranks) off the CPU."""
    if not _key_sorted(rows):
        return spearman_many(reference_centred, rows)
    parts = _row_tasks(rows, _quantised_task(reference_centred.cpu().numpy()))
    numerator, norms = (np.concatenate(part) for part in zip(*parts, strict=True))
    return torch.from_numpy(numerator / (float(reference_centred.norm()) * norms))


def spearman_many(reference_centred: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``[m]`` Spearman correlations of each row of ``rows`` ``[m, n]`` with one reference vector.

    ``reference_centred`` is ``centred_ranks(reference)``.
    """
    if _key_sorted(rows):  # sort, gather and dot a few rows at a time on every core, in cache
        def task(values: np.ndarray):
            sorted_values, order = (torch.from_numpy(part) for part in _sort_keys(values))
            return _ranked_dot(reference_centred[order], sorted_values)

        numerator, norms = (torch.cat(part) for part in zip(*_row_tasks(rows, task), strict=True))
    else:
        sorted_values, order = sort_rows(rows)
        numerator, norms = _ranked_dot(reference_centred[order], sorted_values)
    return numerator / (reference_centred.norm() * norms)
