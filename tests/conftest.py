"""Test configuration shared by the suite."""

from __future__ import annotations

import pytest

# tests/reference holds slow reference implementations imported by the tests; they are not
# test files, and collecting them for doctests would import them outside their package.
collect_ignore = ["reference"]


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


def pytest_collection_modifyitems(config, items):
    """Mark ``spark`` every test that takes the Spark session or is named for Spark.

    The conformance suite asks for the session inside the test (``request.getfixturevalue``),
    its Spark cases named ``spark-...``; ``scripts/test-spark-cluster`` selects the mark.

    Under pytest-xdist (``scripts/test`` runs ``--dist loadgroup``), tests that share an
    expensive fixture run on one worker, so that it is made once per run as in a serial
    run: every Spark test in the group ``spark`` (one JVM), and the tests of a module that
    take one of its module-scoped fixtures (a Dask cluster, data written once), or are
    named for Dask (the conformance suite's Dask client), in a group of that module.
    """
    grouped = config.pluginmanager.hasplugin("xdist")
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) or "spark" in item.name.lower():
            item.add_marker(pytest.mark.spark)
            if grouped:
                item.add_marker(pytest.mark.xdist_group("spark"))
        elif grouped and (_takes_a_module_fixture(item) or "dask" in item.name.lower()):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def _takes_a_module_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` takes a fixture made once per module (a doctest takes none)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(d[-1].scope == "module" for d in info.name2fixturedefs.values() if d)
