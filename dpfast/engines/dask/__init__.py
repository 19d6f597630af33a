"""Dask as an engine of dpfast (docs/engines.md, "Dask").

* :class:`DaskEngine`: every public function given a Dask DataFrame (or a
  :class:`DaskSource`) runs here: the out-of-core engine whose passes run on the workers,
  one task per partition; the release is a lazy Dask DataFrame the workers compute from
  small state where every column allows it, else the file the client wrote, read back in
  row order (:func:`read_in_order`);
* :class:`DaskSource`: a Dask DataFrame, or Parquet files (:meth:`DaskSource.from_parquet`),
  as a column source, rows numbered globally;
* :meth:`DaskEngine.write_release`: the workers write a release frame as a Parquet
  dataset directory, published atomically;
* :func:`local_cluster`: a ``LocalCluster`` of worker processes configured for dpfast.

Numba in the worker processes needs a writable cache directory, or every worker compiles
dpfast's kernels again: :func:`local_cluster` sets ``NUMBA_CACHE_DIR``; on a cluster,
set it in the workers' environment. Release files are configured with Dask settings
(``dpfast.scratch-dir``, ``dpfast.memory-limit``: :mod:`dpfast.engines.dask._settings`).

dask is an optional dependency (``pip install 'dpfast[dask]'``), imported only when a
function here runs.
"""

from __future__ import annotations

from dpfast.engines.dask._engine import DaskEngine
from dpfast.engines.dask._settings import read_in_order
from dpfast.engines.dask._source import DaskSource
from dpfast.engines.dask._write import local_cluster

__all__ = ["DaskEngine", "DaskSource", "local_cluster", "read_in_order"]
