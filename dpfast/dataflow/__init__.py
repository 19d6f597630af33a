"""The dataflow: the column source every engine implements, and what is written once over it.

The layer between the steps (:mod:`dpfast.steps`) and the engines (:mod:`dpfast.engines`),
docs/architecture.md. Steps and engines import it; it imports neither. It holds the column
source protocol, the one an engine implements for its data (:mod:`~dpfast.dataflow.source`);
the :class:`Dataflow` a step reads a table through, and the helpers every pass shares
(:mod:`~dpfast.dataflow.flow`); the values steps and methods pass
(:mod:`~dpfast.dataflow.values`); the output records a method asks an engine to write
(:mod:`~dpfast.dataflow.writes`), written once into the engine's ``Rows`` with a fast path
where the table is held (:mod:`~dpfast.dataflow.row_outputs`,
:mod:`~dpfast.dataflow.ranked_rows`, :mod:`~dpfast.dataflow.resampled_rows`,
:mod:`~dpfast.dataflow.clustered_rows`), and which of them writes which record
(:mod:`~dpfast.dataflow.sink`); the range sort, rank placement, cluster files and scratch
files they run on (:mod:`~dpfast.dataflow.sorted_ranges`, :mod:`~dpfast.dataflow.rank_plans`,
:mod:`~dpfast.dataflow.rank_files`, :mod:`~dpfast.dataflow.placement`,
:mod:`~dpfast.dataflow.cluster_files`, :mod:`~dpfast.dataflow.scratch_files`); and the
counts of rows released on a public bound (:mod:`~dpfast.dataflow.on_bound`).
"""
