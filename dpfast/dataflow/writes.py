"""What a release writes: one record per released output, executed by an engine.

A method says what each released column is (the record) and hands it to
:meth:`Engine.write <dpfast.engines.base.Engine.write>`; the engine writes it at once or
keeps it for :meth:`~dpfast.engines.base.Engine.publish` (a cluster keeps the records it
can compute lazily on its workers). Every ``order`` below is :func:`dpfast.noise.permutation`
``(key, n)`` (``key`` ``None``: the input order), drawn from the key, so a seeded release is
the same on every engine.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from dpfast.dataflow.values import (
    Bins,
    Cells,
    Clusters,
    CodeCells,
    GroupValues,
    NumericColumn,
    ProtectedColumn,
)
from dpfast.exceptions import DPFastTypeError
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups

__all__ = [
    "CopyColumns",
    "Write",
    "WriteClusters",
    "WriteCodes",
    "WriteGroups",
    "WriteLinked",
    "WriteRanked",
    "WriteResampled",
    "WriteRows",
    "WriteTable",
    "unknown_write",
]

R = TypeVar("R")


class Write(Generic[R]):
    """One released output; writing it gives back an ``R``."""


@dataclass(frozen=True, eq=False)
class WriteRows(Write[np.ndarray]):
    """A numeric column released row by row: output row ``i`` is ``cells`` of input row ``i``.

    Writing it gives ``cells``' counts, added over the batches; an integer column keeps its dtype.
    """

    column: NumericColumn
    cells: Cells


@dataclass(frozen=True, eq=False)
class WriteGroups(Write[None]):
    """A column whose output row ``r`` holds ``values[layout.group_of(order[r])]``.

    ``values`` are the rank groups' released values (float64, or taxonomy codes of a
    categorical column), in ``layout``'s groups; ``order`` is the permutation of ``key``.
    """

    column: ProtectedColumn
    values: np.ndarray
    layout: RankGroups
    key: np.ndarray


@dataclass(frozen=True, eq=False)
class WriteLinked(Write[tuple[np.ndarray, int]]):
    """Each row's rank-group value at the row's own place (record linkage).

    Rows are ranked by (grid value, row), or (taxonomy rank, row) for a categorical column
    (``grid`` ``None``), and cut into ``layout``'s rank groups; ``values(sums)`` (the groups'
    exact integer sums, or the records per taxonomy rank) gives every group's value. Output
    row ``r`` holds input row ``order[r]``; writing it gives the group values and clamped count.
    """

    column: ProtectedColumn
    grid: Grid | None
    layout: RankGroups
    key: np.ndarray | None
    values: GroupValues


@dataclass(frozen=True, eq=False)
class WriteRanked(Write[None]):
    """Each row's rank-group value at the row's own place, rows in the input order.

    Rows are ranked by (value, row) and cut into ``layout``'s rank groups; ``values(sums)``
    gets their float sums (values added one by one in rank order) and gives their released values.
    """

    column: NumericColumn
    layout: RankGroups
    values: GroupValues


@dataclass(frozen=True, eq=False)
class CopyColumns(Write[None]):
    """Columns ``names`` unchanged (types too): output row ``r`` holds input row ``order[r]``."""

    names: Sequence[Hashable]
    key: np.ndarray | None


@dataclass(frozen=True, eq=False)
class WriteClusters(Write[None]):
    """``columns`` released cluster by cluster, the rows in ``key``'s order.

    Output row ``r`` of column ``j`` holds ``values[j][c]``, column ``j``'s released value of
    ``c``, the cluster of input row ``order[r]`` (float64, already rounded for an integer
    column, or taxonomy codes of a categorical one).
    """

    columns: Sequence[ProtectedColumn]
    clusters: Clusters
    values: Sequence[np.ndarray]
    key: np.ndarray | None


@dataclass(frozen=True, eq=False)
class WriteTable(Write[None]):
    """A table the method computed (a row per cell, not per record): the whole output.

    ``columns`` as :func:`dpfast.io.build_table` takes them: an array, or ``(codes, labels)``
    for a categorical column. Published as a table of the input's kind (in memory), a frame
    (a cluster) or the dataset written at ``output`` (out of core). With ``repeat`` (a column
    of non-negative integer counts), what is written at ``output`` holds each row that many
    times, without that column.
    """

    columns: Mapping[Hashable, Any]
    repeat: Hashable | None = None


@dataclass(frozen=True, eq=False)
class WriteResampled(Write[None]):
    """A numeric column whose rows keep their value or take one of their bin's.

    Output row ``i`` is row ``i`` of :func:`dpfast.noise.retain_or_replace` ``(key, keep,
    values, pool, groups=bins.of(values), group_start=bins.starts, group_size=bins.counts)``,
    the pool listing the values bin by bin, each bin's in row order: kept with probability
    ``keep / 2**32``, else replaced by the value of a uniformly drawn row of the same bin
    (every bin holds one). Rows keep their order, an integer column its dtype; ``n_threads``
    draw at once (the release does not depend on it).
    """

    column: NumericColumn
    bins: Bins
    key: np.ndarray
    keep: int
    n_threads: int = 1


@dataclass(frozen=True, eq=False)
class WriteCodes(Write[None]):
    """Column ``name`` coded by a public ``domain``, released row by row, in row order.

    Each value becomes the index of an equal label in ``domain``
    (:func:`~dpfast.dataflow.values.code_dtype`), ``cells`` gives every row's released code,
    and the output holds the codes' labels: a pandas categorical stays one (of categories
    ``domain``), any other column holds ``domain``'s values. A missing value or one not in
    ``domain`` is refused (:func:`~dpfast.dataflow.values.check_in_domain`) before publishing.
    """

    name: Hashable
    domain: Sequence[Any]
    cells: CodeCells


def unknown_write(engine: str, request: Write[Any]) -> DPFastTypeError:
    """Return the error for a record an engine does not write."""
    return DPFastTypeError(
        f"the {engine} engine does not write {type(request).__name__}: an engine writes the "
        "records of dpfast.dataflow.writes"
    )
