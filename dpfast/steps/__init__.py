"""Steps: the data algorithms of the methods, each written once over the dataflow.

A method (:mod:`dpfast.methods`) calls a step, which reads the table through the engine's
:class:`~dpfast.dataflow.flow.Dataflow` (a column source and its passes' memory limits), so
it runs unchanged in memory, out of core, on Spark and on Dask. A held table is a source of
one batch per column; a step keeps the in-memory speed with a fast path on the values the
engine holds (``Dataflow.holds``), not a second implementation (docs/architecture.md, "Steps").

The steps: what a column's type says (:func:`numeric_names`, :func:`value_dtype`,
:func:`declared_categories`); bounds taken from the data (:func:`value_range`); ``ir_dp``'s
rank groups' exact sums and records per taxonomy rank (:func:`group_sums`,
:func:`rank_counts`); counts per public interval, k-PRAM's bins and the DP bounds' candidate
edges (:func:`bin_counts`, :func:`edge_counts`); k-noise's order statistics
(:func:`order_statistics`); a target's classes and coded columns' class counts for DiffGen
and randomized response's forecast (:func:`occurring_values`, :func:`class_codes`,
:func:`contingency`); insensitive MDAV's partition and exact cluster totals for ``mdav_dp``
(:func:`insensitive_clusters`, :func:`cluster_totals`).
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
