"""Exponential-mechanism kernels: certified float thresholds, decided on one 64-bit word.

Draw ``g`` chooses candidate ``c`` with probability ``W_c / Σ_j W_j`` where
``W_c = mult_c · b**d_c``, ``d_c = max_j q_j - q_c`` for an integer quality row ``q``, a
dyadic base ``b = x / 2**y`` and positive multipliers (docs/design.md#em-sampler):

* ``U`` is the uniform real whose binary expansion is the ChaCha20 stream
  ``(key, nonce = start + g)`` read word by word, most significant bit of each 64-bit
  word first; the answer is the first ``c`` with ``U < t_c = C_c / S`` (``C_c`` the
  running sum of the weights, ``S`` their total), which has probability ``W_c / S``
  exactly.
* The kernels compute ``t_c`` in float64 from a table of ``b**(v 256**j)`` (``table[j, v]``
  for the bytes ``v`` of ``d``, within ``2 u`` relative, ``u = 2**-53``; ``0.0`` when
  below ``2**-1000``) and widen it
  by ``slack``, a bound of the accumulated rounding error, into integer bounds
  ``TL_c <= 2**63 t_c <= TH_c``. With ``u63 = word0 >> 1`` (the first 63 bits of ``U``),
  ``c`` is certain when ``u63 < TL_c`` and ``u63 >= TH_{c-1}``. Otherwise the draw is
  marked ``-1`` and the caller decides it in exact integer arithmetic, reading more words
  of the same stream (:func:`dpfast.noise._em_exact._exact_choice`); that happens with
  probability about ``4 m slack`` per draw (``6e-12`` for 41 candidates).
* A weight whose float value falls below ``2**-1000`` is replaced by 0 and its true value
  (at most :data:`TINY_WEIGHT`) is added to a per-row absolute slack.

Only IEEE-754 round-to-nearest ``+``, ``*`` and ``/`` on positive normal numbers are used,
so every float result is within relative ``u`` of its exact value; the slack counts those
operations (:func:`dpfast.noise._em_exact.fast_path_slack`).

:func:`em_sorted_groups` is the categorical individual-ranking step: groups of ``k``
consecutive values of a sorted sequence given by counts per rank. Groups holding a single
value (almost all of them once sorted) share their thresholds, which are computed once
per value; ``benchmarks/bench_categorical.py`` measures the whole release against a
NumPy/pandas pipeline.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit, jit_inline
from dpfast._kernels.groups import group_start
from dpfast._kernels.lanes import new_lanes, nonce_blocks

TWO63 = 9223372036854775808.0  # 2**63 as a float64 (exact)
TINY = 2.0**-1000  # below this a computed power counts as "tiny"
#: Upper bound of a tiny weight: ``b**d < 2**-999`` times a multiplier below ``2**62``.
TINY_WEIGHT = 2.0**-936
UNDECIDED = -1


@jit_inline
def _power(table, d):
    # b**d (d >= 0) as a product of one table entry per non-zero byte of d; 0.0 when
    # certified below 2**-999. Partial products only decrease (every factor is <= 1), so
    # once one is below 2**-1000 the exact power is below 2**-1000 * (1 + 40 u).
    p = 1.0
    j = 0
    while d != 0:
        v = d & 255
        if v != 0:
            t = table[j, v]
            if t == 0.0:
                return 0.0
            p *= t
            if p < TINY:
                return 0.0
        d >>= 8
        j += 1
    return p


@jit_inline
def _bounds(quality, mult, table, slack, cum, lo, hi):
    # quality int64[m], mult float64[m], cum float64[m] (scratch); lo, hi uint64[m]
    # (written): lo[c] <= 2**63 C_c / S <= hi[c]. See the module docstring.
    m = quality.shape[0]
    top = quality[0]
    for c in range(1, m):
        if quality[c] > top:
            top = quality[c]
    running = 0.0
    tiny = 0.0
    for c in range(m):
        p = _power(table, top - quality[c])
        w = mult[c] * p
        if p == 0.0 or w < TINY:
            tiny += TINY_WEIGHT
            w = 0.0
        running += w
        cum[c] = running
    # the top candidate has p = 1 and mult >= 2**-500, so running > 0
    row_slack = slack + 4.0 * tiny / running
    for c in range(m - 1):
        t = cum[c] / running
        low = t - row_slack
        high = t + row_slack
        if low <= 0.0:
            lo[c] = np.uint64(0)
        elif low >= 1.0:
            lo[c] = np.uint64(9223372036854775808)
        else:
            lo[c] = np.uint64(low * TWO63)
        if high >= 1.0:
            hi[c] = np.uint64(9223372036854775808)
        else:
            v = high * TWO63
            h = np.uint64(v)
            if np.float64(h) < v:
                h += np.uint64(1)
            hi[c] = h
    lo[m - 1] = np.uint64(9223372036854775808)
    hi[m - 1] = np.uint64(9223372036854775808)


@jit_inline
def _decide(lo, hi, u):
    # The first c with u < lo[c] (lo is non-decreasing, lo[m-1] = 2**63 > u), kept only
    # if u >= hi[c-1]: then t_{c-1} <= u / 2**63 <= U < (u + 1) / 2**63 <= t_c.
    a = 0
    b = lo.shape[0] - 1
    while a < b:
        mid = (a + b) >> 1
        if u < lo[mid]:
            b = mid
        else:
            a = mid + 1
    if a > 0 and u < hi[a - 1]:
        return UNDECIDED
    return a


@jit
def thresholds(quality, mult, table, slack):
    """Certified bounds ``(lo, hi)`` (``uint64[m]`` each) of ``2**63 C_c / S`` for one row.

    ``quality`` ``int64[m]``, ``mult`` ``float64[m]``, ``table`` ``float64[8, 256]``,
    ``slack`` float. O(m log d_max).
    """
    m = quality.shape[0]
    lo = np.empty(m, dtype=np.uint64)
    hi = np.empty(m, dtype=np.uint64)
    cum = np.empty(m, dtype=np.float64)
    _bounds(quality, mult, table, slack, cum, lo, hi)
    return lo, hi


@jit
def decide(lo, hi, u):
    """Return the candidate certain for the 63-bit prefix ``u`` (uint64), or ``-1`` if undecided."""
    return _decide(lo, hi, u)


@jit
def em_rows(key, quality, mult, table, slack, start, out):
    """One exponential-mechanism draw per row of ``quality`` (``int64[n, m]``).

    ``key`` ``uint64[8]``; ``mult`` ``float64[r, m]`` with ``r`` 1 (shared by every row) or
    ``n``; ``table`` ``float64[8, 256]``; ``slack`` float; ``start`` uint64 nonce of row 0;
    ``out`` ``int64[n]`` (written) gets the chosen column of each row, or ``-1`` when the
    first word does not decide it. O(n m log d_max).
    """
    n = quality.shape[0]
    m = quality.shape[1]
    shared = mult.shape[0] == 1
    lo = np.empty(m, dtype=np.uint64)
    hi = np.empty(m, dtype=np.uint64)
    cum = np.empty(m, dtype=np.float64)
    lanes = new_lanes()
    block = lanes.words  # word 0 of lane l's block is block[l * 8]
    for g0 in range(0, n, 16):
        nonce_blocks(key, start + np.uint64(g0), lanes)
        for lane in range(min(16, n - g0)):
            g = g0 + lane
            _bounds(quality[g], mult[0] if shared else mult[g], table, slack, cum, lo, hi)
            out[g] = _decide(lo, hi, block[lane * 8] >> np.uint64(1))


@jit
def em_sorted_groups(key, counts, k, big, r, distance, table, slack, start, out):
    """Exponential-mechanism draw per rank group of a sorted categorical column.

    Parameters (no validation):
    ``key`` ``uint64[8]``; ``counts`` ``int64[m]``: the sorted column holds ``counts[v]``
    copies of value ``v``, ``v = 0 .. m-1`` in order; ``k, big, r`` the layout of its
    ``n // k`` rank groups (:mod:`dpfast._kernels.groups`: ``k`` values a group, ``k + r``
    in group ``big``); ``distance`` ``int64[m, m]``: row ``c`` is candidate ``c``, column
    ``v`` value ``v``, in quality units; ``table``, ``slack`` as for :func:`em_rows`;
    ``start`` uint64 nonce of group 0; ``out`` ``int64[n // k]`` (written) gets each
    group's candidate, or ``-1`` when undecided.

    Group quality ``q_c = -Σ_v n_{g,v} distance[c, v]`` (integers, exact). Groups made of
    one value share thresholds, computed once per value. O(m² log d_max + n_groups log m)
    for sorted data, O(n_groups m (log d_max + values per group)) at worst.
    """
    m = counts.shape[0]
    n_groups = out.shape[0]
    pure_lo = np.zeros((m, m), dtype=np.uint64)
    pure_hi = np.zeros((m, m), dtype=np.uint64)
    have_pure = np.zeros(m, dtype=np.bool_)
    lo = np.empty(m, dtype=np.uint64)
    hi = np.empty(m, dtype=np.uint64)
    cum = np.empty(m, dtype=np.float64)
    ones = np.ones(m, dtype=np.float64)
    quality = np.empty(m, dtype=np.int64)
    lanes = new_lanes()
    block = lanes.words
    # (v, left): the next unconsumed position is the left-th remaining copy of value v
    v = 0
    left = counts[0] if m > 0 else 0
    for g0 in range(0, n_groups, 16):
        nonce_blocks(key, start + np.uint64(g0), lanes)
        for lane in range(min(16, n_groups - g0)):
            g = g0 + lane
            size = group_start(g + 1, k, big, r) - group_start(g, k, big, r)
            while left == 0:
                v += 1
                left = counts[v]
            u = block[lane * 8] >> np.uint64(1)
            if left >= size and size == k:
                # a group of k copies of value v
                if not have_pure[v]:
                    for c in range(m):
                        quality[c] = -(size * distance[c, v])
                    _bounds(quality, ones, table, slack, cum, pure_lo[v], pure_hi[v])
                    have_pure[v] = True
                out[g] = _decide(pure_lo[v], pure_hi[v], u)
                left -= size
                continue
            for c in range(m):
                quality[c] = 0
            need = size
            while need > 0:
                while left == 0:
                    v += 1
                    left = counts[v]
                take = left if left < need else need
                for c in range(m):
                    quality[c] -= take * distance[c, v]
                left -= take
                need -= take
            _bounds(quality, ones, table, slack, cum, lo, hi)
            out[g] = _decide(lo, hi, u)
