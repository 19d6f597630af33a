"""Dask as an engine of dpfast (docs/engines.md, "Dask").

* :class:`DaskSource`: a Dask DataFrame as a column source of the out-of-core engine, its
  passes run on the workers, one task per partition, rows numbered globally;
* :func:`ir_dp_dask` and :func:`laplace_dp_dask`: a release whose data is a lazy Dask
  DataFrame computed on the workers, the same as the in-memory release for a seed;
* :func:`write_release`: the workers write it as Parquet, published atomically;
* :func:`run_on_client`: every other out-of-core release, its passes on the workers and
  its file written by the client, read back as a Dask DataFrame in row order;
* :func:`local_cluster`: a ``LocalCluster`` of worker processes configured for dpfast.

Every public function with an out-of-core engine (``dpfast.ir_dp``, ``laplace_dp``,
``individual_ranking``, ``k_noise``, ``k_pram``, ``randomized_response``, ``mdav_dp``,
``diffgen``) given a Dask DataFrame runs here (:data:`dpfast.engines.DASK_RELEASES`).
Numba in the worker processes needs a writable cache directory, or every worker compiles
dpfast's kernels again: :func:`local_cluster` sets ``NUMBA_CACHE_DIR``; on a cluster,
set it in the workers' environment. Release files are configured with Dask settings
(``dpfast.scratch-dir``, ``dpfast.memory-limit``: :mod:`dpfast.engines.dask._methods`).

dask is an optional dependency (``pip install 'dpfast[dask]'``), imported only when a
function here runs.
"""

from __future__ import annotations

from dpfast.engines.dask._dispatch import (
    diffgen_frame,
    individual_ranking_frame,
    mdav_dp_frame,
)
from dpfast.engines.dask._methods import read_in_order, run_on_client
from dpfast.engines.dask._engine import DaskEngine
from dpfast.engines.dask._source import DaskSource
from dpfast.engines.dask._write import check_dask_output, local_cluster, write_release

__all__ = [
    "DaskEngine",
    "DaskSource",
    "check_dask_output",
    "diffgen_frame",
    "individual_ranking_frame",
    "ir_dp_dask",
    "ir_dp_frame",
    "laplace_dp_dask",
    "laplace_dp_frame",
    "local_cluster",
    "mdav_dp_frame",
    "read_in_order",
    "run_on_client",
    "write_release",
]
