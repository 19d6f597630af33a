"""Test configuration shared by the suite."""

from __future__ import annotations

import json
from pathlib import Path

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


#: Dask's settings for the tests' clusters: no statistical profiler in the workers (a
#: sample of every thread every 10 ms) and the monitors polled each second, not ten times:
#: about a fifth of the CPU time of tests/test_engine_dask.py on the 2-core VM. They
#: change no result.
QUIET_DASK = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "1s",
    "distributed.admin.tick.interval": "200ms",
    "distributed.worker.memory.monitor-interval": "1s",
}

#: The pytest process's Dask cluster while its tests use one (else empty).
_DASK: list = []

#: The fixtures that connect to the cluster.
DASK_FIXTURES = frozenset({"client", "dask_client", "dask_cluster"})


@pytest.fixture(scope="module")
def dask_cluster():
    """A ``LocalCluster`` of two worker processes of one thread, kept from module to module.

    Started at the first test that needs it, it serves the modules run one after another
    that use Dask, each with a client of its own (``client``), and is closed once the next
    test is in a module that does not use it: starting a cluster and importing dpfast in
    its workers cost about 7 CPU seconds, and an idle cluster about 3 % of a core. A test
    that kills a worker leaves the cluster as it was: its nanny starts another, and
    ``client`` waits for both.
    """
    pytest.importorskip("distributed", reason="dask is not installed (pip install 'dpfast[dask]')")
    if not _DASK:
        import dask

        from dpfast.engines.dask import local_cluster

        dask.config.set(QUIET_DASK)
        _DASK.append(local_cluster(2, dashboard_address=":0"))
    return _DASK[0]


def _close_dask() -> None:
    if _DASK:
        _DASK.pop().close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Close the Dask cluster when the next test is in another module that does not use it.

    Within a module the cluster stays: the module's client may still be open.
    """
    yield  # the test's fixtures are torn down, and its module's if the next is elsewhere
    if nextitem is None or (
        nextitem.path != item.path  # a doctest item has a file but no module
        and not DASK_FIXTURES & set(getattr(nextitem, "fixturenames", ()))
    ):
        _close_dask()


def pytest_sessionfinish(session):
    """Close the Dask cluster, if the last test left it open."""
    _close_dask()


@pytest.fixture(scope="module")
def client(request, dask_cluster):
    """A Dask client of the pytest process's cluster, the module's functions sent by value.

    A module whose workers must receive no test code defines its own ``client``.
    """
    from tests.dask_clients import dask_client

    with dask_client(dask_cluster, request.module) as running:
        yield running


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
    # the Python workers fork from a daemon that has imported dpfast (tests/spark_daemon.py),
    # so that a worker replacing one that a failed or killed task ended does not import it
    # again; the repository on the workers' path finds the daemon's module
    # the JVM compiles with its quick compiler only (C1) and collects garbage in one thread:
    # a test run is many short jobs, for which C2's compiles and a parallel collector's
    # threads cost more CPU than they return (153 -> 130 CPU seconds for
    # tests/test_engine_spark.py on the 2-core VM); neither changes a result
    config = {
        "spark.driver.defaultJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "spark.ui.enabled": "false",
        "spark.python.daemon.module": "tests.spark_daemon",
        "spark.executorEnv.PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    session = local_session(
        os.environ.get("DPFAST_SPARK_MASTER", "local[2,4]"),
        app_name="dpfast-tests",
        shuffle_partitions=4,
        quiet=True,
        config=config,
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

#: Test files whose tests are cut by engine into several units: their Spark cases, their
#: Dask cases (the module's Dask cluster is made once, in that unit) and the rest.
SPLIT_BY_ENGINE = frozenset({"tests/test_engine_conformance.py"})

#: Test files some of whose tests use the Dask cluster (:data:`DASK_FIXTURES`): a worker
#: runs such units one after another while any is left (:func:`next_unit`), so that the
#: cluster, closed when a module that does not use it comes next, starts once, not once
#: a unit (about 7 CPU seconds each).
DASK_FILES = frozenset(
    {
        "tests/test_engine_column_batches.py",
        "tests/test_engine_dask.py",
        "tests/test_engine_dask_methods.py",
        "tests/test_engine_exchange.py",
        "tests/test_engine_faults.py",
        "tests/test_engine_sorted.py",
        "tests/test_engine_totals.py",
        "tests/test_engine_work.py",
        "tests/test_publish_interrupts.py",
        "tests/test_worker_cache.py",
    }
)

#: The seconds each unit took in a whole run (``--record-unit-seconds``): the order in
#: which the units are sent. The figures only order the units; they decide no result.
UNIT_SECONDS = Path(__file__).with_name("unit_seconds.json")

#: The seconds assumed per test of a unit :data:`UNIT_SECONDS` does not list.
SECONDS_PER_TEST = 0.5


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to when ``scripts/test`` runs it on workers.

    ``"<file> spark"`` for the tests of a file named for Spark or in :data:`SPARK_FILES`
    (a worker's first such test starts its Spark session: at most one JVM per worker),
    ``"<file> dask"`` for the Dask cases of a file in :data:`SPLIT_BY_ENGINE`, else the
    test's file, so that a module's fixtures (a Dask cluster, data written once) are made
    once per unit.
    """
    path = nodeid.split("::", 1)[0]
    named = nodeid.lower()
    if "spark" in named or path in SPARK_FILES:
        return f"{path} spark"
    if path in SPLIT_BY_ENGINE and "dask" in named:
        return f"{path} dask"
    return path


def uses_dask(unit: str) -> bool:
    """Whether a work unit's tests may use the Dask cluster.

    >>> uses_dask("tests/test_engine_conformance.py dask"), uses_dask("tests/test_cli.py")
    (True, False)
    """
    return unit.endswith(" dask") or unit.split(" ", 1)[0] in DASK_FILES


def unit_order(units: dict[str, int], seconds: dict[str, float]) -> list[str]:
    """The units, longest first: their recorded seconds, else their tests' count.

    >>> unit_order({"a": 10, "b": 2, "c": 400}, {"b": 300.0})
    ['b', 'c', 'a']
    """
    return sorted(units, key=lambda unit: -seconds.get(unit, units[unit] * SECONDS_PER_TEST))


def next_unit(queue: list[str], spark: bool, dask: bool = False) -> str:
    """The unit a worker takes next from ``queue`` (longest first).

    The Spark worker (``spark``: it runs the Spark units, or no worker does yet) takes the
    first Spark unit, the others the first other unit; either takes the first unit when
    its kind is done. A worker whose last unit used Dask (``dask``) takes the first unit
    of its kind that may use Dask, while there is one (:func:`uses_dask`).

    >>> queue = ["a.py dask", "b.py spark", "c.py", "d.py spark"]
    >>> next_unit(queue, spark=True), next_unit(queue, spark=False)
    ('b.py spark', 'a.py dask')
    >>> next_unit(["d.py spark"], spark=False)
    'd.py spark'
    >>> next_unit(["c.py", "e.py dask"], spark=False, dask=True)
    'e.py dask'
    """
    for unit in queue:
        if unit.endswith(" spark") == spark and (not dask or uses_dask(unit)):
            return unit
    if dask:
        return next_unit(queue, spark)
    return queue[0]


def _recorded_seconds() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(UNIT_SECONDS.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def pytest_addoption(parser):
    parser.addoption(
        "--record-unit-seconds",
        metavar="PATH",
        help="write the seconds each work unit of scripts/test took to PATH (JSON), e.g. "
        "tests/unit_seconds.json, which orders the units",
    )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadgroup``, send each :func:`work_unit` to one pytest-xdist worker.

    The units go out longest first (:func:`unit_order`), each to the next worker that has
    at most one test left (a worker runs a test once it knows the next one), except that
    the Spark units go to one worker while it lives (:func:`next_unit`): one JVM starts
    and warms up, not one per worker; and a worker that ran a unit using Dask runs the
    next such unit while there is one: its cluster stays up. The units are computed here
    from the test ids, not from pytest-xdist's ``xdist_group`` marks, whose id suffix
    pytest 9.2 no longer takes.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        ordered = False
        spark_node = None  # the worker that runs the Spark units

        def __init__(self, config, log=None) -> None:
            super().__init__(config, log)
            self.dask_nodes: set = set()  # the workers whose last unit used Dask

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the queue holds every unit on the first call
                units = {unit: len(tests) for unit, tests in self.workqueue.items()}
                queue = dict(self.workqueue)
                self.workqueue.clear()
                for unit in unit_order(units, _recorded_seconds()):
                    self.workqueue[unit] = queue[unit]
                self.ordered = True
            if self.spark_node is not None and self.spark_node not in self.assigned_work:
                self.spark_node = None  # it went down: another worker may start a JVM
            spark = self.spark_node in (None, node)
            unit = next_unit(list(self.workqueue), spark=spark, dask=node in self.dask_nodes)
            if self.spark_node is None and unit.endswith(" spark"):
                self.spark_node = node
            if uses_dask(unit):
                self.dask_nodes.add(node)
            else:
                self.dask_nodes.discard(node)
            self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

        def _reschedule(self, node) -> None:
            if not node.shutting_down and self.workqueue:
                if self._pending_of(self.assigned_work[node]) > 1:
                    return  # more than the one test the worker holds back
            super()._reschedule(node)

    return Units(config, log)


class _UnitClock:
    """Adds up, per work unit, the seconds its tests' set-up, call and tear-down took."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report) -> None:
        unit = work_unit(report.nodeid)
        self.seconds[unit] = self.seconds.get(unit, 0.0) + report.duration

    def pytest_sessionfinish(self) -> None:
        ordered = {u: round(s, 1) for u, s in sorted(self.seconds.items(), key=lambda i: -i[1])}
        Path(self.path).write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")


def pytest_configure(config):
    path = config.getoption("--record-unit-seconds", None)
    if path and not hasattr(config, "workerinput"):  # the controller hears every report
        config.pluginmanager.register(_UnitClock(path), "dpfast-unit-clock")


def pytest_collection_modifyitems(config, items):
    """Mark ``spark`` every test that takes the Spark session or is named for Spark.

    The conformance suite asks for the session inside the test (``request.getfixturevalue``),
    its Spark cases named ``spark-...``; ``scripts/test-spark-cluster`` selects the mark.
    A test that takes the session must fall in a Spark :func:`work_unit`, so that the
    units that start a JVM are known (and ordered by their recorded seconds).
    """
    for item in items:
        uses = DASK_FIXTURES & set(getattr(item, "fixturenames", ()))
        if uses and not uses_dask(work_unit(item.nodeid)):
            raise pytest.UsageError(
                f"{item.nodeid} uses the Dask cluster but is not in a Dask work unit of "
                "scripts/test's workers: add its file to DASK_FILES in tests/conftest.py"
            )
        if "spark" in getattr(item, "fixturenames", ()) or "spark" in item.name.lower():
            item.add_marker(pytest.mark.spark)
            if not work_unit(item.nodeid).endswith(" spark"):
                raise pytest.UsageError(
                    f"{item.nodeid} takes the Spark session but is not in a Spark work unit "
                    "of scripts/test's workers: name it for Spark or add its file to "
                    "SPARK_FILES in tests/conftest.py"
                )
