"""The insensitive MDAV release out of core, written in output order (docs/engines.md).

The step (:mod:`dpfast.steps.cluster_passes`) leaves every row's cluster in a scratch
file (:class:`~dpfast.engines.cluster_files.Partition`). The rows' permutation, part by
part, gives each output row's cluster; the released columns are written in output order
(:func:`write_clustered`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpfast import noise
from dpfast.engines.cluster_files import ClusterLimits, Partition
from dpfast.engines.dataflow import cut_ranges
from dpfast.engines.outofcore._work import Work
from dpfast.engines.scratch_files import append_array, chunks
from dpfast.engines.values import Clusters

__all__ = ["write_clustered"]

Tick = Callable[[str, int, int], None]


def write_clustered(
    clusters: Clusters,
    paths: Sequence[Path],
    values: Sequence[np.ndarray],
    key: np.ndarray | None,
    tick: Tick,
    work: Work,
) -> None:
    """Write each column's cluster values in output order: row ``r`` of input row ``order[r]``.

    ``paths[j]`` receives ``values[j]`` of every output row's cluster (8-byte values);
    ``work`` counts the passes over the permutation's bucket stream.
    """
    held: Partition = clusters.held
    n, limits = held.attributes.n, held.limits
    files = [open(path, "wb") for path in paths]
    try:
        done = 0
        for labels in _output_labels(held, key, n, limits, work):
            for file, cluster_values in zip(files, values, strict=True):
                append_array(file, cluster_values[labels])
            done += labels.shape[0]
            tick("output order", done, n)
    finally:
        for file in files:
            file.close()


def _output_labels(
    held: Partition, key: np.ndarray | None, n: int, limits: ClusterLimits, work: Work
) -> Iterator[np.ndarray]:
    """Yield the clusters of the output rows, part by part of the permutation (or in order)."""
    if key is None:
        for first, count in chunks(n, limits.ordered_rows):
            yield held.read(first, count)
        return
    sizes = noise.permutation_bucket_sizes(key, n)
    whole = held.read(0, n) if n * 8 <= limits.work // 4 else None
    parts: list[tuple[int, int]] = []  # runs of buckets of at most ordered_rows rows
    cut_ranges(sizes, 0, sizes.shape[0], 0, 0, limits.ordered_rows, _Parts(parts))
    for lo, hi in parts:
        rows = noise.permutation_part(key, n, lo, hi, sizes)
        work.output_pass(n, rows.shape[0])
        yield whole[rows] if whole is not None else held.gather(rows)


@dataclass(frozen=True)
class _Parts:
    """Collect the ``(lo, hi)`` of each run of buckets :func:`cut_ranges` gives."""

    parts: list[tuple[int, int]]

    def __call__(self, lo: int, hi: int, first_rank: int, count: int) -> None:
        self.parts.append((lo, hi))
