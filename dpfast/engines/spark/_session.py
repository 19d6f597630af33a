"""A local Spark session configured for dpfast's workers."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from dpfast.engines.outofcore import worker_numba_cache
from dpfast.engines.spark._rows import quietly

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["local_session"]


def local_session(
    master: str = "local[*]",
    *,
    app_name: str = "dpfast",
    shuffle_partitions: int = 8,
    numba_cache_dir: str | os.PathLike[str] | None = None,
    config: Mapping[str, str] | None = None,
) -> SparkSession:
    """Return a SparkSession configured for dpfast (or the running one, reconfigured).

    Parameters
    ----------
    master : str
        ``"local[*]"`` (all cores), ``"local[N]"``, ``"local[N,F]"`` (``F`` attempts per
        task) or a cluster's URL.
    app_name : str
        The application's name in Spark's UI.
    shuffle_partitions : int
        ``spark.sql.shuffle.partitions``: few, since dpfast's passes shuffle nothing.
    numba_cache_dir : path, optional
        Numba's cache directory for the Python workers; default: ``NUMBA_CACHE_DIR`` if
        set, else ``dpfast-numba`` in the temporary directory.
    config : mapping, optional
        More Spark settings, applied last.

    Returns
    -------
    pyspark.sql.SparkSession

    Notes
    -----
    For a local master, the workers run this Python (``PYSPARK_PYTHON`` is set in this
    process's environment, if unset, and ``spark.pyspark.python``), so they import the
    same dpfast. ``NUMBA_CACHE_DIR`` is set in this process's environment if unset (local
    workers inherit it) and in ``spark.executorEnv.NUMBA_CACHE_DIR``.
    """
    from pyspark.sql import SparkSession

    cache = worker_numba_cache(numba_cache_dir)
    settings = {
        "spark.app.name": app_name,
        "spark.sql.shuffle.partitions": str(int(shuffle_partitions)),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.executorEnv.NUMBA_CACHE_DIR": cache,
    }
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings["spark.pyspark.python"] = sys.executable
    settings.update(config or {})
    builder = SparkSession.builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    with quietly():
        return builder.getOrCreate()
