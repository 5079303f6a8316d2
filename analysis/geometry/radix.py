"""Exact Spearman numerators of rows against a ranked reference, by a radix sort compiled with numba.

For one row of float32 values ``x`` ``[n]`` and a reference whose stable ascending order puts column ``i`` at
place ``p_i`` (a permutation of ``0..n-1``), with ``c = (n - 1) / 2``:

    numerator = sum_j (r_j - c)(a_{p_j} - c) = sum_j r_j (p_j + s_{p_j}) - n c^2
    norm^2    = n (n^2 - 1) / 12 - sum_runs (t^3 - t) / 12

where ``j`` runs over the row's ascending order, ``r_j`` is the row's average rank there (the mean place of
its run of ``t`` equal values), ``p_j`` the reference place of that column and ``s_p`` the reference's own
shift at place ``p`` (its average rank minus ``p``: nonzero only inside the reference's tie runs). Then
``rho = numerator / (||reference's centred ranks|| * norm)``, equal to ``scipy.stats.spearmanr`` (tested).

How, per row:
- each value is read where it lies (``flat``: its position in the row, e.g. a pair's entry of a Gram matrix, so
  the pairs are never gathered into a copy; or a chunk of a Gram matrix just made, still in the core's cache:
  :func:`chunk_keys`) and becomes a 32-bit key monotone in the float, without a branch (``-0.0`` equal to ``+0.0``);
- the key, carried with ``p`` in one 64-bit word, is sorted by three stable counting passes of 10, 10 and 12 bits,
  least significant first: each pass's counters and write positions (at most 4,096) stay in the core's nearest
  caches, where two passes of 16 bits missed them at every value (1.5x slower on 2 AVX2 cores). The last digit is
  the widest: it holds the sign, the exponent and the mantissa's top bits, which cosines share in a few runs (with 10
  bits, a quarter of a row fell on one counter, whose every update waited for the one before: 11, 11, 10 bits sorted
  5-15 % slower);
- the last pass adds ``j p_j`` in integers as it gives each word its place ``j``, and the corrections of the row's
  tie runs as they form (equal keys reach their last digit's counter one after another; the branch into a run is
  rarely taken), without writing the sorted row: no fourth pass over it.
No comparison sort, no gather per value. The reference itself is sorted once per layer by the same passes
(:func:`sorted_keys`). ``nogil``: the caller runs rows on every core. numba comes with
umap-learn and caches the compiled code on disk (the first call in a new install compiles it, ~2 s).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from analysis.compiled import kernel

SIGN = np.uint32(0x80000000)
MAGNITUDE = np.uint32(0x7FFFFFFF)
DIGIT = np.uint32(0x3FF)  # the first two digits: 10 bits each; the third is the key's top 12
SECOND, THIRD = np.uint64(32 + 10), np.uint64(32 + 20)  # the digits' shifts inside a word
COUNTERS = (1024, 1024, 4096)
PLACE = np.uint64(0x7FFFFFFF)
LOW = np.uint64(0xFFFFFFFF)
TIED = np.uint64(0x80000000)
WORD = np.uint64(32)


@njit(inline="always")
def _monotone(bits):
    """The float32 whose bits are ``bits`` as a uint32 in the float's order (``-0.0`` as ``+0.0``), branch-free:
    a negative float's bits all flipped, a positive one's sign bit set."""
    key = bits ^ (((bits >> 31) * MAGNITUDE) | SIGN)
    return key + np.uint32(key == MAGNITUDE)  # -0.0 lands just below +0.0: lift it onto it


@njit(inline="always")
def _offsets(count):
    """Counts per digit, in place, into each digit's first place in the sorted row."""
    total = np.int32(0)
    for digit in range(len(count)):
        here = count[digit]
        count[digit] = total
        total += here


@njit(inline="always")
def _keep(bits, t, keys, count):
    """The key of the float32 whose bits are ``bits`` (:func:`_monotone`) into ``keys[t]``, and counted in each of its
    three digits' counters ``count`` ``[3, 4096]``."""
    key = _monotone(bits)
    keys[t] = key
    count[0, key & DIGIT] += 1
    count[1, (key >> 10) & DIGIT] += 1
    count[2, key >> 20] += 1


@kernel(nogil=True)
def _keys_at(row, flat, keys, count):
    """The keys of ``row[flat]`` (``row`` ``[G]`` float32 bits as uint32, ``flat`` ``[n]`` int64) into ``keys`` ``[n]``
    uint32, counted into ``count``."""
    for i in range(len(flat)):
        _keep(row[flat[i]], i, keys, count)


@kernel(nogil=True)
def chunk_keys(gram, first, starts, cols, keys, count):
    """The keys of the pairs in rows ``first..`` of a Gram matrix made a chunk at a time: ``gram`` ``[R, w]`` float32
    holds its rows ``first..first + R - 1`` against its columns ``first..`` (the upper triangle needs no more); the
    pairs of row ``first + r`` are ``t`` in ``starts[r]..starts[r + 1] - 1``, at column ``cols[t]`` (int32). Keys
    into ``keys[t]`` (uint32), counted into ``count``."""
    bits = gram.view(np.uint32)
    for r in range(gram.shape[0]):
        start, end = starts[r], starts[r + 1]
        if start == end:
            continue
        offset = cols[start] - first - start
        if cols[end - 1] - first - (end - 1) == offset:  # consecutive columns (every pair of the row): no reads of cols
            for t in range(start, end):
                _keep(bits[r, t + offset], t, keys, count)
        else:
            for t in range(start, end):
                _keep(bits[r, cols[t] - first], t, keys, count)


@kernel(nogil=True)
def cosine_keys(points, order, starts, cols, block, chunk, keys, count):
    """The keys of the cosine similarities of ``points`` ``[N, k]`` float32, taken in ``order`` ``[T]`` int64 (the
    tokens fall in blocks of ``block``), at the pairs of row ``t`` ``starts[t]..starts[t + 1] - 1`` (int64), column
    ``cols`` (int32) of its block, into ``keys`` ``[n]`` uint32, counted into ``count`` ``[3, 4096]`` (zeroed first).
    The points are normalised as they are taken; each block's Gram matrix is made ``chunk`` rows at a time from the
    diagonal on (``unit[a:a + chunk] @ unit[a:].T``: half the multiplications; a block of at most two chunks whole)
    and its pairs keyed while the chunk is in the core's cache (:func:`chunk_keys`)."""
    tokens, width = len(order), points.shape[1]
    unit = np.empty((tokens, width), np.float32)
    for t in range(tokens):
        row = points[order[t]]
        norm = np.float32(0.0)
        for j in range(width):
            norm += row[j] * row[j]
        norm = max(np.sqrt(norm), np.float32(1e-12))
        for j in range(width):
            unit[t, j] = row[j] / norm  # divided, not multiplied by 1 / norm: at k = 1 every cosine is exactly +-1
    count[:] = 0
    rows = block if block <= 2 * chunk else chunk
    for top in range(0, tokens, block):
        for a in range(0, block, rows):
            first, last = top + a, top + min(a + rows, block)
            if starts[first] < starts[last]:
                gram = np.dot(unit[first:last], unit[first:top + block].T)
                chunk_keys(gram, a, starts[first:last + 1], cols, keys, count)


@kernel()
def pair_weights(flagged, shift):
    """``[n]`` int64 ``2 (p_i + s_{p_i})`` of each column ``i`` of a reference given by ``flagged`` ``[n]`` uint32 and
    ``shift`` ``[n]`` float64 (as :func:`rho_of_keys` takes them): an integer, ``s`` being a multiple of 1/2."""
    weights = np.empty(len(flagged), np.int64)
    for i in range(len(flagged)):
        p = flagged[i] & PLACE
        weights[i] = 2 * np.int64(p) + (np.int64(2.0 * shift[p]) if flagged[i] & TIED else 0)
    return weights


@njit(inline="always")
def _agreeing(sign, here, top, cols, start, end, weights):
    """(count, sum of ``weights``) over the pairs ``start..end - 1`` of a row whose point has sign ``here``, among
    those whose other point (column ``cols[i]`` of the block at ``top``) has the same sign; read straight from ``sign``
    where the columns are consecutive (every pair of the row: a loop the compiler vectorises)."""
    count, total = 0, 0
    offset = top + cols[start] - start
    if top + cols[end - 1] - (end - 1) == offset:
        for i in range(start, end):
            agree = sign[i + offset] == here
            count += agree
            total += weights[i] if agree else 0
    else:
        for i in range(start, end):
            agree = sign[top + cols[i]] == here
            count += agree
            total += weights[i] if agree else 0
    return count, total


@kernel(nogil=True)
def sign_rho(points, order, starts, cols, block, weights):
    """(numerator, norm) as :func:`rho_of_keys` of the keys :func:`cosine_keys` makes from ``points`` ``[N, 1]``
    float32 (k = 1), by counting instead of sorting; ``weights`` the reference's :func:`pair_weights`. At k = 1 a point
    divided by its norm is exactly -1, +1 or 0 (for any value whose square float32 holds), so each pair's cosine is the
    product of its points' signs: the row is at most three tie runs (-1, 0, +1), and
    ``numerator = sum_runs r_run sum_{j in run} (p_j + s_{p_j}) - n c^2`` with ``r_run`` the run's average rank (all
    runs' sums together: twice the sum of ranks 0..n - 1, n (n - 1)). One pass over the pairs sums the weights of the
    runs of 0 and +1 in int64 scalars: where no point is 0 (almost always), a pair is +1 exactly where its points'
    signs agree, one comparison per pair (0.07 ms for 130,816 pairs on one AVX2 core, against 1.1 ms for the radix
    sort, whose passes ran slower on such a row than on distinct values)."""
    tokens = len(order)
    sign = np.empty(tokens, np.int64)
    zero_points = 0
    for t in range(tokens):
        x = points[order[t], 0]
        sign[t] = (x > 0) - (x < 0)
        zero_points += sign[t] == 0
    zeros, positives, q_zeros, q_positives = 0, 0, 0, 0  # scalars: no update waits on memory
    for t in range(tokens):
        start, end = starts[t], starts[t + 1]
        if start == end:
            continue
        top = t - t % block
        if zero_points == 0:
            count, total = _agreeing(sign, sign[t], top, cols, start, end, weights)
            positives, q_positives = positives + count, q_positives + total
            continue
        for i in range(start, end):  # a cosine may be 0
            cosine = sign[t] * sign[top + cols[i]]
            zero, positive = np.int64(cosine == 0), np.int64(cosine > 0)
            zeros, positives = zeros + zero, positives + positive
            q_zeros, q_positives = q_zeros + zero * weights[i], q_positives + positive * weights[i]
    n = len(weights)
    q_all = n * (n - 1)  # twice the sum of the reference's average ranks 0..n - 1, whatever its ties
    c = (n - 1) / 2.0
    numerator, ties, first = 0.0, 0.0, 0
    for t, twice_q in ((n - zeros - positives, q_all - q_zeros - q_positives), (zeros, q_zeros),
                       (positives, q_positives)):  # the runs of -1, 0 and +1, in order
        numerator += (first + (t - 1.0) / 2.0) * (twice_q / 2.0)
        ties += (float(t) ** 3 - t) / 12.0
        first += t
    return numerator - n * c * c, np.sqrt(n * (n * n - 1.0) / 12.0 - ties)


@njit(inline="always")
def _first_passes(keys, payload, count, scratch_words, words):
    """The words ``key << 32 | payload`` of ``keys`` and ``payload`` ``[n]`` uint32, sorted by their first two digits
    into ``words`` ``[n]`` uint64 (``scratch_words`` ``[n]`` uint64 between the passes) by two stable counting passes;
    ``count`` ``[3, 4096]`` (the digits' counts) turned into each digit's first place first, the third's left for the
    last pass."""
    for digit in range(3):
        _offsets(count[digit, :COUNTERS[digit]])
    for i in range(len(keys)):
        digit = keys[i] & DIGIT
        scratch_words[count[0, digit]] = (np.uint64(keys[i]) << WORD) | np.uint64(payload[i])
        count[0, digit] += 1
    for i in range(len(keys)):
        word = scratch_words[i]
        digit = (word >> SECOND) & DIGIT
        words[count[1, digit]] = word
        count[1, digit] += 1


@kernel(nogil=True)
def rho_of_keys(keys, count, flagged, shift, spare, by_value):
    """(numerator, norm) of one row's keys ``keys`` ``[n]`` uint32, counted in ``count`` ``[3, 4096]`` int32, against a
    reference given by ``flagged`` ``[n]`` uint32 (:func:`rank_sorted`) and ``shift`` ``[n]`` float64 (``s_p``, by
    place): the words ``key << 32 | flagged place`` sorted by three stable counting passes (``by_value`` and ``spare``
    ``[n]`` uint64 are scratch), the last summing ``j p_j`` as it gives each word its place ``j`` and the corrections
    of the row's own tie runs as they form (:func:`_last_pass`)."""
    n = len(keys)
    _first_passes(keys, flagged, count, by_value, spare)
    plain, tied, ties = _last_pass(spare, count[2], shift)
    c = (n - 1) / 2.0
    return plain + tied - n * c * c, np.sqrt(n * (n * n - 1.0) / 12.0 - ties)


@njit(inline="always")
def _run_correction(start, end, sum_q, sum_jq):
    """((r - j)(p_j + s_{p_j}) summed over a tie run ``start..end - 1`` of the sorted row, (t^3 - t) / 12), from
    ``sum_q`` = sum (p_j + s_{p_j}) and ``sum_jq`` = sum j (p_j + s_{p_j}) over it; r = (start + end - 1) / 2."""
    t = float(end - start)
    return (start + end - 1) / 2.0 * sum_q - sum_jq, (t * t * t - t) / 12.0


@njit(inline="always")
def _q(word, shift):
    """``p + s_p`` of a word's reference place ``p``."""
    p = word & PLACE
    return float(p) + shift[p]


@kernel(nogil=True)
def _last_pass(spare, first, shift):
    """The third counting pass over ``spare`` ``[n]`` uint64 (sorted by the first two digits), ``first`` ``[4096]``
    int32 each third digit's first place: (sum_j j p_j, sum_j j s_{p_j} over the reference's tie runs, and
    (sum_j (r_j - j)(p_j + s_{p_j}) + those, sum (t^3 - t) / 12) over the row's own tie runs) as one float pair and
    one sum, without writing the sorted row. Words with equal keys share their third digit and reach it one after
    another (the first two passes sorted them by the rest of the key), so a word whose key equals the last one its
    digit placed extends a run; each digit keeps its last word and its open run (a branch rarely taken)."""
    n, digits = len(spare), len(first)
    last = np.empty(digits, np.uint64)
    run = np.full(digits, -1, np.int64)  # the open run's first place, or -1
    sum_q, sum_jq = np.zeros(digits), np.zeros(digits)
    start = first.copy()
    plain, tied, ties = 0.0, 0.0, 0.0
    window = max(1, int(4e18 / (float(n) * float(n))))  # j p_j summed in int64, in windows that cannot overflow
    for begin in range(0, n, window):
        exact = np.int64(0)
        for i in range(begin, min(n, begin + window)):
            word = spare[i]
            digit = word >> THIRD
            j = first[digit]
            first[digit] = j + 1
            p = np.int64(word & PLACE)
            exact += np.int64(j) * p
            if word & TIED:
                tied += j * shift[p]
            if j > start[digit] and (word >> WORD) == (last[digit] >> WORD):
                if run[digit] < 0:  # a run opens at j - 1
                    run[digit] = j - 1
                    sum_q[digit] = _q(last[digit], shift)
                    sum_jq[digit] = (j - 1) * sum_q[digit]
                q = _q(word, shift)
                sum_q[digit] += q
                sum_jq[digit] += j * q
            elif run[digit] >= 0:
                corrected, t = _run_correction(run[digit], j, sum_q[digit], sum_jq[digit])
                tied, ties, run[digit] = tied + corrected, ties + t, -1
            last[digit] = word
        plain += float(exact)
    for digit in range(digits):  # the runs still open end where their digit does
        if run[digit] >= 0:
            corrected, t = _run_correction(run[digit], first[digit], sum_q[digit], sum_jq[digit])
            tied, ties = tied + corrected, ties + t
    return plain, tied, ties


@kernel(nogil=True)
def rank_subspaces(points, first, stop, order, starts, cols, block, chunk, flagged, shift, keys, count, spare, by_value,
                   numerators, norms):
    """``numerators[i], norms[i]`` of subspaces ``i`` in ``first..stop - 1`` of ``points`` ``[m, N, k]``: each one's
    cosines keyed (:func:`cosine_keys`, arguments as there) and ranked against the reference (:func:`rho_of_keys`,
    ``keys``, ``count``, ``spare``, ``by_value`` its scratch), in one call: the caller's thread takes the GIL once for
    them all, not between the steps."""
    for i in range(first, stop):
        cosine_keys(points[i], order, starts, cols, block, chunk, keys, count)
        numerators[i], norms[i] = rho_of_keys(keys, count, flagged, shift, spare, by_value)


@kernel(nogil=True)
def count_subspaces(points, first, stop, order, starts, cols, block, weights, numerators, norms):
    """``numerators[i], norms[i]`` of subspaces ``i`` in ``first..stop - 1`` of ``points`` ``[m, N, 1]`` by
    :func:`sign_rho` (arguments as there), in one call."""
    for i in range(first, stop):
        numerators[i], norms[i] = sign_rho(points[i], order, starts, cols, block, weights)


@kernel(nogil=True)
def sorted_keys(values):
    """(keys ``[n]`` uint32, order ``[n]`` int64): the float32 ``values`` ``[n]`` (n < 2^31) sorted stably, as their
    monotone keys (:func:`_monotone`: equal exactly where the values are) and the positions they came from; by the
    same three counting passes as :func:`rho_of_keys`, the position carried in each word's low half (for 10^5 values
    about 5x faster than numpy's sort of 64-bit keys, on one core)."""
    n = len(values)
    keys, count = np.empty(n, np.uint32), np.zeros((3, COUNTERS[2]), np.int32)
    bits = values.view(np.uint32)
    for i in range(n):
        _keep(bits[i], i, keys, count)
    words = np.empty(n, np.uint64)
    _first_passes(keys, np.arange(n).astype(np.uint32), count, np.empty(n, np.uint64), words)
    order = np.empty(n, np.int64)
    for i in range(n):
        digit = words[i] >> THIRD
        j = count[2, digit]
        keys[j] = np.uint32(words[i] >> WORD)
        order[j] = np.int64(words[i] & LOW)
        count[2, digit] = j + 1
    return keys, order


@kernel()
def rank_sorted(sorted_values, order):
    """A reference ranked from its stable ascending sort: ``sorted_values`` ``[n]`` (equal exactly where the values
    are) and ``order`` ``[n]`` int64 (the column at each place). Returns ``flagged`` ``[n]`` uint32 (each column's place
    ``p_i``, below 2^31, with ``TIED`` set where the shift at its place is nonzero: the low half of a row's words),
    ``centred`` ``[n]`` float64 (each column's average rank minus ``(n - 1) / 2``) and ``shift`` ``[n]`` float64 by
    place (``s_p``: the average rank of ``p``'s tie run minus ``p``), in one pass over the runs and one over the
    places."""
    n = len(order)
    shift = np.zeros(n)
    start = 0
    for p in range(1, n + 1):
        if p == n or sorted_values[p] != sorted_values[start]:
            middle = (start + p - 1) / 2
            for q in range(start, p):
                shift[q] = middle - q
            start = p
    flagged, centred = np.empty(n, np.uint32), np.empty(n)
    for p in range(n):
        i = order[p]
        centred[i] = p - (n - 1) / 2 + shift[p]
        flagged[i] = np.uint32(np.uint64(p) | (TIED if shift[p] != 0.0 else np.uint64(0)))
    return flagged, centred, shift


@kernel(nogil=True)
def settle_runs(coarse, order, values):
    """``order`` ``[n]`` int64 (a row's positions stably sorted by ``coarse`` ``[n]``, a monotone non-decreasing image
    of its ``values`` ``[n]`` float64, such as their float32 roundings) stably sorted by ``values`` inside each run of
    equal ``coarse``, in place: by insertion in a short run, by a merge sort in a long one (a run of distinct values
    never costs its square)."""
    start = 0
    for end in range(1, len(order) + 1):
        if end < len(order) and coarse[end] == coarse[start]:
            continue
        if end - start > 32:
            run = order[start:end].copy()
            order[start:end] = run[np.argsort(values[run], kind="mergesort")]
        else:
            for j in range(start + 1, end):
                i, value = order[j], values[order[j]]
                while j > start and values[order[j - 1]] > value:
                    order[j] = order[j - 1]
                    j -= 1
                order[j] = i
        start = end


@kernel()
def scratch(n):
    """A row's scratch for :func:`rho_of_keys` of ``n`` values: (keys, count, spare, by_value)."""
    return np.empty(n, np.uint32), np.empty((3, COUNTERS[2]), np.int32), np.empty(n, np.uint64), np.empty(n, np.uint64)


@kernel(nogil=True)
def rho_parts(values, flat, flagged, shift, numerators, norms):
    """Fill ``numerators`` and ``norms`` ``[m]`` float64 for the rows ``values[:, flat]``: ``values`` ``[m, G]``
    float32 (C order), ``flat`` ``[n]`` int64 positions in a row, against a reference given by ``flagged`` ``[n]``
    uint32 (:func:`rank_sorted`) and ``shift`` ``[n]`` float64 (``s_p``, by place)."""
    keys, count, spare, by_value = scratch(len(flat))
    bits = values.view(np.uint32)
    for row in range(values.shape[0]):
        count[:] = 0
        _keys_at(bits[row], flat, keys, count)
        numerators[row], norms[row] = rho_of_keys(keys, count, flagged, shift, spare, by_value)
