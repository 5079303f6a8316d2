"""Principal components of a layer's hidden states and CCR-c (common-component removal).

CCR-c: centre the states over their N rows, then remove the top c principal components
(c = 0: centring only; the paper's default is c = 1). The components can be fitted on the same rows
or on a held-out half (see ``analysis.geometry.pga``). Everything here is float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.linalg import lapack

from analysis.cores import one_blas_thread


@dataclass(frozen=True)
class PCA:
    """Mean ``[d]``, components ``[d, r]`` (orthonormal columns) and variances ``[r]``, descending."""

    mean: torch.Tensor
    components: torch.Tensor
    variances: torch.Tensor


def _top_eigh(matrix: torch.Tensor, top: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Every eigenvalue ``[n]`` of a symmetric float64 ``matrix`` ``[n, n]``, descending, and the eigenvectors
    ``[n, r]`` of the top ``r = top`` (all when None).

    On the CPU, for a few of many: LAPACK's tridiagonal reduction once (``dsytrd``), every eigenvalue from it
    (``dsterf``), the top r vectors of the tridiagonal matrix by MRRR (``dstemr``), turned back by the reduction's
    reflectors (``dormqr``, which is ``dormtr`` for a lower reduction): what ``eigh`` does minus its n - r vectors
    and their back-transform, 27 ms on one core against eigh's 36-46 ms on two at n = 512 (AVX2). Elsewhere (or
    should LAPACK fail) ``eigh``."""
    n = len(matrix)
    if top is not None and top < n // 2 and matrix.device.type == "cpu":
        with one_blas_thread():
            found = _lapack_top(matrix.numpy(), top)
        if found is not None:
            return found
    values, vectors = torch.linalg.eigh(matrix)
    return values.flip(0), vectors.flip(1)[:, :top]


def _lapack_top(a: np.ndarray, top: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """:func:`_top_eigh` on the CPU by LAPACK's tridiagonal route; None should a routine report a failure."""
    n = len(a)
    reflectors, d, e, tau, info = lapack.dsytrd(a, lower=1, lwork=int(lapack.dsytrd_lwork(n, lower=1)[0]))
    values, info_values = lapack.dsterf(d, e)
    found, _, vectors, info_vectors = lapack.dstemr(d, np.append(e, 0.0), 2, 0.0, 0.0, n - top + 1, n)
    if info or info_values or info_vectors or found != top:
        return None
    vectors = vectors[:, :top]
    vectors[1:], _, info = lapack.dormqr("L", "N", reflectors[1:, :n - 1], tau, vectors[1:], lwork=64 * top + 65 * 64)
    return None if info else (torch.from_numpy(values[::-1].copy()), torch.from_numpy(vectors[:, ::-1].copy()))


def fit_pca(states: torch.Tensor, top: int | None = None) -> PCA:
    """PCA of ``states`` ``[N, d]`` via the smaller of the ``[d, d]`` and ``[N, N]`` eigenproblems: every variance and
    the top ``top`` components (all when None)."""
    x = states.to(torch.float64)
    mean = x.mean(dim=0)
    centred = x - mean
    n, d = centred.shape
    if d <= n:
        values, vectors = _top_eigh(centred.T @ centred, top)
    else:  # dual: eigenvectors a of X X^T give components X^T a / sqrt(lambda)
        values, dual = _top_eigh(centred @ centred.T, top)
        values = values[values > values[0] * 1e-12]
        dual = dual[:, :len(values)]
        vectors = centred.T @ dual / values[:dual.shape[1]].sqrt()
    return PCA(mean, vectors, values.clamp(min=0) / max(n - 1, 1))


def remove_components(states: torch.Tensor, pca: PCA, c: int) -> torch.Tensor:
    """``[N, d]`` float64: ``states`` centred by ``pca.mean`` with the top ``c`` components projected out."""
    return project_out(states.to(torch.float64) - pca.mean, pca, c)


def project_out(centred: torch.Tensor, pca: PCA, c: int) -> torch.Tensor:
    """``[N, d]`` float64: ``centred`` states (float64, less ``pca.mean``) with the top ``c`` components projected
    out, ``X - (X U_c) U_c^T``."""
    if c == 0:
        return centred
    top = pca.components[:, :c]
    return centred - (centred @ top) @ top.T
