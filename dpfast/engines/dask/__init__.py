"""Dask as an engine of dpfast (docs/engines.md, "Dask").

:class:`DaskEngine` releases a Dask DataFrame or a :class:`DaskSource` (also Parquet files:
:meth:`DaskSource.from_parquet`) on the workers: a lazy Dask DataFrame they compute from
small state where every column allows it, else the file the client wrote, read back in row
order (:func:`read_in_order`). :meth:`DaskEngine.write_release` has the workers write a
release frame as a Parquet dataset directory, published atomically.

Numba in the worker processes needs a writable cache directory, or every worker compiles
dpfast's kernels again: :func:`local_cluster` sets ``NUMBA_CACHE_DIR``; on a cluster, set
it in the workers' environment. Release files are configured with Dask settings
(:mod:`dpfast.engines.dask._settings`). dask is an optional dependency (``pip install
'dpfast[dask]'``), imported only when a function here runs.
"""

from __future__ import annotations

from dpfast.engines.dask._engine import DaskEngine
from dpfast.engines.dask._settings import read_in_order
from dpfast.engines.dask._source import DaskSource
from dpfast.engines.dask._write import local_cluster

__all__ = ["DaskEngine", "DaskSource", "local_cluster", "read_in_order"]
