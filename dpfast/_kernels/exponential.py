"""Exponential-mechanism kernels: log-sum-exp weights, integer CDF, one 64-bit word per draw.

Draw ``g`` chooses candidate ``c`` with probability ``exp(s q_c) / Σ_j exp(s q_j)`` for a
quality row ``q`` and a scale ``s = ε / (2 Δq)`` (docs/design.md#em-centroid, #em-sampler):

1. ``w_c = s q_c`` in float64, shifted by ``max_c w_c`` so that the largest weight is
   ``exp(0) = 1`` (the log-sum-exp trick: nothing overflows, the top candidate never
   underflows);
2. the running sums ``S_c = Σ_{j <= c} exp(w_j - max)`` become integer thresholds
   ``T_c = floor(2**63 S_c / S_{m-1})`` with ``T_{m-1} = 2**63`` exactly;
3. the first 64-bit word of the ChaCha20 stream ``(key, nonce = start + g)`` gives a
   63-bit uniform ``U`` (the word shifted right by one) and the draw is the first ``c``
   with ``U < T_c`` (binary search; ties to the lowest candidate index).

The only approximation is the float64 rounding of the weights (relative error about
``1e-16`` per probability) and the ``2**-63`` resolution of ``U``: the small, documented
float approximation of docs/design.md#em-sampler. Draw ``g`` reads only stream ``start + g``, so
chunked calls give the same draws.

:func:`em_sorted_groups` is the categorical individual-ranking step: groups of ``k``
consecutive values of a sorted sequence given by counts per rank. Groups holding a single
value (almost all of them once sorted) share their thresholds, which are computed once
per value; ``benchmarks/bench_categorical.py`` measures the whole release against a
NumPy/pandas pipeline.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit, jit_inline
from dpfast._kernels.lanes import new_lanes, nonce_blocks

TWO63 = 9223372036854775808.0  # 2**63 as a float64 (exact)


@jit_inline
def _thresholds(quality, scale, thr):
    # quality: float64[m]; thr: uint64[m] (written). See the module docstring.
    m = quality.shape[0]
    top = -np.inf
    for c in range(m):
        w = scale * quality[c]
        if w > top:
            top = w
    total = 0.0
    for c in range(m):
        total += np.exp(scale * quality[c] - top)
        thr[c] = np.uint64(0)
    running = 0.0
    for c in range(m - 1):
        running += np.exp(scale * quality[c] - top)
        t = running / total * TWO63
        if t >= TWO63:
            thr[c] = np.uint64(9223372036854775808)
        else:
            thr[c] = np.uint64(t)
    thr[m - 1] = np.uint64(9223372036854775808)


@jit_inline
def _select(thr, u):
    # First c with u < thr[c]; thr is non-decreasing and ends with 2**63 > u.
    lo = 0
    hi = thr.shape[0] - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if u < thr[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@jit
def thresholds(quality, scale):
    """Integer CDF of one draw: ``uint64[m]`` thresholds for ``quality`` (``float64[m]``)."""
    thr = np.empty(quality.shape[0], dtype=np.uint64)
    _thresholds(quality, scale, thr)
    return thr


@jit
def em_rows(key, quality, scale, start, out):
    """One exponential-mechanism draw per row of ``quality`` (``float64[n, m]``).

    ``key`` ``uint64[8]``; ``scale`` float ``ε / (2 Δq)``; ``start`` uint64 nonce of row
    0; ``out`` ``int64[n]`` (written) gets the chosen column of each row. O(n m).
    """
    n = quality.shape[0]
    m = quality.shape[1]
    thr = np.empty(m, dtype=np.uint64)
    lanes = new_lanes()
    block = lanes.words  # word 0 of lane l's block is block[l * 8]
    for g0 in range(0, n, 16):
        nonce_blocks(key, start + np.uint64(g0), lanes)
        for lane in range(min(16, n - g0)):
            _thresholds(quality[g0 + lane], scale, thr)
            out[g0 + lane] = _select(thr, block[lane * 8] >> np.uint64(1))


@jit
def em_sorted_groups(key, counts, k, distance, scale, start, out):
    """Exponential-mechanism draw per rank group of a sorted categorical column.

    Parameters (no validation):
    ``key`` ``uint64[8]``; ``counts`` ``int64[m]``: the sorted column holds ``counts[r]``
    copies of value ``r``, ``r = 0 .. m-1`` in order; ``k`` group size (the remainder
    joins the last of the ``n // k`` groups); ``distance`` ``float64[m, m]``: row ``c`` is
    candidate ``c``, column ``r`` value ``r``; ``scale`` ``ε / (2 Δq)``; ``start`` uint64
    nonce of group 0; ``out`` ``int64[n // k]`` (written) gets each group's candidate.

    Group quality ``q_c = -Σ_r n_{g,r} distance[c, r]``, summed over the values ``r`` of
    the group in increasing order (``n_{g,r}`` its copies of ``r``). Groups made of one
    value share thresholds, computed once per value. O(m² + n_groups log m) for sorted
    data, O(n_groups m (1 + values per group)) at worst.
    """
    m = counts.shape[0]
    n = 0
    for r in range(m):
        n += counts[r]
    n_groups = out.shape[0]
    pure = np.zeros((m, m), dtype=np.uint64)
    have_pure = np.zeros(m, dtype=np.bool_)
    thr = np.empty(m, dtype=np.uint64)
    quality = np.empty(m, dtype=np.float64)
    lanes = new_lanes()
    block = lanes.words
    # (r, left): the next unconsumed position is the left-th remaining copy of value r
    r = 0
    left = counts[0] if m > 0 else 0
    for g0 in range(0, n_groups, 16):
        nonce_blocks(key, start + np.uint64(g0), lanes)
        for lane in range(min(16, n_groups - g0)):
            g = g0 + lane
            size = k if g < n_groups - 1 else n - k * (n_groups - 1)
            while left == 0:
                r += 1
                left = counts[r]
            u = block[lane * 8] >> np.uint64(1)
            if left >= size and size == k:
                # a group of k copies of value r
                if not have_pure[r]:
                    for c in range(m):
                        quality[c] = -(size * distance[c, r])
                    _thresholds(quality, scale, pure[r])
                    have_pure[r] = True
                out[g] = _select(pure[r], u)
                left -= size
                continue
            for c in range(m):
                quality[c] = 0.0
            need = size
            while need > 0:
                while left == 0:
                    r += 1
                    left = counts[r]
                take = left if left < need else need
                for c in range(m):
                    quality[c] -= take * distance[c, r]
                left -= take
                need -= take
            _thresholds(quality, scale, thr)
            out[g] = _select(thr, u)
