"""Synthetic hidden states and unembeddings with a known answer, for the tests and the demo.

- ``planted_readout``: states that live (up to small noise) inside the top-k readout subspace of
  W_U, so the readout keeps their distance structure far better than random subspaces (z >> 0).
- ``masked_readout``: the same, plus one huge-variance direction orthogonal to the readout. At
  CCR-0 that direction dominates the cosine geometry and random subspaces keep more of it than the
  readout does (z < 0); CCR-1 removes it and the alignment reappears (the paper's masking, in miniature).
"""

from __future__ import annotations

import numpy as np


def random_unembedding(vocab: int, d: int, k: int, rng: np.random.Generator,
                       strength: float = 10.0) -> tuple[np.ndarray, np.ndarray]:
    """``W_U`` ``[vocab, d]`` whose top-k right singular subspace is a known basis ``B`` ``[d, k]``."""
    basis, _ = np.linalg.qr(rng.standard_normal((d, k)))
    w_u = strength * rng.standard_normal((vocab, k)) @ basis.T + rng.standard_normal((vocab, d))
    return w_u, basis


def planted_readout(n: int = 256, d: int = 64, k: int = 8, vocab: int = 500, noise: float = 0.1,
                    seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(states ``[n, d]``, W_U ``[vocab, d]``) with the states inside W_U's top-k subspace."""
    rng = np.random.default_rng(seed)
    w_u, basis = random_unembedding(vocab, d, k, rng)
    states = rng.standard_normal((n, k)) @ basis.T + noise * rng.standard_normal((n, d))
    return states.astype(np.float32), w_u.astype(np.float32)


def masked_readout(n: int = 256, d: int = 64, k: int = 8, vocab: int = 500, spike: float = 30.0,
                   noise: float = 0.3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Like :func:`planted_readout` plus one direction orthogonal to the readout with ``spike`` x std."""
    rng = np.random.default_rng(seed)
    w_u, basis = random_unembedding(vocab, d, k, rng)
    outside = rng.standard_normal(d)
    outside -= basis @ (basis.T @ outside)
    outside /= np.linalg.norm(outside)
    states = (rng.standard_normal((n, k)) @ basis.T + spike * rng.standard_normal((n, 1)) * outside
              + noise * rng.standard_normal((n, d)))
    return states.astype(np.float32), w_u.astype(np.float32)
