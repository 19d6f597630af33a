"""The public functions given a Dask DataFrame: their arguments checked, then run on Dask.

Each function here takes the public function's own arguments, refuses those the Dask
engine cannot run (saying what to change), and returns a :class:`~dpfast.Release` whose
``data`` is a lazy Dask DataFrame: computed by the workers from small global state for
``ir_dp`` (column linkage, shuffled, unprotected columns dropped) and ``laplace_dp``
(unprotected columns dropped), :mod:`dpfast.engines.dask._release`; otherwise the file
that the client wrote from passes run on the workers, read back in row order
(:mod:`dpfast.engines.dask._methods`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from dpfast._release import Progress, Release
from dpfast.engines.dask._methods import run_on_client

__all__ = [
    "diffgen_frame",
    "individual_ranking_frame",
    "mdav_dp_frame",
]


def _refuse(method: str, found: Sequence[str]) -> None:
    if found:
        raise ValueError(
            f"{method} on a Dask DataFrame does not support {', '.join(found)}; drop "
            f"{'it' if len(found) == 1 else 'them'} (the Dask engine computes no metrics and "
            "takes public bounds only), or release frame.compute() in memory"
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
    """:func:`dpfast.individual_ranking` of a Dask DataFrame (passes on the workers)."""
    from dpfast.engines.individual import individual_ranking_dataset

    _refuse("individual_ranking", ["metrics=True"] if metrics else [])
    release = individual_ranking_dataset
    return Release(*run_on_client(release, data, k=k, columns=columns, progress=progress))


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
    """:func:`dpfast.mdav_dp` of a Dask DataFrame (passes on the workers)."""
    from dpfast.engines.mdav_dp import mdav_dp_dataset

    found: list[str] = []
    _common(bounds, metrics, found)
    if unprotected != "drop":
        found.append(f"unprotected={unprotected!r} (mdav_dp out of core drops them)")
    _refuse("mdav_dp", found)
    return Release(
        *run_on_client(
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
    """:func:`dpfast.diffgen` of a Dask DataFrame: its counts as a Dask DataFrame.

    The passes run on the workers; the counts table (one row per cell and class, small)
    is the in-memory release's of ``frame.compute()`` (categorical columns whose
    categories are the cut's values), as a Dask DataFrame of one partition.
    ``microdata()`` needs the counts in memory: expand ``counts.compute()`` instead.
    """
    import dataclasses
    import tempfile

    import dask
    import dask.dataframe as dd

    from dpfast.engines.dask._methods import memory_limit, scratch_directory
    from dpfast.engines.dask._source import DaskSource, dask_of
    from dpfast.engines.diffgen import diffgen_source

    found: list[str] = []
    _common(bounds, False, found)
    _refuse("diffgen", found)
    source = data if hasattr(data, "map_column") else DaskSource(data)
    dask_of(source)  # anything else is refused before a pass runs
    with tempfile.TemporaryDirectory(prefix="diffgen-", dir=scratch_directory()) as scratch:
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
            memory_limit=memory_limit(),
        )
    counts = release.counts.to_pandas()
    # the categories and text keep the in-memory release's dtypes
    with dask.config.set({"dataframe.convert-string": False}):
        frame = dd.from_pandas(counts, npartitions=1, sort=False)
    return dataclasses.replace(release, counts=frame)
