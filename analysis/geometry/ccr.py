"""Principal components of a layer's hidden states and CCR-c (common-component removal).

CCR-c: centre the states over their N rows, then remove the top c principal components
(c = 0: centring only; the paper's default is c = 1). The components can be fitted on the same rows
or on a held-out half (see ``analysis.geometry.pga``). Everything here is float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PCA:
    """Mean ``[d]``, components ``[d, r]`` (orthonormal columns) and variances ``[r]``, descending."""

    mean: torch.Tensor
    components: torch.Tensor
    variances: torch.Tensor


def fit_pca(states: torch.Tensor) -> PCA:
    """PCA of ``states`` ``[N, d]`` via the smaller of the ``[d, d]`` and ``[N, N]`` eigenproblems."""
    x = states.to(torch.float64)
    mean = x.mean(dim=0)
    centred = x - mean
    n, d = centred.shape
    if d <= n:
        values, vectors = torch.linalg.eigh(centred.T @ centred)
        values, vectors = values.flip(0), vectors.flip(1)
    else:  # dual: eigenvectors a of X X^T give components X^T a / sqrt(lambda)
        values, dual = torch.linalg.eigh(centred @ centred.T)
        values, dual = values.flip(0), dual.flip(1)
        keep = values > values[0] * 1e-12
        values, dual = values[keep], dual[:, keep]
        vectors = centred.T @ dual / values.sqrt()
    return PCA(mean, vectors, values.clamp(min=0) / max(n - 1, 1))


def remove_components(states: torch.Tensor, pca: PCA, c: int) -> torch.Tensor:
    """``[N, d]`` float64: ``states`` centred by ``pca.mean`` with the top ``c`` components projected out."""
    centred = states.to(torch.float64) - pca.mean
    if c == 0:
        return centred
    top = pca.components[:, :c]
    return centred - (centred @ top) @ top.T
