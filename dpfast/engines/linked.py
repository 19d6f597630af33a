"""Record-linked ``ir_dp`` and unprotected columns out of core (docs/engines.md#linked).

:func:`ir_dp_dataset` gives the release of :func:`dpfast.ir_dp` with any ``linkage``,
``shuffle`` and ``unprotected`` policy (the column engine's own
:func:`dpfast.engines.outofcore.ir_dp_dataset` sends those here); the unprotected
columns of ``laplace_dp`` come through :func:`unprotected_scratch`.

Record-linked numeric column:

1. **Ranks.** Rows are ranked by (grid value, input row), as
   :func:`dpfast.methods.ir_dp._numeric.release_linked` does in memory
   (:class:`~.ranks.RankPasses`): the grid is cut into ranges that fit the memory limit
   by histograms of the grid values' top bits; each range's ``(grid value, row)`` words
   are collected, sorted, added to the group sums, and its rows are written to a scratch
   file in rank order. A range of one grid value too long to sort (a long tie) is ranked
   by row: one pass counts its rows per batch, a second writes them at their ranks.
2. **Group values.** The noisy value of each rank group, from the same key as in memory.
3. **Placement.** The rank-ordered file is read back in parts; each row's released value
   (its rank group's) goes, with its row id, through a :class:`~.placement.Placer` into
   input order and then, when rows are shuffled, through a second one into the order of
   the row permutation ``("ir_dp", "row-order")``.

A record-linked categorical column needs no sort: a pass counts each batch's values per
taxonomy rank, which gives every batch's first rank per value; a second pass gives each
row its rank, hence its group's value, and places it. Unprotected columns are placed as
they are read: in input order, in the rows' permutation (``"keep"``), or in a
permutation of their own (``"shuffle"``, key ``(method, "unprotected-order")``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable
from pathlib import Path

import numpy as np
import pyarrow as pa

from dpfast import noise
from dpfast.engines.outofcore._legacy import (
    DatasetRun,
    ScratchColumn,
    _Limits,
    _scratch_name,
)
from dpfast.engines.outofcore._placement import ArrowFile, Placer, raw_sink
from dpfast.engines.outofcore._sources import ColumnSource


def _tag(name: Hashable, kind: str) -> str:
    """Return a scratch name for one column's files of ``kind``, safe whatever the name."""
    return f"{kind}-{hashlib.sha256(str(name).encode('utf-8')).hexdigest()[:32]}"


#: Bytes of working memory per row of a part scattered to a placer's ranges: the rows,
#: their values and groups, the ranges, their order, and the pieces cut from them.
_BYTES_PER_SCATTERED_ROW = 96


def _place_numeric(
    scratch: Path, name: Hashable, key: np.ndarray | None, n: int, limits: _Limits
) -> tuple[Placer, Callable[[], None], Callable[[], None]]:
    """Return a placer of by-row float64 values into the column's scratch file.

    With ``key`` the values go through input order into the permutation's order. Returns
    the placer, what writes the placed values once every piece is added, and what closes
    the files however the work ends.
    """
    write, close_sink = raw_sink(scratch / _scratch_name(name), np.dtype(np.float64))
    by_row = Placer(scratch, _tag(name, "by-row"), n, None, pa.float64(), 8, limits.memory)
    shuffled = None
    if key is not None:
        shuffled = Placer(scratch, _tag(name, "shuffled"), n, key, pa.float64(), 8, limits.memory)

    def finish() -> None:
        if shuffled is None:
            by_row.finish(write)
        else:
            by_row.finish(lambda values, first: shuffled.add(values, first=first))
            shuffled.finish(write)

    def close() -> None:
        by_row.close()
        if shuffled is not None:
            shuffled.close()
        close_sink()

    return by_row, finish, close


def place_ranked(
    scratch: Path,
    name: Hashable,
    ranked: Path,
    group_values: np.ndarray,
    k: int,
    key: np.ndarray | None,
    n: int,
    limits: _Limits,
) -> None:
    """Give every row its rank group's value, in output order, in the column's scratch file.

    ``ranked`` holds the rows in rank order (:class:`~.ranks.RankPasses`); it is read
    back in parts and removed. ``key`` as for :func:`_place_numeric`.
    """
    placer, finish, close = _place_numeric(scratch, name, key, n, limits)
    step = max(1024, limits.memory // _BYTES_PER_SCATTERED_ROW)
    last = group_values.shape[0] - 1
    try:
        for first in range(0, n, step):
            count = min(step, n - first)
            rows = np.fromfile(ranked, np.int64, count, offset=first * 8)
            groups = np.minimum(np.arange(first, first + count, dtype=np.int64) // k, last)
            placer.add(pa.array(group_values[groups]), rows=rows)
            del rows, groups
        ranked.unlink()
        finish()
    finally:
        close()


def unprotected_scratch(
    dataset: ColumnSource,
    scratch: Path,
    run: DatasetRun,
    source: noise.NoiseSource | None,
    keep_key: np.ndarray | None,
    limits: _Limits,
) -> dict[str, ScratchColumn]:
    """Place the columns the release does not protect as ``run.policy`` says, in scratch.

    ``"drop"``: none. ``"shuffle"``: in the permutation of the key ``(method,
    "unprotected-order")``, as :meth:`dpfast._release.Run.assemble` draws it. ``"keep"``:
    in the rows' order, the permutation of ``keep_key`` (``None``: the input order).
    Returns the scratch columns by name, of the dataset's own Arrow types.
    """
    names = run.unprotected()
    if run.policy == "drop" or not names:
        return {}
    if run.policy == "shuffle":
        if source is None:
            raise AssertionError("a shuffle of the unprotected columns needs a source")
        key: np.ndarray | None = source.key(run.method, "unprotected-order")
    else:
        key = keep_key
    made = {}
    with run.phase("unprotected"):
        for i, name in enumerate(names):
            run.tick("unprotected columns", i, len(names))
            made[name] = _copied_column(dataset, scratch, name, key, limits)
    return made


def _copied_column(
    dataset: ColumnSource, scratch: Path, name: str, key: np.ndarray | None, limits: _Limits
) -> ScratchColumn:
    """Place one column unchanged, of any Arrow type, into an Arrow file in output order.

    The column keeps the type of its batches (a source that casts a declared type, as
    the CLI's schema does, gives the cast type); a dictionary column stays one.
    """
    declared = dataset.schema.field(name).type
    dictionary = pa.types.is_dictionary(declared)
    try:
        row_bytes = float(max(1, (declared.value_type if dictionary else declared).bit_width // 8))
    except ValueError:  # variable width: the column's average, from one pass
        sizes = dataset.map_column(name, limits.batch_rows, lambda a, _f: a.nbytes)
        row_bytes = sum(sizes) / max(1, dataset.n_rows)

    def plain(array: pa.Array, first_row: int) -> tuple[int, pa.Array]:
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        return first_row, array

    out: ArrowFile | None = None
    placer: Placer | None = None
    try:
        for first_row, array in dataset.map_column(name, limits.batch_rows, plain):
            if out is None or placer is None:  # the batches' type (a source may cast it)
                out = ArrowFile(scratch / (_tag(name, "copied") + ".arrow"), array.type)
                placer = Placer(
                    scratch,
                    _tag(name, "copy"),
                    dataset.n_rows,
                    key,
                    array.type,
                    row_bytes,
                    limits.memory,
                )
            placer.add(
                array.cast(out.arrow_type) if array.type != out.arrow_type else array,
                first=first_row,
            )
        assert placer is not None and out is not None  # a dataset has rows
        placer.finish(out.write)
    finally:
        if placer is not None:
            placer.close()
        if out is not None:
            out.close()
    value_type = out.arrow_type
    arrow_type = pa.dictionary(declared.index_type, value_type) if dictionary else value_type

    def read(first: int, count: int) -> pa.Array:
        values = out.read(first, count)
        return values.dictionary_encode().cast(arrow_type) if dictionary else values

    return ScratchColumn(name, arrow_type, read)
