"""Cross-model convergence: do two models arrange the same texts alike?

Units: mean-pooled hidden states of the same text passages (``analysis.activations.pooling``), so models with
different tokenizers share them exactly. For a layer of each model, the centred pooled states give
cosine distances between every pair of units; the statistic is Spearman's rho between the two
models' distance vectors (a) in the full spaces, (b) each in its own model's top-k readout subspace
(k = 100 by default), (c) each in a random k-dimensional subspace (R seeded draws: the null band).
Layers are paired at matched relative depth, or all against all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from analysis.errors import require
from analysis.geometry.pga import NullMoments, null_bases
from analysis.geometry.ranks import centred_ranks, spearman_many
from analysis.geometry.readout import ReadoutBasis


@dataclass(frozen=True)
class LayerConvergence(NullMoments):
    layer_a: int
    layer_b: int
    full: float
    readout: float
    null: np.ndarray


def _distances(points: torch.Tensor) -> torch.Tensor:
    """Condensed cosine distances (i < j) of the rows of ``points`` ``[U, d]``."""
    unit = torch.nn.functional.normalize(points, dim=-1)
    rows, cols = torch.triu_indices(len(points), len(points), 1)
    return 1 - (unit @ unit.T)[rows, cols]


def matched_pairs(n_a: int, n_b: int) -> list[tuple[int, int]]:
    """Each layer of A with B's layer at the same relative depth."""
    return [(a, round(a / max(n_a - 1, 1) * (n_b - 1))) for a in range(n_a)]


def convergence(pooled_a: np.ndarray, pooled_b: np.ndarray, basis_a: ReadoutBasis, basis_b: ReadoutBasis,
                k: int = 100, n_null: int = 20, seed: int = 0, pairs: list[tuple[int, int]] | None = None
                ) -> list[LayerConvergence]:
    """rho of the two models' unit distances per layer pair: full, readout-k, and a random-k null."""
    require(pooled_a.shape[1] == pooled_b.shape[1] and pooled_a.shape[1] >= 3,
            f"The two models must be pooled over the same units (at least 3); got {pooled_a.shape[1]} and "
            f"{pooled_b.shape[1]}.")
    require(n_null >= 2, f"The null needs at least 2 draws; got {n_null}.")
    k = min(k, pooled_a.shape[2], pooled_b.shape[2])
    pairs = matched_pairs(len(pooled_a), len(pooled_b)) if pairs is None else pairs
    nulls_a = torch.as_tensor(null_bases(pooled_a.shape[2], k, n_null, seed))
    nulls_b = torch.as_tensor(null_bases(pooled_b.shape[2], k, n_null, seed + 1))
    results = []
    for layer_a, layer_b in pairs:
        a = torch.as_tensor(pooled_a[layer_a], dtype=torch.float64)
        b = torch.as_tensor(pooled_b[layer_b], dtype=torch.float64)
        a, b = a - a.mean(0), b - b.mean(0)
        reference = centred_ranks(_distances(a))
        full = spearman_many(reference, _distances(b)[None])[0]
        read_a = centred_ranks(_distances(a @ torch.as_tensor(basis_a.top(k))))
        readout = spearman_many(read_a, _distances(b @ torch.as_tensor(basis_b.top(k)))[None])[0]
        null = [float(spearman_many(centred_ranks(_distances(a @ qa)), _distances(b @ qb)[None])[0])
                for qa, qb in zip(nulls_a, nulls_b, strict=True)]
        results.append(LayerConvergence(layer_a, layer_b, float(full), float(readout), np.array(null)))
    return results
