"""Apache Spark as an engine of dpfast (docs/engines.md, "Spark").

* :class:`SparkSource`: a Spark DataFrame as a column source of the out-of-core engine,
  its passes run on the executors, rows numbered globally;
* :func:`ir_dp_spark` and :func:`laplace_dp_spark`: a release whose data is a lazy Spark
  DataFrame computed on the executors, the same as the in-memory release for a seed;
* :func:`write_release`: the executors write it as Parquet, published atomically;
* :func:`local_session`: a local session configured for dpfast's workers.

* the ``*_frame`` functions: each public function given a pyspark DataFrame
  (:data:`dpfast.engines.SPARK_RELEASES`); the releases not computed on the executors run
  their method's out-of-core function over a :class:`SparkSource` and return the file
  the driver wrote, read by Spark (:mod:`._methods`: ``spark.dpfast.scratchDir``).

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

from dpfast.engines.spark._dispatch import (
    diffgen_frame,
    individual_ranking_frame,
    mdav_dp_frame,
)
from dpfast.engines.spark._engine import SparkEngine
from dpfast.engines.spark._session import local_session
from dpfast.engines.spark._source import SparkSource
from dpfast.engines.spark._write import check_spark_output, write_release

__all__ = [
    "SparkEngine",
    "SparkSource",
    "check_spark_output",
    "diffgen_frame",
    "individual_ranking_frame",
    "local_session",
    "mdav_dp_frame",
    "write_release",
]
