"""Kernels of the out-of-core and cluster engines: buckets, group sums, histograms, ranges.

Permutation buckets of a row range, float group sums, histograms of grid values, and
keys grouped by range for the workers' sorts.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit
from dpfast._kernels.groups import group_start, rank_group
from dpfast._kernels.lanes import counter_blocks, new_lanes
from dpfast._kernels.uniform import WINDOW_ITEMS, lane_layout, window_buckets


@jit
def bucket_ids(key, bits, first, out):
    """Write the permutation bucket of items ``first .. first + len(out) - 1`` to ``out``.

    The lanes of the stream ``(key, 0)`` that :func:`dpfast.noise.permutation` reads:
    item ``i``'s bucket is the top ``bits`` bits of its lane (``bits >= 1``).
    """
    lanes = new_lanes()
    words = lanes.words
    buckets = np.empty(WINDOW_ITEMS, dtype=np.int64)
    per_window = 128 * lane_layout(bits)[1]
    count = out.shape[0]
    done = 0
    while done < count:
        item = first + done
        window = item // per_window
        counter_blocks(key, 0, window * 16, lanes)
        j = item - window * per_window
        used = min(per_window, j + count - done)  # the window's items this call needs
        window_buckets(words, used, bits, buckets)
        while j < used:
            out[done] = buckets[j]
            j += 1
            done += 1


@jit
def order_by_bucket(buckets, n_buckets):
    """Return a stable order of items by bucket: a counting sort, O(items + buckets).

    Returns ``order`` (``int64``), the items' places by bucket (places increasing within
    a bucket), and ``counts`` (``int64[n_buckets]``), the items of each bucket.
    """
    counts = np.zeros(n_buckets, dtype=np.int64)
    for i in range(buckets.shape[0]):
        counts[buckets[i]] += 1
    at = np.empty(n_buckets, dtype=np.int64)
    total = 0
    for b in range(n_buckets):
        at[b] = total
        total += counts[b]
    order = np.empty(buckets.shape[0], dtype=np.int64)
    for i in range(buckets.shape[0]):
        b = buckets[i]
        order[at[b]] = i
        at[b] += 1
    return order, counts


@jit
def add_float_group_sums(sorted_values, first_rank, k, big, r, sums):
    """Add the values of ranks ``first_rank ..``, one by one in rank order, to their groups.

    ``sums[rank_group(rank)] += value`` in the layout ``(k, big, r)``
    (:mod:`dpfast._kernels.groups`): the same float additions in the same order as
    :func:`dpfast._kernels.ranking.float_group_means`, so parts of a column added in rank
    order give its sums bit for bit. Complexity O(m).
    """
    m = sorted_values.shape[0]
    i = 0
    rank = first_rank
    while i < m:
        g = rank_group(rank, k, big, r)
        stop = min(m, i + group_start(g + 1, k, big, r) - rank)
        total = sums[g]
        for t in range(i, stop):
            total += sorted_values[t]
        sums[g] = total
        rank += stop - i
        i = stop


@jit
def add_float_run(value, count, first_rank, k, big, r, sums):
    """Add ``count`` copies of ``value`` from rank ``first_rank``, one by one, to their groups."""
    rank = first_rank
    left = count
    while left > 0:
        g = rank_group(rank, k, big, r)
        m = min(left, group_start(g + 1, k, big, r) - rank)
        total = sums[g]
        for _ in range(m):
            total += value
        sums[g] = total
        rank += m
        left -= m


@jit
def count_in_buckets(q, lo, hi, shift, counts):
    """Add one to ``counts[(v - lo) >> shift]`` for every ``v`` of ``q`` in ``[lo, hi)``.

    ``q`` is ``uint64``; ``lo``, ``hi`` and ``shift`` are ``uint64`` scalars and
    ``counts`` (``int64``) has a slot for every bucket. One pass, no temporaries. O(n).
    """
    for i in range(q.shape[0]):
        v = q[i]
        if v >= lo and v < hi:
            counts[np.int64((v - lo) >> shift)] += 1


@jit
def group_by_ranges(keys, lo, hi):
    """Group the keys by the disjoint ranges ``[lo[j], hi[j])`` (``lo`` increasing).

    Returns ``(grouped, starts)``: range ``j``'s keys are ``grouped[starts[j]:starts[j +
    1]]``, in their input order; keys in no range are dropped. A key's range is found by
    a branch-free binary search over ``lo``. Two passes over the keys. O(n log m).
    """
    n, m = keys.shape[0], lo.shape[0]
    index = np.empty(n, dtype=np.int32)
    starts = np.zeros(m + 1, dtype=np.int64)
    for i in range(n):
        key = keys[i]
        j, length = 0, m  # the last range whose lo is at most key is j or after
        while length > 1:
            half = length >> 1
            j = j + half if lo[j + half] <= key else j  # no branch to mispredict
            length -= half
        if m > 0 and lo[j] <= key and key < hi[j]:
            index[i] = j
            starts[j + 1] += 1
        else:
            index[i] = -1
    for j in range(m):
        starts[j + 1] += starts[j]
    grouped = np.empty(starts[m], dtype=keys.dtype)
    fill = starts[:m].copy()
    for i in range(n):
        j = index[i]
        if j >= 0:
            grouped[fill[j]] = keys[i]
            fill[j] += 1
    return grouped, starts


@jit
def new_words(n):
    """Return a new ``uint64[n]`` (contents undefined), allocated by the compiled code.

    Unlike NumPy, which asks Linux for transparent huge pages on large arrays, this gets
    plain 4 KiB pages. For a buffer that is made once and then reused
    (:class:`dpfast.dataflow.sorted_ranges.KeyBuffers`), their first touch measured 2 to 4 times
    cheaper here than a huge page's, whose allocation may wait for the kernel to compact
    memory (docs/engines.md, "Memory pages").
    """
    return np.empty(n, dtype=np.uint64)
