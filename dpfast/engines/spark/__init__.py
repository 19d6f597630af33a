"""Apache Spark as an engine of dpfast (docs/engines.md, "Spark").

* :class:`SparkEngine`: every public function given a pyspark DataFrame (or a
  :class:`SparkSource`) runs here: the out-of-core engine whose passes run on the
  executors; the release is a lazy Spark DataFrame the executors compute from small state
  where every column allows it, else the file the driver wrote, read by Spark in row order
  (``spark.dpfast.scratchDir``);
* :class:`SparkSource`: a Spark DataFrame, or Parquet files (:meth:`SparkSource.from_parquet`),
  as a column source, its passes run on the executors, rows numbered globally;
* :meth:`SparkEngine.write_release`: the executors write a release frame as a Parquet
  dataset directory, published atomically;
* :func:`local_session`: a local session configured for dpfast's workers.

Executors must run the same dpfast (and Python) as the driver, and Numba in the worker
processes needs a writable cache directory, or every worker compiles dpfast's kernels
again. :func:`local_session` sets both for a local session: ``PYSPARK_PYTHON`` (and
``spark.pyspark.python``) to this interpreter, and ``NUMBA_CACHE_DIR`` in the environment
the workers inherit and in ``spark.executorEnv.NUMBA_CACHE_DIR``. On a cluster, set
``spark.executorEnv.NUMBA_CACHE_DIR`` to a writable directory of the executors' hosts.

pyspark is an optional dependency (``pip install dpfast[spark]``), imported only when a
function here needs it.
"""

from __future__ import annotations

from dpfast.engines.spark._engine import SparkEngine
from dpfast.engines.spark._session import local_session
from dpfast.engines.spark._source import SparkSource

__all__ = ["SparkEngine", "SparkSource", "local_session"]
