"""Range partitioning of ordered keys by histograms of their top bits (docs/engines.md).

Sorting beyond memory in the column engine is one scheme: count the keys of a range per
bucket of their top :data:`HISTOGRAM_BITS` bits, cut the buckets into runs that fit,
and refine a run that holds more than fits with a histogram of its own.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: Bits of a histogram pass.
HISTOGRAM_BITS = 16


def refined_shift(lo: int, hi: int) -> int:
    """Return the shift of a histogram of ``[lo, hi)`` in at most ``2**HISTOGRAM_BITS`` buckets."""
    return max(0, (hi - lo - 1).bit_length() - HISTOGRAM_BITS)


def cut_ranges(
    counts: np.ndarray,
    lo: int,
    hi: int,
    shift: int,
    first_rank: int,
    capacity: int,
    process: Callable[[int, int, int, int], None],
) -> None:
    """Cut ``[lo, hi)`` into runs of histogram buckets holding at most ``capacity`` keys.

    ``counts[b]`` counts the keys in ``[lo + (b << shift), lo + ((b + 1) << shift))``.
    Calls ``process(run_lo, run_hi, first_rank, count)`` for every run in key order,
    with the rank of its first key. A run spans its first to its last non-empty bucket,
    so a bucket above ``capacity`` is a run of its own and exactly as wide as that bucket:
    refining it always narrows it (a heavy tie with empty buckets beside it would
    otherwise give the same range again).
    """
    start = end = held = 0
    rank = first_rank
    for b in np.flatnonzero(counts).tolist():
        count = int(counts[b])
        if held and held + count > capacity:
            process(lo + (start << shift), min(hi, lo + (end << shift)), rank, held)
            rank += held
            held = 0
        if held == 0:
            start = b
        held += count
        end = b + 1
    if held:
        process(lo + (start << shift), min(hi, lo + (end << shift)), rank, held)
