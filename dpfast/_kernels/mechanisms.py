"""Kernels of the perturbation mechanisms: k-noise's minimal δ and k-PRAM's intervals.

See docs/design.md#mechanisms.

Neither kernel sorts the whole column. Values go to ``B`` equal-width buckets over
``[min, max]`` with ``bucket(v) = min(floor((v - min) * (B / range)), B - 1)`` computed in
float64, which is monotone in ``v``; counts per bucket then give every rank's bucket.

* k-noise (:func:`knoise_extremes`): a pair of ranks ``(i, i + k)`` whose values fall in
  buckets ``a <= c`` spans less than ``c - a + 1`` and more than ``c - a - 1`` bucket
  widths (up to a rounding error far below a quarter width). With ``G`` the largest
  ``c - a`` over all pairs, a pair with ``c - a <= G - 3`` is shorter than the pair that
  realises ``G``, so only pairs with ``c - a >= G - 2`` need exact values. Only their
  buckets (and the two holding ranks ``k`` and ``n - k + 1``) are gathered and sorted.
  When ``G <= 2`` every bucket is needed: a bucket sort. Expected O(n) for data with a
  density; O(n log n) at worst.
* k-PRAM (:func:`interval_check`): the number of values in each of ``m`` equal-width
  intervals is bracketed from a fine histogram by integer arithmetic, and counted exactly
  (:func:`interval_counts`) only when the bracket cannot decide.

Measured in ``benchmarks/bench_mechanisms.py`` (10,000,000 rows, against NumPy's sort).
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit


@jit
def min_max(x):
    """Return ``(min, max)`` of a non-empty float64 array. O(n)."""
    lo = x[0]
    hi = x[0]
    for i in range(x.shape[0]):
        v = x[i]
        lo = min(lo, v)
        hi = max(hi, v)
    return lo, hi


@jit
def bucket_counts(x, lo, scale, n_buckets):
    """Return ``starts`` (int64[B + 1]): ``starts[b]`` is the first rank in bucket ``b``.

    ``bucket(v) = min(int((v - lo) * scale), B - 1)``. O(n + B).
    """
    starts = np.zeros(n_buckets + 1, dtype=np.int64)
    top = n_buckets - 1
    for i in range(x.shape[0]):
        b = min(np.int64((x[i] - lo) * scale), top)
        starts[b + 1] += 1
    for b in range(n_buckets):
        starts[b + 1] += starts[b]
    return starts


@jit
def _sort_slice(out, lo, hi):
    if hi - lo > 32:
        out[lo:hi].sort()
        return
    for i in range(lo + 1, hi):
        v = out[i]
        j = i - 1
        while j >= lo and out[j] > v:
            out[j + 1] = out[j]
            j -= 1
        out[j + 1] = v


@jit
def _two_diff(a, b):
    # a - b = d + e exactly (Knuth's TwoSum; no overflow for finite a - b).
    d = a - b
    bb = d - a
    e = (a - (d - bb)) + (-b - bb)
    return d, e


@jit
def _largest_gap(starts, k, n_starts):
    """``G``: the largest bucket distance ``c - a`` of a pair of ranks ``(i, i + k)``.

    ``i`` runs over ``0 .. n_starts - 1``; the last start of each bucket has its bucket's
    largest partner bucket. O(B).
    """
    n_buckets = starts.shape[0] - 1
    gap = 0
    c = 0  # bucket of rank `last + k`, which only grows with a
    for a in range(n_buckets):
        if starts[a + 1] > starts[a] and starts[a] < n_starts:
            last = min(starts[a + 1], n_starts) - 1
            while starts[c + 1] <= last + k:
                c += 1
            gap = max(gap, c - a)
    return gap


@jit
def _mark_pairs(starts, k, n_starts, threshold, needed):
    """Mark in ``needed`` both buckets of every pair whose bucket distance is ``>= threshold``.

    ``threshold >= 1``. Pairs starting in bucket ``a`` have ranks ``i`` in ``[i_lo, i_hi)``,
    with partners in buckets ``c_lo .. c_hi``. O(B).
    """
    n_buckets = starts.shape[0] - 1
    c_lo = 0  # buckets of ranks i_lo + k and i_hi - 1 + k, both non-decreasing in a
    c_hi = 0
    for a in range(n_buckets - threshold):
        i_lo = max(starts[a], starts[a + threshold] - k)
        i_hi = min(starts[a + 1], n_starts)
        if i_lo < i_hi:
            needed[a] = True
            while starts[c_lo + 1] <= i_lo + k:
                c_lo += 1
            c_hi = max(c_hi, c_lo)
            while starts[c_hi + 1] <= i_hi - 1 + k:
                c_hi += 1
            needed[c_lo : c_hi + 1] = True


@jit
def _gather_sorted(x, lo, scale, starts, needed):
    """float64[n]: the values of the ``needed`` buckets at their ranks (others unset)."""
    n = x.shape[0]
    n_buckets = starts.shape[0] - 1
    top = n_buckets - 1
    out = np.empty(n, dtype=np.float64)
    fill = starts[:n_buckets].copy()
    for i in range(n):
        v = x[i]
        b = min(np.int64((v - lo) * scale), top)
        if needed[b]:
            out[fill[b]] = v
            fill[b] += 1
    for b in range(n_buckets):
        if needed[b] and starts[b + 1] - starts[b] > 1:
            _sort_slice(out, starts[b], starts[b + 1])
    return out


@jit
def _widest_pair(out, starts, k, n_starts, threshold, full, lo):
    """``(out[i], out[i + k])`` of greatest exact difference among the candidate pairs.

    Candidates: every pair when ``full``, else those starting in a bucket ``a`` whose
    partner may lie ``threshold`` buckets on; ties to the lowest ``i``. ``(lo, lo)`` when
    there is none.
    """
    n_buckets = starts.shape[0] - 1
    best_d = -1.0
    best_e = 0.0
    best_lo = lo
    best_hi = lo
    for a in range(n_buckets):
        if full:
            i_lo = starts[a]
            i_hi = min(starts[a + 1], n_starts)
        elif a < n_buckets - threshold:
            i_lo = max(starts[a], starts[a + threshold] - k)
            i_hi = min(starts[a + 1], n_starts)
        else:
            break
        for i in range(i_lo, i_hi):
            d, e = _two_diff(out[i + k], out[i])
            if d > best_d or (d == best_d and e > best_e):
                best_d = d
                best_e = e
                best_lo = out[i]
                best_hi = out[i + k]
    return best_lo, best_hi


@jit
def knoise_extremes(x, k, n_buckets):
    """Return the order statistics that define k-noise's ``D_k`` (docs/design.md#k-noise).

    ``x``: float64[n], finite, ``1 <= k <= n``, ``max - min`` finite and ``> 0``.
    Returns ``(x_1, x_k, x_{n-k+1}, x_n, inner_lo, inner_hi, has_inner)``: ranks are
    1-based order statistics and ``(inner_lo, inner_hi) = (X_(i), X_(i+k))`` maximise
    ``X_(i+k) - X_(i)`` over ``i = 1..n-k``, compared exactly (the rounded difference, then
    its TwoSum error; ties go to the lowest ``i``). ``has_inner`` is False when ``n == k``.
    Expected O(n + B) for data with a density, O(n log n) at worst.
    """
    n = x.shape[0]
    lo, hi = min_max(x)
    scale = n_buckets / (hi - lo)
    starts = bucket_counts(x, lo, scale, n_buckets)
    n_starts = n - k  # inner pairs (i, i + k), i = 0 .. n - k - 1 (0-based)
    needed = np.zeros(n_buckets, dtype=np.bool_)
    needed[np.searchsorted(starts, k - 1, side="right") - 1] = True
    needed[np.searchsorted(starts, n - k, side="right") - 1] = True
    threshold = _largest_gap(starts, k, n_starts) - 2
    full = threshold <= 0 and n_starts > 0
    if full:
        needed[:] = True
    elif n_starts > 0:
        _mark_pairs(starts, k, n_starts, threshold, needed)
    out = _gather_sorted(x, lo, scale, starts, needed)
    best_lo = lo
    best_hi = lo
    if n_starts > 0:
        best_lo, best_hi = _widest_pair(out, starts, k, n_starts, threshold, full, lo)
    return lo, out[k - 1], out[n - k], hi, best_lo, best_hi, n_starts > 0


@jit
def interval_index(v, lo, scale, m):
    """k-PRAM's interval of ``v``: ``min(int((v - lo) * scale), m - 1)`` (monotone in v)."""
    return min(np.int64((v - lo) * scale), m - 1)


@jit
def interval_check(starts, m, k):
    """Decide from a fine histogram whether each of ``m`` intervals holds ``>= k`` values.

    ``starts``: int64[B + 1] from :func:`bucket_counts` over the same ``[lo, hi]``. A fine
    bucket ``f`` covers ``[f m / B, (f + 1) m / B)`` in interval units up to a rounding
    error ``< g / B`` with ``g = ceil((1e-6 + m * 1e-14) * B) + 1``; so it lies surely in
    interval ``j`` when ``f m >= j B + g`` and ``(f + 1) m <= (j + 1) B - g`` (integers).
    Returns 1 (every interval surely holds ``>= k``), 0 (some interval surely holds
    fewer) or -1 (undecided: count exactly). O(m).
    """
    n_buckets = starts.shape[0] - 1
    g = np.int64(np.ceil((1e-6 + m * 1e-14) * n_buckets)) + 1
    decided = True
    prev_hi = -1  # last bucket surely in interval j - 1
    for j in range(m):
        f_lo = (j * n_buckets + g + m - 1) // m
        f_hi = ((j + 1) * n_buckets - g) // m - 1
        f_lo = min(max(f_lo, 0), n_buckets)
        f_hi = min(f_hi, n_buckets - 1)
        sure = starts[f_hi + 1] - starts[f_lo] if f_lo <= f_hi else 0
        if j + 1 < m:
            next_lo = min(max(((j + 1) * n_buckets + g + m - 1) // m, 0), n_buckets)
        else:
            next_lo = n_buckets
        first = max(prev_hi + 1, 0)
        possible = starts[next_lo] - starts[first] if next_lo > first else 0
        if possible < k:
            return 0
        if sure < k:
            decided = False
        if f_lo <= f_hi:
            prev_hi = f_hi
    return 1 if decided else -1


@jit
def interval_counts(x, lo, scale, m):
    """Exact number of values in each of the ``m`` intervals (int64[m]). O(n + m)."""
    counts = np.zeros(m, dtype=np.int64)
    for i in range(x.shape[0]):
        counts[interval_index(x[i], lo, scale, m)] += 1
    return counts


@jit
def group_by_interval(x, lo, scale, m, group_start, groups, pool):
    """Write each value's interval into ``groups`` and the values, grouped, into ``pool``.

    Within an interval the values keep their row order; ``group_start`` (int64[m]) is the
    first slot of each interval. ``x`` is never written. O(n + m).
    """
    fill = group_start.copy()
    for i in range(x.shape[0]):
        v = x[i]
        j = interval_index(v, lo, scale, m)
        groups[i] = j
        pool[fill[j]] = v
        fill[j] += 1


@jit
def map_codes(raw, mapping, out):
    """Write ``out[i] = mapping[raw[i]]``: a categorical's codes in another category order.

    ``raw``: integer codes, ``-1`` for a missing value; ``mapping``: int64, ``-1`` for a
    category with no image. Returns ``(n_missing, first_unmapped)``, the number of ``-1``
    codes and the first raw code whose image is ``-1`` (or ``-1``). ``raw`` is never
    written. O(n).
    """
    n_missing = 0
    first_unmapped = -1
    for i in range(raw.shape[0]):
        r = raw[i]
        if r < 0:
            n_missing += 1
            out[i] = 0
            continue
        c = mapping[r]
        if c < 0 and first_unmapped < 0:
            first_unmapped = r
        out[i] = c
    return n_missing, first_unmapped
