"""The Numba cache of the Spark and Dask workers a release starts on this machine.

Local workers use the cache of the process that starts them (``NUMBA_CACHE_DIR`` if set,
else Numba's default beside dpfast's kernels, where ``dpfast warm-up`` and
``scripts/demo`` put them), so that a warmed-up machine's first local Spark or Dask
release compiles nothing; workers elsewhere get a folder they can write.
"""

from __future__ import annotations

import os
import tempfile

import pytest

from dpfast.engines.scratch_dirs import worker_numba_cache


def _unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset NUMBA_CACHE_DIR for the test, restored after it even where it was unset."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", "")  # recorded, so that what the test sets is undone
    monkeypatch.delenv("NUMBA_CACHE_DIR")


def _kernel_cache() -> str:
    """Where this process's Numba caches a dpfast kernel (run on a worker too)."""
    from dpfast._kernels import mechanisms

    return str(mechanisms.min_max._cache._cache_path)


def test_local_workers_use_this_process_cache_and_nothing_is_set(monkeypatch):
    _unset(monkeypatch)
    assert worker_numba_cache(None, local=True) is None
    assert "NUMBA_CACHE_DIR" not in os.environ


def test_workers_elsewhere_get_a_folder_they_can_write(monkeypatch):
    _unset(monkeypatch)
    expected = os.path.join(tempfile.gettempdir(), "dpfast-numba")
    assert worker_numba_cache(None, local=False) == expected
    assert "NUMBA_CACHE_DIR" not in os.environ  # this process keeps its own cache


@pytest.mark.parametrize("local", [True, False])
def test_a_cache_given_or_set_is_made_and_shared(tmp_path, monkeypatch, local):
    _unset(monkeypatch)
    given = tmp_path / "given"
    assert worker_numba_cache(given, local=local) == str(given)
    assert given.is_dir() and os.environ["NUMBA_CACHE_DIR"] == str(given)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "set"))
    assert worker_numba_cache(None, local=local) == str(tmp_path / "set")
    assert (tmp_path / "set").is_dir()


def test_dask_workers_cache_the_kernels_where_this_process_does(client):
    assert set(client.run(_kernel_cache).values()) == {_kernel_cache()}


def test_spark_workers_cache_the_kernels_where_this_process_does(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.executorEnv.NUMBA_CACHE_DIR") == os.environ.get("NUMBA_CACHE_DIR")
    found = spark.sparkContext.parallelize(range(2), 2).map(lambda _: _kernel_cache()).collect()
    assert set(found) == {_kernel_cache()}
