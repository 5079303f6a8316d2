"""Principal components of a layer's hidden states and CCR-c (common-component removal).

CCR-c: centre the states over their N rows, then remove the top c principal components
(c = 0: centring only; the paper's default is c = 1). The components can be fitted on the same rows
or on a held-out half (see ``analysis.geometry.pga``). Everything here is float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from analysis.cores import on_every_core, one_blas_thread
from analysis.geometry.eigen import top_eigh


@dataclass(frozen=True)
class PCA:
    """Mean ``[d]``, components ``[d, r]`` (orthonormal columns) and variances ``[r]``, descending."""

    mean: torch.Tensor
    components: torch.Tensor
    variances: torch.Tensor


def _top_eigh(matrix, top: int | None):
    """Every eigenvalue ``[n]`` of a symmetric float64 ``matrix`` ``[n, n]`` (numpy on the CPU, else torch), descending,
    and the eigenvectors ``[n, r]`` of the top ``r = top`` (all when None), of the matrix's type. On the CPU, for a few
    of many, LAPACK's tridiagonal route without the GIL (:func:`analysis.geometry.eigen.top_eigh`; a PCA takes 22-27 ms
    on one core against eigh's 36-46 ms on two at n = 512, AVX2); else (or should LAPACK fail) ``eigh``."""
    if isinstance(matrix, np.ndarray):
        if top is not None and top < len(matrix) // 2:
            with one_blas_thread():
                values, vectors, info = top_eigh(np.array(matrix), top)
            if info == 0:
                return values[::-1], vectors[::-1].T
        values, vectors = np.linalg.eigh(matrix)
        return values[::-1], vectors[:, ::-1][:, :top]
    values, vectors = torch.linalg.eigh(matrix)
    return values.flip(0), vectors.flip(1)[:, :top]


def fit_pca(states: torch.Tensor, top: int | None = None) -> PCA:
    """PCA of ``states`` ``[N, d]`` via the smaller of the ``[d, d]`` and ``[N, N]`` eigenproblems: every variance and
    the top ``top`` components (all when None). On the CPU in numpy, which uses no torch threads: so that
    :func:`fit_pcas` can fit a layer on each core at once."""
    on_cpu = states.device.type == "cpu" and states.dtype in (torch.float32, torch.float64)
    x = states.numpy().astype(np.float64) if on_cpu else states.to(torch.float64)
    mean = x.mean(0)
    centred = x - mean
    n, d = centred.shape
    if d <= n:
        values, vectors = _top_eigh(centred.T @ centred, top)
    else:  # dual: eigenvectors a of X X^T give components X^T a / sqrt(lambda)
        values, dual = _top_eigh(centred @ centred.T, top)
        values = values[values > values[0] * 1e-12]
        dual = dual[:, :len(values)]
        vectors = centred.T @ dual / values[:dual.shape[1]] ** 0.5
    variances = (values + abs(values)) / (2 * max(n - 1, 1))  # negative rounding to 0
    return PCA(*(torch.as_tensor(np.ascontiguousarray(a) if on_cpu else a) for a in (mean, vectors, variances)))


def fit_pcas(states: list[torch.Tensor], top: int) -> list[PCA]:
    """``[fit_pca(s, top) for s in states]``; on the CPU a layer per core at once. LAPACK's tridiagonal reduction,
    most of a PCA, does not go faster on two threads (BLAS-2, bound by memory), but two reductions on two cores do
    (they run without the GIL: :mod:`analysis.geometry.eigen`)."""
    if len(states) < 2 or states[0].device.type != "cpu":
        return [fit_pca(s, top) for s in states]
    with one_blas_thread():
        return on_every_core(lambda s: fit_pca(s, top), states)


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
