"""Dask as an engine of dpfast (docs/engines.md, "Dask").

* :class:`DaskSource`: a Dask DataFrame as a column source of the out-of-core engine, its
  passes run on the workers, one task per partition, rows numbered globally;
* :func:`ir_dp_dask` and :func:`laplace_dp_dask`: a release whose data is a lazy Dask
  DataFrame computed on the workers, the same as the in-memory release for a seed;
* :func:`write_release`: the workers write it as Parquet, published atomically;
* :func:`local_cluster`: a ``LocalCluster`` of worker processes configured for dpfast.

``dpfast.ir_dp`` and ``dpfast.laplace_dp`` given a Dask DataFrame run here
(:data:`dpfast.engines.DASK_RELEASES`). Numba in the worker processes needs a writable
cache directory, or every worker compiles dpfast's kernels again: :func:`local_cluster`
sets ``NUMBA_CACHE_DIR``; on a cluster, set it in the workers' environment.

dask is an optional dependency (``pip install 'dpfast[dask]'``), imported only when a
function here runs.
"""

from __future__ import annotations

from dpfast.engines.dask._dispatch import ir_dp_frame, laplace_dp_frame
from dpfast.engines.dask._release import ir_dp_dask, laplace_dp_dask
from dpfast.engines.dask._source import DaskSource
from dpfast.engines.dask._write import check_dask_output, local_cluster, write_release

__all__ = [
    "DaskSource",
    "check_dask_output",
    "ir_dp_dask",
    "ir_dp_frame",
    "laplace_dp_dask",
    "laplace_dp_frame",
    "local_cluster",
    "write_release",
]
