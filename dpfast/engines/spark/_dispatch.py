"""The public functions given a pyspark DataFrame: their arguments checked, then run on Spark.

Each function here takes the public function's own arguments, refuses those the Spark
engine cannot run (saying what to change), and returns a :class:`~dpfast.Release` whose
``data`` is the lazy Spark DataFrame of :mod:`dpfast.engines.spark._release`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from dpfast._release import Progress, Release
from dpfast.engines.spark._methods import run_on_driver

__all__ = [
    "diffgen_frame",
    "individual_ranking_frame",
    "mdav_dp_frame",
]


def _refuse(method: str, found: Sequence[str]) -> None:
    if found:
        raise ValueError(
            f"{method} on a Spark DataFrame does not support {', '.join(found)}; drop "
            f"{'it' if len(found) == 1 else 'them'} (the Spark engine computes no metrics and "
            "takes public bounds only), or release frame.toPandas() in memory"
        )


def _common(bounds: Any, metrics: Any, found: list[str]) -> None:
    if isinstance(bounds, str):
        found.append(f"bounds={bounds!r} (give public bounds per column)")
    if metrics:
        found.append("metrics=True")


def individual_ranking_frame(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    metrics: bool = False,
    progress: Progress | None = None,
) -> Release:
    """:func:`dpfast.individual_ranking` of a Spark DataFrame (passes on the executors)."""
    from dpfast.engines.individual import individual_ranking_dataset

    _refuse("individual_ranking", ["metrics=True"] if metrics else [])
    release = individual_ranking_dataset
    return Release(*run_on_driver(release, data, k=k, columns=columns, progress=progress))


def mdav_dp_frame(
    data: Any,
    *,
    k: int,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]] | str | None = None,
    taxonomies: Mapping[Hashable, Any] | None = None,
    columns: Sequence[Hashable] | None = None,
    unprotected: str = "drop",
    reference: Any = "corners",
    calibration: str = "l1",
    seed: int | None = None,
    metrics: bool = False,
    progress: Progress | None = None,
) -> Release:
    """:func:`dpfast.mdav_dp` of a Spark DataFrame (passes on the executors)."""
    from dpfast.engines.mdav_dp import mdav_dp_dataset

    found: list[str] = []
    _common(bounds, metrics, found)
    if unprotected != "drop":
        found.append(f"unprotected={unprotected!r} (mdav_dp out of core drops them)")
    _refuse("mdav_dp", found)
    return Release(
        *run_on_driver(
            mdav_dp_dataset,
            data,
            k=k,
            epsilon=epsilon,
            bounds=bounds,
            taxonomies=taxonomies,
            columns=columns,
            reference=reference,
            calibration=calibration,
            seed=seed,
            progress=progress,
        )
    )


def diffgen_frame(
    data: Any,
    *,
    target: Hashable,
    epsilon: float,
    steps: int,
    taxonomies: Mapping[Hashable, Any] | None = None,
    bounds: Mapping[Hashable, tuple[float, float]] | str | None = None,
    utility: Any = "max",
    classes: Sequence[Any] | None = None,
    seed: int | None = None,
) -> Any:
    """:func:`dpfast.diffgen` of a Spark DataFrame: its counts as a Spark DataFrame.

    The passes run on the executors; the counts table (one row per cell and class, small)
    is the in-memory release's, as a Spark DataFrame of the same session (categorical
    columns as strings). ``microdata()`` needs the counts in memory: expand
    ``counts.toArrow()`` instead.
    """
    import tempfile

    from dpfast.engines.diffgen import diffgen_source
    from dpfast.engines.spark._methods import memory_limit
    from dpfast.engines.spark._source import SparkSource, spark_of

    found: list[str] = []
    _common(bounds, False, found)
    _refuse("diffgen", found)
    source = data if hasattr(data, "map_column") else SparkSource(data)
    session = spark_of(source).session
    with tempfile.TemporaryDirectory(prefix="dpfast-diffgen-") as scratch:
        release = diffgen_source(
            source,
            scratch,
            target=target,
            epsilon=epsilon,
            steps=steps,
            taxonomies=taxonomies,
            bounds=bounds,  # type: ignore[arg-type]
            utility=utility,
            classes=classes,
            seed=seed,
            memory_limit=memory_limit(session),
        )
    counts = release.counts
    plain = [
        column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column
        for column in counts.columns
    ]
    table = pa.Table.from_arrays(plain, names=counts.column_names)
    return dataclasses.replace(release, counts=session.createDataFrame(table))
