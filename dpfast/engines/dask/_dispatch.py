"""The public functions given a Dask DataFrame: their arguments checked, then run on Dask.

Each function here takes the public function's own arguments, refuses those the Dask
engine cannot run (saying what to change), and returns a :class:`~dpfast.Release` whose
``data`` is the lazy Dask DataFrame of :mod:`dpfast.engines.dask._release`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from dpfast._release import Progress, Release
from dpfast.engines.dask._release import ir_dp_dask, laplace_dp_dask

__all__ = ["ir_dp_frame", "laplace_dp_frame"]


def _refuse(method: str, found: Sequence[str]) -> None:
    if found:
        raise ValueError(
            f"{method} on a Dask DataFrame does not support {', '.join(found)}; drop "
            f"{'it' if len(found) == 1 else 'them'} (the Dask engine releases the protected "
            "columns only, rows shuffled, without metrics), or release frame.compute() in "
            "memory"
        )


def _common(bounds: Any, unprotected: Any, metrics: Any, found: list[str]) -> None:
    if isinstance(bounds, str):
        found.append(f"bounds={bounds!r} (give public bounds per column)")
    if unprotected != "drop":
        found.append(f"unprotected={unprotected!r}")
    if metrics:
        found.append("metrics=True")


def ir_dp_frame(
    data: Any,
    *,
    k: int,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]] | str | None = None,
    taxonomies: Mapping[Hashable, Any] | None = None,
    sensitivity: str = "proven",
    columns: Sequence[Hashable] | None = None,
    unprotected: str = "drop",
    linkage: str = "columns",
    shuffle: bool = True,
    seed: int | None = None,
    n_threads: int | None = None,
    metrics: bool = False,
    progress: Progress | None = None,
) -> Release:
    """:func:`dpfast.ir_dp` of a Dask DataFrame (:func:`ir_dp_dask`), as a Release."""
    found: list[str] = []
    _common(bounds, unprotected, metrics, found)
    if linkage != "columns":
        found.append(f"linkage={linkage!r}")
    if not shuffle:
        found.append("shuffle=False")
    _refuse("ir_dp", found)
    frame, report, private = ir_dp_dask(
        data,
        k=k,
        epsilon=epsilon,
        bounds=bounds or {},  # type: ignore[arg-type]
        taxonomies=taxonomies,
        columns=columns,
        sensitivity=sensitivity,
        seed=seed,
        n_threads=n_threads,
        progress=progress,
    )
    return Release(frame, report, private)


def laplace_dp_frame(
    data: Any,
    *,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]] | str,
    columns: Sequence[Hashable] | None = None,
    unprotected: str = "drop",
    seed: int | None = None,
    metrics: bool = False,
    progress: Progress | None = None,
) -> Release:
    """:func:`dpfast.laplace_dp` of a Dask DataFrame (:func:`laplace_dp_dask`), as a Release.

    Rows keep the frame's order (by partition, then position), so the frame must be
    deterministic: persist it.
    """
    found: list[str] = []
    _common(bounds, unprotected, metrics, found)
    _refuse("laplace_dp", found)
    frame, report, private = laplace_dp_dask(
        data,
        epsilon=epsilon,
        bounds=bounds,  # type: ignore[arg-type]
        columns=columns,
        seed=seed,
        progress=progress,
    )
    return Release(frame, report, private)
