"""The readout subspace V_k: top-k right singular vectors of the unembedding W_U ``[V, d]``.

Computed as the eigenvectors of ``W_U^T W_U`` ``[d, d]`` in float64 (same subspace as an SVD of
W_U, far cheaper), accumulated over row blocks so a 256k vocabulary never needs a float64 copy of
W_U (on the CPU, the blocks spread over every core). Computed once per model; every k is a slice.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from analysis.cores import gram64
from analysis.errors import require
from analysis.storage.codec import storable


@storable
@dataclass(frozen=True)
class ReadoutBasis:
    """Right singular vectors of W_U by descending singular value.

    Attributes:
        vectors: ``[d, d]`` float64, orthonormal columns.
        singular_values: ``[d]`` float64, descending.
    """

    vectors: np.ndarray
    singular_values: np.ndarray

    @property
    def d(self) -> int:
        return self.vectors.shape[0]

    @cached_property
    def digest(self) -> bytes:
        """blake2b of the vectors: names this basis (and with k, V_k) in the engine's memory."""
        return hashlib.blake2b(np.ascontiguousarray(self.vectors).data, digest_size=16).digest()

    def top(self, k: int) -> np.ndarray:
        """``[d, k]`` basis of V_k; InputError unless 1 <= k <= d."""
        require(1 <= k <= self.d, f"k = {k} is out of range: the readout subspace dimension must be "
                                  f"between 1 and d = {self.d}.")
        return self.vectors[:, :k]


def readout_basis(w_u: np.ndarray | torch.Tensor, device: str | torch.device = "cpu") -> ReadoutBasis:
    """Eigen-decompose ``W_U^T W_U`` (float64, row blocks) into a :class:`ReadoutBasis`."""
    w_u = torch.as_tensor(w_u)
    require(w_u.ndim == 2 and w_u.shape[0] >= 1,
            f"The unembedding must be a [V, d] matrix with V >= 1; got shape {tuple(w_u.shape)}.")
    gram = gram64(w_u, device)
    # the diagonal's sums of squares are finite exactly when every entry is (a weight's square fits float64)
    require(bool(torch.isfinite(gram.diagonal()).all()), "The unembedding holds NaN or Inf values.")
    eigenvalues, eigenvectors = torch.linalg.eigh(gram)
    order = torch.argsort(eigenvalues, descending=True)
    singular = eigenvalues[order].clamp(min=0).sqrt()
    return ReadoutBasis(eigenvectors[:, order].cpu().numpy(), singular.cpu().numpy())
