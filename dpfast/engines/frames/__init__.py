"""What a cluster's workers compute a release frame from, and how they write it.

A cluster engine's release (:class:`~dpfast.engines.outofcore.ClusterEngine`: Spark, Dask;
never the out-of-core engine) is a lazy frame whose tasks compute the released columns from
small, keyed state, so it is the same however its tasks are cut, ordered or retried:

* :mod:`~dpfast.engines.frames.parts`: columns of rank groups (:class:`GroupsColumn`,
  :class:`GeneratedParts`) or released row by row (:class:`RowsColumn`, :class:`RowsBatch`);
* :mod:`~dpfast.engines.frames.exchange`: a frame made through one exchange of the input's
  rows (:class:`ExchangedParts`), with rank groups the sorting tasks send through it
  (:mod:`~dpfast.engines.frames.sent_ranks`);
* :mod:`~dpfast.engines.frames.plans`: what writing a frame needs, kept beside it
  (:class:`WritePlan`, :func:`remember`, :func:`plan_of`).
"""

from __future__ import annotations

from dpfast.engines.frames.exchange import ExchangedParts
from dpfast.engines.frames.parts import (
    GeneratedParts,
    GroupsColumn,
    RowsBatch,
    RowsColumn,
    text_columns,
)
from dpfast.engines.frames.plans import WritePlan, plan_of, remember

__all__ = [
    "ExchangedParts",
    "GeneratedParts",
    "GroupsColumn",
    "RowsBatch",
    "RowsColumn",
    "WritePlan",
    "plan_of",
    "remember",
    "text_columns",
]
