"""Steps: the data algorithms of the methods, each written once over the dataflow.

A method (:mod:`dpfast.methods`) calls a step; the step reads the table through the
engine's :class:`~dpfast.dataflow.flow.Dataflow` (a column source and the memory
limits of its passes), so that it runs unchanged in memory, out of core, on Spark and on
Dask. A table held in memory is a source of one batch per column, and a step keeps the
in-memory speed with a fast path on the values the engine holds (``Dataflow.holds``), not
with a second implementation (docs/architecture.md, "Steps").

* :func:`numeric_names`, :func:`value_dtype`, :func:`declared_categories`: what a
  column's type says (numbers or not, its values' dtype, the categories it declares);
* :func:`value_range`: a protected numeric column's smallest and largest value (bounds
  taken from the data);
* :func:`group_sums`, :func:`rank_counts`: a numeric column's rank groups' exact sums on
  its public grid, a categorical column's records per taxonomy rank (``ir_dp``);
* :func:`bin_counts`, :func:`edge_counts`: counts of a column per public interval
  (k-PRAM's bins, the DP bounds' candidate edges);
* :func:`order_statistics`: k-noise's order statistics of a column;
* :func:`occurring_values`, :func:`class_codes`, :func:`contingency`: a target's classes
  and the class counts of coded columns (DiffGen, randomized response's forecast);
* :func:`insensitive_clusters`, :func:`cluster_totals`: insensitive MDAV's partition of
  the rows and each cluster's exact totals (``mdav_dp``).
"""

from __future__ import annotations

from dpfast.steps.bins import bin_counts, edge_counts
from dpfast.steps.class_counts import class_codes, contingency, occurring_values
from dpfast.steps.clusters import cluster_totals, insensitive_clusters
from dpfast.steps.column_types import declared_categories, numeric_names, value_dtype
from dpfast.steps.extremes import value_range
from dpfast.steps.ranks import group_sums, rank_counts
from dpfast.steps.spacings import order_statistics

__all__ = [
    "bin_counts",
    "class_codes",
    "cluster_totals",
    "contingency",
    "declared_categories",
    "edge_counts",
    "group_sums",
    "insensitive_clusters",
    "numeric_names",
    "occurring_values",
    "order_statistics",
    "rank_counts",
    "value_dtype",
    "value_range",
]
