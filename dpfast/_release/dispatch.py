"""Public functions given a pyspark DataFrame run on Spark (docs/engines.md, "Spark").

A public function starts with ``if is_spark_frame(data): return on_spark("name",
locals())``: any other input goes on to the in-memory release, untouched. The engines
sit above the methods, so the Spark release is found by name at call time, in
:data:`dpfast.engines.SPARK_RELEASES`, as a plug-in is.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["is_dask_frame", "is_spark_frame", "on_dask", "on_spark"]


def is_spark_frame(data: object) -> bool:
    """Return whether ``data`` is a pyspark DataFrame, without importing pyspark."""
    kind = type(data)
    return kind.__name__ == "DataFrame" and kind.__module__.startswith("pyspark.sql")


def on_spark(method: str, arguments: dict[str, Any]) -> Any:
    """Run public function ``method`` on Spark with its ``arguments`` (its ``locals()``).

    Returns the :class:`~dpfast.Release` of the Spark engine, whose ``data`` is a Spark
    DataFrame; arguments the engine cannot run are refused there, saying what to change.
    """
    engines = importlib.import_module("dpfast.engines")
    from dpfast.exceptions import interrupt_in

    named = dict(arguments)
    data = named.pop("data")
    try:
        return engines.spark_release(method)(data, **named)
    except Exception as exc:
        interrupt = interrupt_in(exc)
        if interrupt is None:
            raise
        raise interrupt from exc


def is_dask_frame(data: object) -> bool:
    """Return whether ``data`` is a Dask DataFrame, without importing dask."""
    kind = type(data)
    return kind.__name__ == "DataFrame" and kind.__module__.startswith("dask.dataframe")


def on_dask(method: str, arguments: dict[str, Any]) -> Any:
    """Run public function ``method`` on Dask with its ``arguments`` (its ``locals()``).

    Returns the :class:`~dpfast.Release` of the Dask engine, whose ``data`` is a Dask
    DataFrame (:data:`dpfast.engines.DASK_RELEASES`).
    """
    engines = importlib.import_module("dpfast.engines")
    named = dict(arguments)
    data = named.pop("data")
    return engines.dask_release(method)(data, **named)
