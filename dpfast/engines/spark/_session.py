"""A local Spark session configured for dpfast's workers."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

from dpfast.engines.scratch_dirs import worker_numba_cache
from dpfast.engines.spark._rows import quietly

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["local_session"]

#: Spark's log4j 2 settings for a quiet session: errors only, on stderr.
QUIET_LOG = Path(__file__).with_name("log4j2-quiet.properties")

#: What the JVM itself prints at start, whatever the log's level: Spark's launcher adds
#: the incubating vector module, and the JVM names it.
JVM_START_NOTES = (b"WARNING: Using incubator modules:",)


def local_session(
    master: str = "local[*]",
    *,
    app_name: str = "dpfast",
    shuffle_partitions: int = 8,
    numba_cache_dir: str | os.PathLike[str] | None = None,
    quiet: bool = False,
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
        The workers' Numba cache; default: ``NUMBA_CACHE_DIR`` if set, else, for a local
        master, this process's cache (where ``dpfast warm-up`` puts the kernels), and for
        a cluster's, ``dpfast-numba`` in the executors' temporary directory.
    quiet : bool
        If this call starts Spark's JVM: its log shows errors only from the start, and its
        start-up note on incubator modules is dropped from stderr (a running JVM keeps its log).
    config : mapping, optional
        More Spark settings, applied last.

    Returns
    -------
    pyspark.sql.SparkSession

    Notes
    -----
    For a local master, the workers run this Python, so they import the same dpfast
    (``PYSPARK_PYTHON``, set in this process's environment if unset, and ``spark.pyspark.python``).
    A cache given or in ``NUMBA_CACHE_DIR`` is also set there if unset (local workers inherit
    it), and any but Numba's default in ``spark.executorEnv.NUMBA_CACHE_DIR``. Console progress
    bars are off, as they would overwrite dpfast's progress line (``config`` can turn them on).
    """
    from pyspark.sql import SparkSession

    cache = worker_numba_cache(numba_cache_dir, local=master.startswith("local"))
    settings = {
        "spark.app.name": app_name,
        "spark.sql.shuffle.partitions": str(int(shuffle_partitions)),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.showConsoleProgress": "false",
    }
    if cache is not None:
        settings["spark.executorEnv.NUMBA_CACHE_DIR"] = cache
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings["spark.pyspark.python"] = sys.executable
    if quiet:
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={QUIET_LOG}"
    settings.update(config or {})
    if quiet:
        _start_jvm_quietly(master, settings)
    builder = SparkSession.builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    with quietly():
        return builder.getOrCreate()


def _start_jvm_quietly(master: str, settings: Mapping[str, str]) -> None:
    """Start Spark's JVM and its context, relaying its stderr less :data:`JVM_START_NOTES`.

    A no-op if this process runs a JVM already (``SparkContext._gateway``): pyspark keeps
    one per process, also after a session's stop.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf().setMaster(master).setAll(list(settings.items()))
    # launch_gateway's popen_kwargs is pyspark's way to take the JVM's stderr
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    relay = threading.Thread(
        target=_relay, args=(gateway.proc.stderr,), name="dpfast-spark-stderr", daemon=True
    )
    relay.start()
    with quietly():
        SparkContext(conf=conf, gateway=gateway)


def _relay(stream: IO[bytes]) -> None:
    """Copy the JVM's stderr to this process's, less its start-up notes, until it ends."""
    for line in iter(stream.readline, b""):
        if not line.startswith(JVM_START_NOTES):
            os.write(2, line)
