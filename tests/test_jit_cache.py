"""The kernels' on-disk cache, shared by processes: saves and loads under a folder lock.

Numba chooses a new signature's data file from the index it read, so two processes saving
two signatures of one kernel at once could both choose one name, and the index would then
name the other process's code (dpfast/_jit.py). Each save holds the folder's lock
exclusively, and each load holds it shared.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import textwrap
import threading
import time

import numba
import pytest

import dpfast
from dpfast._jit import LOCK_NAME, _cache_lock, _LockedCache, _LockedCacheFile

fcntl = pytest.importorskip("fcntl", reason="the cache lock needs flock (not on Windows)")

#: How long a call that must wait for the lock is given to show that it does not.
WAIT = 0.5


def _file(folder) -> _LockedCacheFile:
    return _LockedCacheFile(cache_path=str(folder), filename_base="f-1.py3", source_stamp=(0, 0))


def test_every_kernel_saves_and_loads_under_the_lock():
    kernels = 0
    for found in pkgutil.walk_packages(dpfast.__path__, "dpfast."):
        if ".engines.spark" in found.name or ".engines.dask" in found.name:
            continue  # optional engines: their modules import pyspark or dask
        module = importlib.import_module(found.name)
        for value in vars(module).values():
            if isinstance(value, numba.core.dispatcher.Dispatcher):
                assert type(value._cache) is _LockedCache, value
                assert type(value._cache._cache_file) is _LockedCacheFile, value
                kernels += 1
    assert kernels > 100


def _in_thread(call):
    """Run ``call`` in a thread; return the thread and the event set once it returns."""
    returned = threading.Event()
    result = []

    def run():
        result.append(call())
        returned.set()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, returned, result


def test_a_save_waits_while_another_process_holds_the_lock(tmp_path):
    cache = _file(tmp_path)
    with _cache_lock(str(tmp_path), exclusive=True):  # another open file: flock conflicts
        thread, returned, _ = _in_thread(lambda: cache.save("key", "data"))
        assert not returned.wait(WAIT)  # the save waits for the lock
        assert not (tmp_path / "f-1.py3.nbi").exists()
    thread.join(30)
    assert returned.is_set()
    assert cache.load("key") == "data"
    assert (tmp_path / LOCK_NAME).exists()


def test_a_load_waits_for_a_save_and_loads_share_the_lock(tmp_path):
    cache = _file(tmp_path)
    cache.save("key", "data")
    with _cache_lock(str(tmp_path), exclusive=True):
        thread, returned, result = _in_thread(lambda: cache.load("key"))
        assert not returned.wait(WAIT)  # a save is under way: the load waits
    thread.join(30)
    assert result == ["data"]
    with _cache_lock(str(tmp_path), exclusive=False):
        thread, returned, result = _in_thread(lambda: cache.load("key"))
        assert returned.wait(30)  # another load: no wait
    assert result == ["data"]


# Two processes each save 60 signatures of one kernel in one folder, at once. Without the
# lock they read the same index, choose the same data file names, and the last writer's
# data sits under the other's keys.
_SAVER = textwrap.dedent(
    """
    import sys, time
    from dpfast._jit import _LockedCacheFile

    folder, who, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    cache = _LockedCacheFile(cache_path=folder, filename_base="f-1.py3", source_stamp=(0, 0))
    time.sleep(max(0.0, start - time.time()))
    for i in range(60):
        cache.save(f"{who}{i}", f"{who}{i}" * 1000)
    """
)


def test_two_processes_saving_signatures_of_one_kernel_keep_each_its_own(tmp_path):
    start = str(time.time() + 3)  # both start saving at once, after their imports
    savers = [
        subprocess.Popen([sys.executable, "-c", _SAVER, str(tmp_path), who, start])
        for who in ("a", "b")
    ]
    assert [saver.wait(120) for saver in savers] == [0, 0]
    cache = _file(tmp_path)
    for who in ("a", "b"):
        for i in range(60):
            assert cache.load(f"{who}{i}") == f"{who}{i}" * 1000, (who, i)


def test_a_folder_without_locks_or_writes_still_saves_and_loads(tmp_path, monkeypatch):
    # a file system that refuses locks (ENOLCK): the cache works unlocked, as Numba's own
    def refused(handle, operation):
        raise OSError(37, "No locks available")

    monkeypatch.setattr(fcntl, "flock", refused)
    cache = _file(tmp_path)
    cache.save("key", "data")
    assert cache.load("key") == "data"
    # a folder the lock file cannot be made in: no lock, and Numba's own error handling
    with _cache_lock(str(tmp_path / "missing"), exclusive=True):
        pass
