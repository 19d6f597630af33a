"""The dataflow: the column source every engine implements, and what is written once over it.

The layer between the steps (:mod:`dpfast.steps`) and the engines (:mod:`dpfast.engines`),
docs/architecture.md. Steps and engines import it; it imports neither.

* :mod:`~dpfast.dataflow.source`: the column source protocol (:class:`Source`), the one
  protocol an engine implements for its data;
* :mod:`~dpfast.dataflow.flow`: the :class:`Dataflow` a step reads a table through, and the
  helpers every pass shares;
* :mod:`~dpfast.dataflow.values`: the values steps and methods pass (protected columns,
  group values, clusters, contingency tables);
* :mod:`~dpfast.dataflow.writes`: the output records a method asks an engine to write;
* :mod:`~dpfast.dataflow.row_outputs`, :mod:`~dpfast.dataflow.ranked_rows`,
  :mod:`~dpfast.dataflow.resampled_rows`, :mod:`~dpfast.dataflow.clustered_rows`: those
  outputs written once, each with a fast path where the table is held, put into the
  ``Rows`` an engine gives; :mod:`~dpfast.dataflow.sink`: which of them writes which
  record, for an engine that gives ``Rows`` (:class:`~dpfast.dataflow.sink.RowSink`);
* :mod:`~dpfast.dataflow.sorted_ranges`, :mod:`~dpfast.dataflow.rank_plans`,
  :mod:`~dpfast.dataflow.rank_files`, :mod:`~dpfast.dataflow.placement`,
  :mod:`~dpfast.dataflow.cluster_files`, :mod:`~dpfast.dataflow.scratch_files`: the range
  sort, rank placement, cluster files and scratch files those outputs and steps run on;
* :mod:`~dpfast.dataflow.on_bound`: the counts of rows released on a public bound.
"""
