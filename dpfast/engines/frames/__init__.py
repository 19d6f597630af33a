"""What a cluster's workers compute a release frame from, and how they write it.

A cluster engine (:class:`~dpfast.engines.outofcore.ClusterEngine`: Spark, Dask) returns
its release as a lazy frame whose tasks compute the released columns from small, keyed
state, so the frame is the same however its tasks are cut, ordered or retried:

* :mod:`~dpfast.engines.frames.parts`: columns of rank groups in a keyed permutation
  (:class:`GroupsColumn`, a frame of them :class:`GeneratedParts`) and columns released
  row by row (:class:`RowsColumn`, a batch of them :class:`RowsBatch`);
* :mod:`~dpfast.engines.frames.exchange`: a frame made through one exchange of the
  input's rows (:class:`ExchangedParts`: copies in a keyed order beside the columns
  above);
* :mod:`~dpfast.engines.frames.sent_ranks`: rank groups whose values the tasks that sort
  a column compute and send through that exchange;
* :mod:`~dpfast.engines.frames.plans`: what writing a frame needs, kept beside the frame
  (:class:`WritePlan`, :func:`remember`, :func:`plan_of`).

Spark and Dask build and write their frames from these; the out-of-core engine never
makes one.
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
