"""Kernels for taxonomies: semantic distances on ancestor bitsets, rank-group broadcast.

Every node of a taxonomy has an ancestor bitset (``uint64`` words, bit ``j`` set when node
``j`` is the node itself or one of its ancestors). The semantic distance of Sánchez et al.
(2012), docs/design.md#semantic-distance, is then

    δ(a, b) = log2(1 + (|union| - |intersection|) / |union|)

of the ancestor sets ``φa`` and ``φb``, with ``|union| = popcount(A | B)`` and
``|intersection| = popcount(A & B)``.

:func:`broadcast_rank_groups` is the per-record pass of categorical individual ranking:
records are placed by a counting sort on their rank (ties by row index) and each gets its
rank group's released code, in O(n) without materialising the sort
(docs/design.md#ranking-partition, #marginality). ``benchmarks/bench_categorical.py`` shows it
against NumPy's argsort + fancy indexing.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit, jit_inline
from dpfast._kernels.groups import rank_group

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


@jit_inline
def _popcount(x):
    # SWAR popcount (Hacker's Delight 5-2); LLVM turns it into popcnt where available.
    x = x - ((x >> np.uint64(1)) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return np.int64((x * _H01) >> np.uint64(56))


@jit
def semantic_distance(bits, a, b):
    """δ(a, b) for nodes ``a``, ``b`` given ancestor bitsets ``bits`` (``uint64[n_nodes, w]``).

    O(w). Returns 0.0 when ``a == b``.
    """
    union = 0
    inter = 0
    for j in range(bits.shape[1]):
        x = bits[a, j]
        y = bits[b, j]
        union += _popcount(x | y)
        inter += _popcount(x & y)
    return np.log2(1.0 + (union - inter) / union)


@jit
def distance_matrix(bits, nodes):
    """Semantic distances between the nodes ``nodes`` (``int64[m]``): ``float64[m, m]``.

    ``bits``: ``uint64[n_nodes, w]`` ancestor bitsets. Symmetric with a zero diagonal;
    O(m² w).
    """
    m = nodes.shape[0]
    out = np.zeros((m, m), dtype=np.float64)
    for i in range(m):
        for j in range(i + 1, m):
            d = semantic_distance(bits, nodes[i], nodes[j])
            out[i, j] = d
            out[j, i] = d
    return out


@jit
def broadcast_rank_groups(codes, code_rank, counts, k, big, r, group_codes, destination, out):
    """Write each record's rank-group code to ``out[destination[row]]``.

    Parameters (no validation):
    ``codes`` ``int64[n]`` domain codes; ``code_rank`` ``int64[m]`` rank of each code in
    the data-independent order; ``counts`` ``int64[m]`` records per rank; ``k, big, r``
    the rank groups' layout (:mod:`dpfast._kernels.groups`: ``k`` records a group,
    ``k + r`` in group ``big``); ``group_codes`` ``int64[n // k]`` released code of each
    group; ``destination`` ``int64[n]`` output position of each row, or ``int64[0]`` for
    the input order; ``out`` ``int64[n]`` (written).

    Records are ordered by ``(rank, row index)`` (a stable counting sort) and sorted
    position ``p`` belongs to group ``rank_group(p, k, big, r)``. O(n + m).
    """
    n = codes.shape[0]
    m = counts.shape[0]
    offsets = np.empty(m, dtype=np.int64)
    total = 0
    for rank in range(m):
        offsets[rank] = total
        total += counts[rank]
    shuffled = destination.shape[0] == n
    for i in range(n):
        rank = code_rank[codes[i]]
        p = offsets[rank]
        offsets[rank] = p + 1
        g = rank_group(p, k, big, r)
        if shuffled:
            out[destination[i]] = group_codes[g]
        else:
            out[i] = group_codes[g]


@jit
def count_codes(codes, m):
    """Occurrences of each code in ``{0..m-1}`` and of negative codes: ``(int64[m], int)``.

    ``codes`` ``int64[n]``; codes ``>= m`` are not counted (callers guarantee none). O(n).
    """
    counts = np.zeros(m, dtype=np.int64)
    missing = 0
    for i in range(codes.shape[0]):
        c = codes[i]
        if c < 0:
            missing += 1
        else:
            counts[c] += 1
    return counts, missing
