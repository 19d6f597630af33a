"""A Dask client of the pytest process's cluster (the ``dask_cluster`` fixture)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any


@contextlib.contextmanager
def dask_client(cluster: Any, *by_value: ModuleType) -> Iterator[Any]:
    """A client of ``cluster`` while the modules ``by_value`` are sent to its workers by value.

    The workers cannot import a test module (pytest imports it by path): its functions are
    sent by value. The client waits for the cluster's two workers (one may be restarting
    after a test killed it).
    """
    import cloudpickle
    from distributed import Client

    for module in by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        with Client(cluster) as running:
            running.wait_for_workers(2, timeout=120)
            yield running
    finally:
        for module in reversed(by_value):
            cloudpickle.unregister_pickle_by_value(module)
