"""``ir_dp`` and ``laplace_dp`` on Dask, with the release computed on the workers.

The client runs the engine's passes through :class:`DaskSource` (the workers read the
data), draws the small global state (an ``ir_dp`` column's ``n // k`` noisy group values
and permutation key; a ``laplace_dp`` column's key), spends the ledger and builds the
reports, exactly as the Spark engine does (it shares the Spark engine's state objects).
The released data is then a lazy Dask DataFrame computed on the workers from that state:

* ``ir_dp``: ``dd.from_delayed`` over output parts; part ``p`` holds output rows
  ``[p * part_rows, (p + 1) * part_rows)`` of every released column, computed from the
  permutation buckets covering them and the group values
  (:func:`dpfast.noise.permutation_part_groups`), so the frame's rows are those of
  :func:`dpfast.ir_dp`, in its order.
  Nothing is sorted: the rows' order comes from the keyed permutation.
* ``laplace_dp``: one task per input partition noises its cells, cell ``(i, c)`` with
  the draw of nonce ``i`` (the global row number) of column ``c``'s key, in row order.

Everything is keyed, so the frame is the same however often Dask computes it, whatever
its partitioning and the number of workers, and after any retry.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpfast.accounting import PrivateReport, Report
from dpfast.engines.dask._source import DaskSource, arrow_column
from dpfast.engines.outofcore import (
    BATCH_ROWS,
    Progress,
)
from dpfast.engines.spark._laplace import _Cells, _NoisedBatch, noised_columns
from dpfast.engines.spark._release import (
    PARTS_ATTRIBUTE,
    GeneratedParts,
    _Generated,
    output_part_rows,
    released_columns,
)

__all__ = ["dask_of", "dask_source", "ir_dp_dask", "laplace_dp_dask"]


def _dtype(kind: str) -> Any:
    """Return a released column's pandas dtype, the in-memory release's (labels: text)."""
    if kind == "labels":
        return pd.Series(["label"]).dtype
    return np.dtype("int64" if kind == "int" else "float64")


def dask_source(data: Any) -> Any:
    """Return ``data`` as a column source: a Dask DataFrame becomes a :class:`DaskSource`."""
    return data if hasattr(data, "map_column") else DaskSource(data)


def dask_of(source: Any) -> DaskSource:
    """Return the :class:`DaskSource` under ``source`` (itself, or a checked wrapper's)."""
    inner = source
    while not isinstance(inner, DaskSource):
        inner = getattr(inner, "dataset", None)
        if inner is None:
            raise TypeError(
                f"a Dask release reads a Dask DataFrame or a DaskSource, got "
                f"{type(source).__name__}"
            )
    return inner


def ir_dp_dask(
    data: Any,
    *,
    k: int,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]],
    integer: Mapping[Hashable, bool] | None = None,
    taxonomies: Mapping[Hashable, Any] | None = None,
    columns: Sequence[Hashable] | None = None,
    sensitivity: str = "proven",
    seed: int | None = None,
    memory_limit: int = 2**30,
    n_threads: int | None = None,
    batch_rows: int = BATCH_ROWS,
    part_rows: int | None = None,
    progress: Progress | None = None,
) -> tuple[Any, Report, PrivateReport]:
    """Release a Dask DataFrame with ``ir_dp``; the data is a lazy frame of the workers.

    A seeded release is the one :func:`dpfast.ir_dp` gives for the same table
    (``linkage="columns"``, unprotected columns dropped), rows in the same order, whatever
    the frame's partitioning and the number of workers.

    Parameters
    ----------
    data : dask.dataframe.DataFrame or DaskSource
        The table to release (a source, e.g. :meth:`DaskSource.from_parquet`, possibly
        wrapped in a schema check).
    k, epsilon, bounds, integer, taxonomies, columns, sensitivity, seed
        As for :func:`dpfast.engines.outofcore.ir_dp_dataset`.
    memory_limit : int
        Bytes of the client's working memory for the passes (shared by its column threads),
        and of each sort task's on the workers: a column of at most ``memory_limit / 32``
        values is sorted whole by one task, a larger one in ranges of at most that. An
        output task computes at most a quarter of it in released values (at least
        :data:`~dpfast.engines.spark._release.PART_BYTES`).
    n_threads : int, optional
        Columns whose passes run at once (default: one per core of the client).
    batch_rows : int
        Rows per batch given to a worker's function.
    part_rows : int, optional
        Output rows computed by one task (default:
        :func:`dpfast.engines.spark._release.output_part_rows`).
    progress : callable, optional
        ``progress(phase, done, total)``, called as the passes progress.

    Returns
    -------
    data : dask.dataframe.DataFrame
        The release, computed on the workers whenever it is used.
    report, private : Report, PrivateReport
        As the in-memory release's.
    """
    start = time.perf_counter()
    source = dask_source(data)
    ordered, report, private = released_columns(
        source, k, epsilon, bounds, integer, taxonomies, columns, sensitivity, seed,
        memory_limit, n_threads, batch_rows, progress,
    )  # fmt: skip
    if part_rows is None:
        tasks = dask_of(source).sort_tasks
        part_rows = output_part_rows(source.n_rows, len(ordered), tasks, int(memory_limit))
    frame = _ir_dp_frame(ordered, source.n_rows, int(k), int(part_rows))
    private.timings["total"] = time.perf_counter() - start
    return frame, report, private


def _ir_dp_part(parts: GeneratedParts, part: int) -> pd.DataFrame:
    """Return output part ``part`` of every released column, on a worker."""
    lo, hi = parts.span(part)
    data = {}
    for column, array in zip(parts.columns, parts.table(part).columns, strict=True):
        values = array.to_pylist() if column.kind == "labels" else array.to_numpy()
        data[column.name] = pd.Series(values, dtype=_dtype(column.kind), copy=False)
    frame = pd.DataFrame(data)
    frame.index = pd.RangeIndex(lo, hi)
    return frame


def _ir_dp_frame(columns: Sequence[_Generated], n: int, k: int, part_rows: int) -> Any:
    """Return the lazy frame of the released columns: task ``p`` computes part ``p``.

    The state (every column's group values, ``8 * n / k`` bytes each) is one node of the
    graph, sent once to each worker that computes a part, not once per task. The frame
    carries its :class:`GeneratedParts`, so that :func:`write_release` has each part
    written by the task that computes it, in Arrow, instead of through pandas.
    """
    import dask
    import dask.dataframe as dd
    from dask.delayed import delayed

    parts = GeneratedParts(tuple(columns), n, k, part_rows)
    name = f"dpfast-ir-dp-state-{uuid.uuid4().hex}"  # not hashed: a fresh name per release
    state = delayed(parts, name=name, traverse=False)
    compute = delayed(_ir_dp_part, pure=False)
    meta = pd.DataFrame({c.name: pd.Series([], dtype=_dtype(c.kind)) for c in columns})
    # labels keep the in-memory release's dtype (Dask would make them string[pyarrow])
    with dask.config.set({"dataframe.convert-string": False}):
        frame = dd.from_delayed(
            [compute(state, p) for p in range(parts.count)], meta=meta, verify_meta=False
        )
    setattr(frame, PARTS_ATTRIBUTE, parts)  # a transformed frame does not carry it
    return frame


def laplace_dp_dask(
    data: Any,
    *,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]],
    integer: Mapping[Hashable, bool] | None = None,
    columns: Sequence[Hashable] | None = None,
    seed: int | None = None,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
) -> tuple[Any, Report, PrivateReport]:
    """Release a Dask DataFrame with ``laplace_dp``; the data is a lazy frame of the workers.

    The release of :func:`dpfast.laplace_dp` with ``unprotected="drop"`` for the table in
    the source's row order (:class:`DaskSource`: the frame's own order, or the files' for
    :meth:`DaskSource.from_parquet`): row ``i``'s cell of a column gets the draw of nonce
    ``i`` of the column's key. One pass per column checks the values and counts what the
    private report counts; the frame recomputes the same cells when it is used.

    Parameters
    ----------
    data : dask.dataframe.DataFrame or DaskSource
        The table to release.
    epsilon, bounds, integer, columns, seed
        As for :func:`dpfast.engines.outofcore.laplace_dp_dataset`.
    batch_rows : int
        Rows per batch given to a worker's function.
    progress : callable, optional
        ``progress(phase, done, total)``, called after each column's pass.

    Returns
    -------
    data : dask.dataframe.DataFrame
        The release, in row order, one partition per input partition.
    report, private : Report, PrivateReport
        As the in-memory release's.
    """
    start = time.perf_counter()
    source = dask_source(data)
    released, report, private = noised_columns(
        source, epsilon, bounds, integer, columns, seed, batch_rows, progress
    )
    frame = _laplace_frame(dask_of(source), tuple(released), int(batch_rows))
    private.timings["total"] = time.perf_counter() - start
    return frame, report, private


def _laplace_frame(source: DaskSource, cells: tuple[_Cells, ...], batch_rows: int) -> Any:
    """Return the lazy frame of the noised cells, one task per input partition."""
    import dask.dataframe as dd
    from dask.delayed import delayed

    names = [c.name for c in cells]
    kinds = [source.schema.field(name).type for name in names]
    noised, fn = delayed(_noised_part, pure=False), _NoisedBatch(cells)
    parts = [
        noised(part, first, rows, names, kinds, fn, batch_rows)
        for part, first, rows in source.parts(names)
    ]
    meta = pd.DataFrame(
        {c.name: pd.Series([], dtype="int64" if c.column.integer else "float64") for c in cells}
    )
    return dd.from_delayed(parts, meta=meta, verify_meta=False)


def _noised_part(
    part: Any,
    first: int,
    rows: int,
    names: list[str],
    kinds: list[Any],
    fn: _NoisedBatch,
    batch_rows: int,
) -> pd.DataFrame:
    """Noise one partition's cells, a batch at a time, on a worker."""
    import pyarrow as pa

    arrays = [arrow_column(part, n, kind, rows) for n, kind in zip(names, kinds, strict=True)]
    batch = pa.RecordBatch.from_arrays(arrays, names=names)
    out = [fn(batch.slice(lo, batch_rows), first + lo) for lo in range(0, rows, batch_rows)]
    if not out:
        out = [fn(batch, first)]
    table = pa.Table.from_batches(out)
    frame = table.to_pandas()
    frame.index = pd.RangeIndex(first, first + rows)
    return frame
