"""Kernels of insensitive MDAV out of core: the streamed merge of sorted orders.

See docs/engines.md (``mdav_dp`` out of core). The fast path of insensitive MDAV walks one
order of all rows per distinct reference point; out of core each order is a file read
back in buffers, and a bitset of taken rows replaces the labels of the in-memory walk.
Kernels never write their inputs except the state arrays named as such.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit

#: :func:`merge_orders` status: every cluster before the last one is formed.
MERGE_DONE = -1
#: :func:`merge_orders` status: the output buffer is full; empty it and call again.
MERGE_FLUSH = -2


@jit
def merge_orders(buffers, starts, stops, sequence, state, k, taken, out):
    """Form the clusters of insensitive MDAV from buffered sorted orders.

    Parameters
    ----------
    buffers : int64[p, b]
        For each distinct reference point, the next rows of its order.
    starts, stops : int64[p]
        The unread part of each buffer, ``buffers[j, starts[j]:stops[j]]``; ``starts`` is
        advanced (state).
    sequence : int64[n_steps]
        Reference point of each cluster formed while ``>= 2k`` rows remain.
    state : int64[3]
        The cluster being formed, the rows it already holds, and the rows held in ``out``
        (state, updated).
    k : int
    taken : uint8[ceil(n / 8)]
        Bitset of the rows already in a cluster (state, updated).
    out : int64[e]
        Rows taken, in formation order (cluster ``c`` holds positions ``c k .. c k + k - 1``
        of the whole stream).

    Returns
    -------
    int
        :data:`MERGE_DONE`, :data:`MERGE_FLUSH`, or the point whose buffer must be
        refilled. Each cluster takes the first ``k`` untaken rows of its point's order, as
        :func:`dpfast._kernels.insensitive_mdav.take_in_order`. O(rows read).
    """
    cluster = state[0]
    held = state[1]
    filled = state[2]
    status = MERGE_DONE
    while cluster < sequence.shape[0]:
        if filled == out.shape[0]:
            status = MERGE_FLUSH
            break
        which = sequence[cluster]
        if starts[which] == stops[which]:
            status = which
            break
        row = buffers[which, starts[which]]
        starts[which] += 1
        byte = row >> 3
        bit = np.uint8(1 << (row & 7))
        if taken[byte] & bit:
            continue
        taken[byte] |= bit
        out[filled] = row
        filled += 1
        held += 1
        if held == k:
            cluster += 1
            held = 0
    state[0] = cluster
    state[1] = held
    state[2] = filled
    return status


@jit
def orderable_bits(keys):
    """Map float64 keys to uint64 words in the same order (no NaN). O(n)."""
    words = keys.view(np.uint64)
    out = np.empty(keys.shape[0], dtype=np.uint64)
    sign = np.uint64(1) << np.uint64(63)
    for i in range(keys.shape[0]):
        w = words[i]
        out[i] = ~w if w & sign else w | sign
    return out
