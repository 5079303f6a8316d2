"""Spectral summaries of a layer's (corrected) hidden states, from their covariance eigenvalues.

All take ``variances``: the eigenvalues of the covariance of the corrected states, descending
(zeros allowed; the singular values of the centred ``[N, d]`` matrix are ``sqrt((N - 1) * variances)``).

- RankMe (Garrido et al. 2023): ``exp(-sum p_i log p_i)``, ``p_i = s_i / sum s`` over singular values.
- alpha-ReQ (Agrawal et al. 2022): ``-slope`` of ``log lambda_i`` against ``log i`` by least squares
  over ranks ``i`` in ``fit = (first, last)`` (1-based, inclusive; default 1..100, positive values only).
- Isotropy: IsoScore (Rudman et al. 2022), scale-invariant, 0 = all variance in one direction,
  1 = equal variance in all d directions. With N <= d the covariance has rank < d, which caps it.
- Condition number: largest over smallest singular value among those above ``rtol`` times the largest
  (default 1e-5; removed CCR components and numerical zeros fall below it).

States with no variance at all (a text of one repeated token at the embedding layer) have no spectrum:
every metric is NaN there, drawn as a gap.
"""

from __future__ import annotations

import numpy as np


def _singular(variances: np.ndarray) -> np.ndarray:
    return np.sqrt(np.clip(np.asarray(variances, dtype=np.float64), 0, None))


def rankme(variances: np.ndarray) -> float:
    s = _singular(variances)
    s = s[s > 0]
    if not len(s):
        return float("nan")
    p = s / s.sum()
    return float(np.exp(-(p * np.log(p)).sum()))


def alpha_req(variances: np.ndarray, fit: tuple[int, int] = (1, 100)) -> float:
    lam = np.asarray(variances, dtype=np.float64)
    ranks = np.arange(1, len(lam) + 1)
    chosen = (ranks >= fit[0]) & (ranks <= fit[1]) & (lam > max(lam.max(initial=0.0), 0.0) * 1e-12)
    if chosen.sum() < 2:
        return float("nan")
    slope = np.polyfit(np.log(ranks[chosen]), np.log(lam[chosen]), 1)[0]
    return float(-slope)


def isoscore(variances: np.ndarray, d: int) -> float:
    lam = np.zeros(d)
    values = np.clip(np.asarray(variances, dtype=np.float64), 0, None)[:d]
    lam[: len(values)] = values
    if not lam.any():
        return float("nan")
    n = float(d)
    normalised = np.sqrt(n) * lam / np.linalg.norm(lam)
    defect = np.linalg.norm(normalised - 1) / np.sqrt(2 * (n - np.sqrt(n)))
    share = (n - defect**2 * (n - np.sqrt(n))) ** 2 / n**2
    return float((n * share - 1) / (n - 1))


def condition_number(variances: np.ndarray, rtol: float = 1e-5) -> float:
    s = _singular(variances)
    kept = s[s > s.max(initial=0.0) * rtol]
    return float(kept.max() / kept.min()) if len(kept) and kept.min() > 0 else float("nan")


def spectral_metrics(variances: np.ndarray, d: int, alpha_fit: tuple[int, int] = (1, 100)) -> dict:
    """``rankme``, ``alpha_req``, ``isotropy`` (IsoScore) and ``condition_number`` in one dict."""
    return {
        "rankme": rankme(variances),
        "alpha_req": alpha_req(variances, alpha_fit),
        "isotropy": isoscore(variances, d),
        "condition_number": condition_number(variances),
    }
