"""A clustered release's rows, written once for every engine: the ``WriteClusters`` record.

Every row is released as its cluster's value (MDAV's mean or centroid, insensitive MDAV's
noisy centroid), in the order of the keyed permutation of the rows
(:func:`dpfast.noise.permutation`; the input order without a key). Labels held: one scatter
a column. Otherwise the step left every row's cluster in a scratch file
(:class:`~dpfast.dataflow.cluster_files.Partition`), read back part by part of the
permutation, each part put into every column's ``Rows`` as it is read.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from dpfast import noise
from dpfast._kernels import insensitive_mdav as cluster_kernels
from dpfast.dataflow.cluster_files import Partition
from dpfast.dataflow.flow import Dataflow, bucket_runs
from dpfast.dataflow.row_outputs import Rows, held_array
from dpfast.dataflow.scratch_files import chunks
from dpfast.dataflow.values import Clusters, inverse_permutation

__all__ = ["clustered_rows"]


def clustered_rows(
    flow: Dataflow,
    clusters: Clusters,
    values: Sequence[np.ndarray],
    key: np.ndarray | None,
    into: Sequence[Rows],
) -> np.ndarray | None:
    """Put ``values[j][cluster of order[r]]`` at every output row ``r`` of ``into[j]``.

    ``values[j]`` holds column ``j``'s value of each cluster (float64, or int64 codes).
    Held (``clusters.labels``): returns where each input row went (the inverse of the
    permutation; empty without a key), by which the in-memory engine's metrics pair values
    and sources. From the scratch files: parts of at most the partition's
    ``limits.ordered_rows`` rows, ticking the progress line after each; returns ``None``.
    """
    n = flow.source.n_rows
    if clusters.held is None:
        destination = np.empty(0, dtype=np.int64)
        if key is not None:
            destination = inverse_permutation(noise.permutation(key, n))
        for rows, cluster_values in zip(into, values, strict=True):
            kind = np.float64 if cluster_values.dtype.kind == "f" else np.int64
            out = held_array(rows, n, kind)
            cluster_kernels.scatter_clusters(clusters.labels, cluster_values, destination, out)
            rows.put(0, out)
        return destination
    done = 0
    for labels in _output_labels(clusters.held, key, n):
        for rows, cluster_values in zip(into, values, strict=True):
            rows.put(done, cluster_values[labels])
        done += labels.shape[0]
        flow.tick("output order", done, n)
    return None


def _output_labels(held: Partition, key: np.ndarray | None, n: int) -> Iterator[np.ndarray]:
    """Yield the clusters of the output rows, part by part of the permutation (or in order)."""
    limits = held.limits
    if key is None:
        for first, count in chunks(n, limits.ordered_rows):
            yield held.read(first, count)
        return
    sizes = noise.permutation_bucket_sizes(key, n)
    whole = held.read(0, n) if n * 8 <= limits.work // 4 else None
    runs = bucket_runs(sizes, limits.ordered_rows)
    for lo, hi in itertools.pairwise(runs):
        rows = noise.permutation_part(key, n, lo, hi, sizes)
        yield whole[rows] if whole is not None else held.gather(rows)
