"""Exact Spearman numerators of rows against a ranked reference, by a radix sort compiled with numba.

For one row of float32 values ``x`` ``[n]`` and a reference whose stable ascending order puts column ``i`` at
place ``p_i`` (a permutation of ``0..n-1``), with ``c = (n - 1) / 2``:

    numerator = sum_j (r_j - c)(a_{p_j} - c) = sum_j r_j (p_j + s_{p_j}) - n c^2
    norm^2    = n (n^2 - 1) / 12 - sum_runs (t^3 - t) / 12

where ``j`` runs over the row's ascending order, ``r_j`` is the row's average rank there (the mean place of
its run of ``t`` equal values), ``p_j`` the reference place of that column and ``s_p`` the reference's own
shift at place ``p`` (its average rank minus ``p``: nonzero only inside the reference's tie runs). Then
``rho = numerator / (||reference's centred ranks|| * norm)``, equal to ``scipy.stats.spearmanr`` (tested).

How: each value becomes a 32-bit key monotone in the float (``-0.0`` equal to ``+0.0``), carried with its
``p`` in one 64-bit word, sorted by two stable counting passes of 16 bits (least significant first). A
linear scan of the sorted words gives the runs, ``r_j`` and ``p_j``: no comparison sort, no gather, one
compiled loop per pass. ``nogil``: the caller runs rows on every core. numba comes with umap-learn and
caches the compiled code on disk (the first call in a new install compiles it, ~1.5 s).
"""

from __future__ import annotations

import numpy as np
from numba import njit

SIGN = np.uint32(0x80000000)
DIGIT = np.uint32(0xFFFF)
PLACE = np.uint64(0x7FFFFFFF)
TIED = np.uint64(0x80000000)
WORD = np.uint64(32)
HIGH_DIGIT = np.uint64(48)


@njit(inline="always")
def _monotone(bits):
    """The float32 whose bits are ``bits`` as a uint32 in the float's order (``-0.0`` as ``+0.0``)."""
    if bits == SIGN:
        return SIGN
    return ~bits if bits & SIGN else bits | SIGN


@njit(inline="always")
def _offsets(count):
    """Counts per digit, in place, into each digit's first place in the sorted row."""
    total = np.int32(0)
    for digit in range(len(count)):
        here = count[digit]
        count[digit] = total
        total += here


@njit(nogil=True, cache=True)
def _sort_row(bits, flagged, by_low, by_value, count):
    """One row's 64-bit words ``key << 32 | flagged place`` into ``by_value`` ``[n]``, ascending by value: two
    stable counting passes over ``bits`` ``[n]`` uint32 (the float32 values), low 16 bits first."""
    count[:] = 0
    for i in range(len(bits)):
        key = _monotone(bits[i])
        count[0, key & DIGIT] += 1
        count[1, key >> 16] += 1
    _offsets(count[0])
    _offsets(count[1])
    for i in range(len(bits)):  # by the low 16 bits, the words built on the way
        key = _monotone(bits[i])
        digit = key & DIGIT
        by_low[count[0, digit]] = (np.uint64(key) << WORD) | flagged[i]
        count[0, digit] += 1
    for i in range(len(bits)):  # by the high 16 bits: sorted by value
        word = by_low[i]
        digit = word >> HIGH_DIGIT
        by_value[count[1, digit]] = word
        count[1, digit] += 1


@njit(nogil=True, cache=True)
def _row_ties(by_value, shift):
    """(sum_j (r_j - j)(p_j + s_{p_j}), sum (t^3 - t) / 12) over the sorted row's own tie runs."""
    n = len(by_value)
    numerator, ties, start = 0.0, 0.0, 0
    while start < n:
        end = start + 1
        while end < n and by_value[end] >> WORD == by_value[start] >> WORD:
            end += 1
        if end - start > 1:
            rank = start + (end - start - 1) / 2.0
            for j in range(start, end):
                p = by_value[j] & PLACE
                numerator += (rank - j) * (float(p) + shift[p])
            t = float(end - start)
            ties += (t * t * t - t) / 12.0
        start = end
    return numerator, ties


@njit(nogil=True, cache=True)
def rho_parts(values, place, shift, numerators, norms):
    """Fill ``numerators`` and ``norms`` ``[m]`` float64 for ``values`` ``[m, n]`` float32 (C order) against a
    reference given by ``place`` ``[n]`` int64 (``p_i``) and ``shift`` ``[n]`` float64 (``s_p``, by place)."""
    m, n = values.shape
    c = (n - 1) / 2.0
    flagged = np.empty(n, np.uint64)  # each column's place, TIED set inside the reference's tie runs
    for i in range(n):
        flagged[i] = np.uint64(place[i]) | (TIED if shift[place[i]] != 0.0 else np.uint64(0))
    by_low, by_value = np.empty(n, np.uint64), np.empty(n, np.uint64)
    count = np.empty((2, 65536), np.int32)
    bits = values.view(np.uint32)
    for row in range(m):
        _sort_row(bits[row], flagged, by_low, by_value, count)
        numerator = 0.0  # sum_j j p_j + sum_j j s_{p_j}
        row_ties = 0
        previous = ~(by_value[0] >> WORD)  # unequal to every value
        for j in range(n):
            word = by_value[j]
            row_ties += word >> WORD == previous
            previous = word >> WORD
            p = word & PLACE
            numerator += float(j) * float(p)
            if word & TIED:
                numerator += j * shift[p]
        ties = 0.0
        if row_ties:
            tied_numerator, ties = _row_ties(by_value, shift)
            numerator += tied_numerator
        numerators[row] = numerator - n * c * c
        norms[row] = np.sqrt(n * (n * n - 1.0) / 12.0 - ties)
