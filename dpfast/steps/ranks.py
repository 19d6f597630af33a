"""A categorical column's records per taxonomy rank: ``ir_dp``'s categorical rank groups.

Individual ranking sorts a categorical column by its categories' taxonomy ranks; the
counts per rank give every rank group's members without a sort. Held in memory, the
column's codes are counted at once; elsewhere, one pass counts each batch's, added up
where the batches are read (:func:`~dpfast.engines.dataflow.column_total`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dpfast.engines.dataflow import Dataflow, column_total, taxonomy_codes
from dpfast.engines.values import CategoricalColumn

__all__ = ["rank_counts"]


def rank_counts(flow: Dataflow, column: CategoricalColumn) -> np.ndarray:
    """Return the column's records per rank of its taxonomy (int64, one per leaf).

    Raises
    ------
    DPFastValueError
        A value is missing or outside the taxonomy (read by a pass; held, the engine
        refused it when it read the column).
    """
    if flow.holds:
        return np.asarray(column.taxonomy.rank_counts(column.codes), dtype=np.int64)
    flow.tick(f"column {column.name}", 0, 1)
    start = np.zeros(len(column.taxonomy.domain), dtype=np.int64)
    batch_rows = flow.limits.batch_rows
    counts: np.ndarray = column_total(
        flow.source, str(column.name), batch_rows, _RankCounts(column), start
    )
    return counts


@dataclass(frozen=True)
class _RankCounts:
    """A batch of a categorical column's records counted per taxonomy rank."""

    column: CategoricalColumn

    def __call__(self, array: pa.Array, first_row: int) -> np.ndarray:
        codes = taxonomy_codes(array, self.column)
        return np.asarray(self.column.taxonomy.rank_counts(codes), dtype=np.int64)
