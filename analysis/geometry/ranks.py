"""Rank correlation of many vectors against one, batched in torch, with average ranks for ties.

``spearman_many(reference, rows)`` equals ``scipy.stats.spearmanr(reference, row)`` for every row
(tested) at little more than the cost of one sort per row. In sorted order a row without ties has
the centred ranks ``c_j = j - (n - 1) / 2``, so its correlation is the dot product of ``c`` with the
reference's centred ranks gathered in that order. Ties (common among 10^5 float32 values) only
move the ranks inside each run of equal values to the run's mean, so they enter as a sparse
correction of the dot product and the classic ``sum (t^3 - t) / 12`` correction of the norm.
"""

from __future__ import annotations

import torch


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


def centred_ranks(values: torch.Tensor) -> torch.Tensor:
    """``[n]`` average ranks of a vector minus their mean, float64, in the original order."""
    sorted_values, order = torch.sort(values)
    n = values.shape[-1]
    ranks = torch.arange(n, device=values.device, dtype=torch.float64) - (n - 1) / 2
    _, run_start, run_length = _tie_runs(sorted_values[None])
    if len(run_start):
        owner, offset = _run_members(run_start, run_length)
        ranks[run_start[owner] + offset] += ((run_length[owner] - 1) / 2 - offset).double()
    centred = torch.empty_like(ranks)
    centred[order] = ranks
    return centred


def spearman_many(reference_centred: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``[m]`` Spearman correlations of each row of ``rows`` ``[m, n]`` with one reference vector.

    ``reference_centred`` is ``centred_ranks(reference)``.
    """
    sorted_values, order = torch.sort(rows, dim=-1)
    numerator, norms = _ranked_dot(reference_centred[order], sorted_values)
    return numerator / (reference_centred.norm() * norms)
