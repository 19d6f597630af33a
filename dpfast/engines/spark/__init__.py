"""Apache Spark as an engine of dpfast (docs/engines.md, "Spark").

* :class:`SparkEngine`: runs every public function given a pyspark DataFrame (or a
  :class:`SparkSource`) on the executors; :meth:`SparkEngine.write_release` has them write a
  release frame as a Parquet dataset directory, published atomically;
* :class:`SparkSource`: a Spark DataFrame, or Parquet files (:meth:`SparkSource.from_parquet`),
  as a column source, rows numbered globally;
* :func:`local_session`: a local session configured for dpfast's workers.

Executors must run the driver's dpfast and Python, with a writable Numba cache directory or
every worker compiles dpfast's kernels again: :func:`local_session` sets both locally; on a
cluster, set ``spark.executorEnv.NUMBA_CACHE_DIR`` to a writable directory of their hosts.

pyspark is an optional dependency (``pip install dpfast[spark]``), imported only when needed.
"""

from __future__ import annotations

from dpfast.engines.spark._engine import SparkEngine
from dpfast.engines.spark._session import local_session
from dpfast.engines.spark._source import SparkSource

__all__ = ["SparkEngine", "SparkSource", "local_session"]
