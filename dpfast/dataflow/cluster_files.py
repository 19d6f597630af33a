"""The insensitive MDAV clusters held in scratch files: what the step writes, the engine reads.

Out of core, the insensitive MDAV step (:mod:`dpfast.steps.cluster_passes`) writes the
protected columns at their rows' places (:class:`Attributes`) and every row's cluster
(:class:`Partition`, the ``held`` handle of :class:`~dpfast.dataflow.values.Clusters`);
an engine writing ``WriteClusters`` reads the clusters back in output order.
:func:`cluster_limits` cuts the memory limit (:class:`ClusterLimits`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpfast._validation import option
from dpfast.dataflow.scratch_files import chunks, read_rows
from dpfast.exceptions import DPFastValueError
from dpfast.partitions.insensitive_mdav import FAST_PATH_MAX_POINTS, ReferenceGeometry

__all__ = ["Attributes", "ClusterLimits", "Partition", "cluster_limits"]

#: Bytes of working memory per collected row of a sorted range, beside 16 per attribute
#: (the key, the row, the sort's scratch and the values that break ties).
_BYTES_PER_SORTED_ROW = 64
#: Bytes per row of a part of the output order (the rows, their sort, their clusters).
_BYTES_PER_ORDERED_ROW = 40
#: Rows of a sequential pass over the scratch files, at most.
_CHUNK_ROWS = 1 << 20


@dataclass(frozen=True)
class ClusterLimits:
    """How the memory limit is cut: working memory beside the per-cluster arrays."""

    work: int
    batch_rows: int
    attributes: int
    merge_rows: int

    @property
    def sorted_rows(self) -> int:
        """Rows of a range of a point's order sorted at once."""
        return max(1024, self.work // (_BYTES_PER_SORTED_ROW + 16 * self.attributes))

    @property
    def ordered_rows(self) -> int:
        """Rows of a part of the output order."""
        return max(1024, self.work // _BYTES_PER_ORDERED_ROW)

    @property
    def chunk_rows(self) -> int:
        """Rows of a sequential pass over the scratch files."""
        return max(1024, min(_CHUNK_ROWS, self.work // (8 * (self.attributes + 4))))

    @property
    def bucket_rows(self) -> int:
        """Rows of a row range of the merge's output (its pairs and its labels)."""
        return max(1024, self.work // 32)


def cluster_limits(
    n: int,
    k: int,
    attributes: int,
    leaves: int,
    geometry: ReferenceGeometry,
    memory: int,
    batch_rows: int,
) -> ClusterLimits:
    """Cut the memory limit, refusing a sequence or clusters that cannot fit in it.

    ``leaves`` counts the categorical columns' leaves, added up. Refuses more than
    :data:`FAST_PATH_MAX_POINTS` distinct points, and per-cluster arrays (``n // k``
    clusters) with a bitset of the rows that take more than half of ``memory``.
    """
    n_points = geometry.points.shape[0]
    if n_points > FAST_PATH_MAX_POINTS:
        raise DPFastValueError(
            f"this reference sequence has {n_points} distinct points; out of core, the "
            f"clusters take at most {FAST_PATH_MAX_POINTS} (one sorted order of the rows per "
            "point): use reference 'corners' (or 'cycling' with at most 6 protected "
            f"columns), or release in memory without {option('memory_limit')}"
        )
    used = np.unique(geometry.sequence).shape[0]
    n_clusters = n // k
    merge_rows = max(1024, min(_CHUNK_ROWS, memory // (64 * (used + 1))))
    fixed = (
        (n + 7) // 8  # the bitset of taken rows
        + n_clusters * 8 * (6 + attributes)  # sequence, first rows, ranks, sums, values
        + n_clusters * 16 * leaves  # categorical counts and qualities
        + (used + 1) * 8 * merge_rows  # the merge's buffers
    )
    if 2 * fixed > memory:
        raise DPFastValueError(
            f"{n:,} rows with k={k} make {n_clusters:,} clusters, whose arrays (and the "
            f"bitset of the rows) need about {fixed:,} bytes, more than half the memory "
            "limit; raise the memory limit or k"
        )
    return ClusterLimits(memory - fixed, batch_rows, attributes, merge_rows)


@dataclass(frozen=True)
class Attributes:
    """The protected columns at their rows' places: clamped values (float64), codes (int64).

    ``values``, ``codes``: scratch files of ``n`` rows each, read ``chunk_rows`` at a time.
    """

    values: tuple[Path, ...]
    codes: tuple[Path, ...]
    n: int
    chunk_rows: int

    def chunks(self) -> Iterator[tuple[int, int]]:
        """Yield the ranges of rows a pass reads at once."""
        return chunks(self.n, self.chunk_rows)

    def read(self, first: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Read rows ``[first, first + count)`` of the clamped values and of the codes."""
        values = np.empty((count, len(self.values)), dtype=np.float64)
        for j, path in enumerate(self.values):
            values[:, j] = read_rows(path, np.float64, first, count)
        codes = np.empty((count, len(self.codes)), dtype=np.int64)
        for j, path in enumerate(self.codes):
            codes[:, j] = read_rows(path, np.int64, first, count)
        return values, codes

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return the clamped values and codes of ``rows`` (ascending), read chunk by chunk."""
        values = np.empty((rows.shape[0], len(self.values)), dtype=np.float64)
        codes = np.empty((rows.shape[0], len(self.codes)), dtype=np.int64)
        for first, count in self.chunks():
            a, b = np.searchsorted(rows, [first, first + count])
            if a == b:
                continue
            inside = rows[a:b] - first
            chunk_values, chunk_codes = self.read(first, count)
            values[a:b] = chunk_values[inside]
            codes[a:b] = chunk_codes[inside]
        return values, codes


@dataclass(frozen=True)
class Partition:
    """Every row's cluster in a file in row order, numbered as the merge formed them.

    ``rank[c]`` is the number by first appearance of the cluster formed ``c``-th;
    ``clamped[j]`` counts numeric column ``j``'s values outside its bounds.
    """

    labels: Path
    rank: np.ndarray
    attributes: Attributes
    limits: ClusterLimits
    clamped: tuple[int, ...]

    def read(self, first: int, count: int) -> np.ndarray:
        """Return the clusters (by first appearance) of rows ``[first, first + count)``."""
        return self.rank[read_rows(self.labels, np.int64, first, count)]  # type: ignore[no-any-return]

    def gather(self, rows: np.ndarray) -> np.ndarray:
        """Return the clusters of ``rows`` (distinct, any order), read chunk by chunk."""
        by_row = np.argsort(rows)
        ordered = rows[by_row]
        out = np.empty(rows.shape[0], dtype=np.int64)
        for first, count in self.attributes.chunks():
            a, b = np.searchsorted(ordered, [first, first + count])
            if a < b:
                out[by_row[a:b]] = self.read(first, count)[ordered[a:b] - first]
        return out
