"""pyspark's daemon for the test session's Python workers, dpfast imported before it forks.

pyspark forks each Python worker from its daemon. A worker whose task failed or was
killed exits, and the next task's worker imports dpfast (with NumPy, pandas, pyarrow and
Numba) again: about 1.3 s of CPU each, and the fault tests fail or kill dozens of tasks.
Forked from this daemon, a worker starts with those modules imported; the tasks run the
same code. The ``spark`` fixture (tests/conftest.py) names it in
``spark.python.daemon.module``; a run of the command line starts its own JVM with
pyspark's own daemon.
"""

from __future__ import annotations

from pyspark.daemon import manager

import dpfast.engines.outofcore
import dpfast.engines.spark._source  # noqa: F401

if __name__ == "__main__":
    manager()
