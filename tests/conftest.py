"""Test configuration shared by the suite."""

from __future__ import annotations

import pytest

# tests/reference holds slow reference implementations imported by the tests; they are not
# test files, and collecting them for doctests would import them outside their package.
collect_ignore = ["reference"]


@pytest.fixture
def smallest_memory_limit() -> int:
    """The smallest memory limit a release takes, as users get it (not lowered for tests)."""
    from dpfast.engines.outofcore import SMALLEST_MEMORY_LIMIT

    return SMALLEST_MEMORY_LIMIT


@pytest.fixture(autouse=True)
def tiny_memory_limits(request, monkeypatch):
    """Let a test give a memory limit below the smallest a release takes.

    Engine tests give tiny limits (2 bytes, 40 kB) so that a small table is sorted in
    several ranges, placed in several parts: the engine then works on its smallest pieces
    (1,024 items each), which a release below ``SMALLEST_MEMORY_LIMIT`` refuses to do
    because they exceed the limit. A test of that refusal asks for
    ``smallest_memory_limit``.
    """
    if "smallest_memory_limit" not in request.fixturenames:
        from dpfast.engines.outofcore import _memory

        monkeypatch.setattr(_memory, "SMALLEST_MEMORY_LIMIT", 1)


@pytest.fixture(scope="module")
def client(request):
    """A Dask client of two worker processes of one thread: a cluster per test module.

    The workers cannot import a test module (pytest imports it by path): the module's
    functions are sent by value. A module whose workers must receive no test code defines
    its own ``client``.
    """
    pytest.importorskip("distributed", reason="dask is not installed (pip install 'dpfast[dask]')")
    import cloudpickle
    from distributed import Client

    from dpfast.engines.dask import local_cluster

    cloudpickle.register_pickle_by_value(request.module)
    try:
        with local_cluster(2, dashboard_address=":0") as cluster, Client(cluster) as running:
            yield running
    finally:
        cloudpickle.unregister_pickle_by_value(request.module)


def _java_major() -> int | None:
    """The major version of the java that Spark would run (JAVA_HOME's, else PATH's)."""
    import os
    import re
    import shutil
    import subprocess

    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return None
    try:
        shown = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', shown.stderr + shown.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8.0" is Java 8


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the suite: 2 cores, 4 attempts per task, 4 shuffle parts."""
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install dpfast[spark])")
    major = _java_major()
    if major is None or major < 17:
        found = "no java found" if major is None else f"found Java {major}"
        pytest.skip(f"Spark needs Java 17 or later ({found}; set JAVA_HOME)")
    import os

    from dpfast.engines.spark import local_session

    # local_session sets these for the workers; later tests see the environment as it was
    saved = {name: os.environ.get(name) for name in ("NUMBA_CACHE_DIR", "PYSPARK_PYTHON")}
    # local[2,4]: two cores, and a failed task is tried up to 4 times, as on a cluster;
    # DPFAST_SPARK_MASTER runs the suite on another master, e.g. local-cluster[2,1,2048]
    # (two executors, each its own JVM with one core and 2 GiB: scripts/test-spark-cluster)
    # quiet: the JVM logs errors only from its start, and prints no progress bar
    session = local_session(
        os.environ.get("DPFAST_SPARK_MASTER", "local[2,4]"),
        app_name="dpfast-tests",
        shuffle_partitions=4,
        quiet=True,
        config={"spark.ui.enabled": "false"},
    )
    yield session
    session.stop()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


#: Test files some of whose tests take the Spark session under a name without "spark".
SPARK_FILES = frozenset({"tests/test_engine_faults.py"})


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to when ``scripts/test`` runs it on workers.

    ``"spark"`` for every test named for Spark or in :data:`SPARK_FILES` (one worker runs
    them all: one JVM), else the test's file, so that a module's fixtures (a Dask cluster,
    data written once) are made once, as in a serial run.
    """
    path = nodeid.split("::", 1)[0]
    return "spark" if "spark" in nodeid.lower() or path in SPARK_FILES else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadgroup``, send each :func:`work_unit` to one pytest-xdist worker.

    The units go out largest first (the Spark tests), each to the next free worker. The
    units are computed here from the test ids, not from pytest-xdist's ``xdist_group``
    marks, whose id suffix pytest 9.2 no longer takes.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return Units(config, log)


def pytest_collection_modifyitems(config, items):
    """Mark ``spark`` every test that takes the Spark session or is named for Spark.

    The conformance suite asks for the session inside the test (``request.getfixturevalue``),
    its Spark cases named ``spark-...``; ``scripts/test-spark-cluster`` selects the mark.
    A test that takes the session must fall in the Spark :func:`work_unit`.
    """
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) or "spark" in item.name.lower():
            item.add_marker(pytest.mark.spark)
            if work_unit(item.nodeid) != "spark":
                raise pytest.UsageError(
                    f"{item.nodeid} takes the Spark session but is not in the Spark work unit "
                    "of scripts/test's workers: name it for Spark or add its file to "
                    "SPARK_FILES in tests/conftest.py"
                )
