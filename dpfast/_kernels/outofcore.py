"""Kernels of the out-of-core engine: permutation buckets of a row range, float group sums."""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit
from dpfast._kernels.lanes import counter_blocks, new_lanes
from dpfast._kernels.uniform import lane_layout


@jit
def bucket_ids(key, bits, first, out):
    """Write the permutation bucket of items ``first .. first + len(out) - 1`` to ``out``.

    The lanes of the stream ``(key, 0)`` that :func:`dpfast.noise.permutation` reads:
    item ``i``'s bucket is the top ``bits`` bits of its lane (``bits >= 1``).
    """
    lanes = new_lanes()
    words = lanes.words
    lane_bits, per_word = lane_layout(bits)
    per_window = 128 * per_word
    count = out.shape[0]
    done = 0
    while done < count:
        item = first + done
        window = item // per_window
        counter_blocks(key, 0, window * 16, lanes)
        j = item - window * per_window
        while j < per_window and done < count:
            value = words[j // per_word] >> np.uint64(lane_bits * (j % per_word))
            if lane_bits < 64:
                value &= np.uint64((1 << lane_bits) - 1)
            out[done] = np.int64(value >> np.uint64(lane_bits - bits))
            j += 1
            done += 1


@jit
def add_float_group_sums(sorted_values, first_rank, k, sums):
    """Add the values of ranks ``first_rank ..``, one by one in rank order, to their groups.

    ``sums[min(r // k, n_groups - 1)] += value``: the same float additions in the same
    order as :func:`dpfast._kernels.ranking.float_group_means`, so parts of a column
    added in rank order give its sums bit for bit. Complexity O(m).
    """
    n_groups = sums.shape[0]
    for t in range(sorted_values.shape[0]):
        g = min((first_rank + t) // k, n_groups - 1)
        sums[g] += sorted_values[t]


@jit
def add_float_run(value, count, first_rank, k, sums):
    """Add ``count`` copies of ``value`` from rank ``first_rank``, one by one, to their groups."""
    n_groups = sums.shape[0]
    for t in range(count):
        g = min((first_rank + t) // k, n_groups - 1)
        sums[g] += value
