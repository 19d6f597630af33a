"""The Dask engine's settings, and a release file read back as a Dask DataFrame.

A release the workers cannot compute from small state is written by the client as one
Parquet file in :func:`scratch_directory`, published by rename, and read back by the
workers (:func:`read_in_order`). Dask settings (``dask.config``, e.g.
``dask.config.set({"dpfast.scratch-dir": "/shared/tmp"})`` or ``DASK_DPFAST__SCRATCH_DIR``):

* ``dpfast.scratch-dir``: where each process makes its ``dpfast-dask-*`` directory of
  release files (default: the client's temporary directory), removed when the interpreter
  exits (write a release elsewhere to keep it). The client writes, the workers read: on
  other machines, they must see it at the same path (a shared file system).
* ``dpfast.memory-limit`` (default ``1GiB``): the client's working memory for the passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from dpfast.engines.dask._source import DaskSource, Piece
from dpfast.engines.scratch_dirs import process_scratch

__all__ = [
    "MEMORY_KEY",
    "SCRATCH_KEY",
    "categories",
    "kept_dtypes",
    "memory_limit",
    "read_in_order",
]

#: The Dask setting naming the directory of release files (shared with the workers).
SCRATCH_KEY = "dpfast.scratch-dir"
#: The Dask setting of the client's working memory for the passes (e.g. ``2GiB``).
MEMORY_KEY = "dpfast.memory-limit"
_DEFAULT_MEMORY = "1GiB"


def scratch_directory() -> Path:
    """Return this process's directory of release files, made once and removed at exit."""
    import dask

    return process_scratch(str(dask.config.get(SCRATCH_KEY, None) or ""), "dpfast-dask-")


def memory_limit() -> int:
    """Return the client's working memory for the passes (``dpfast.memory-limit``)."""
    import dask

    from dpfast.engines import parse_memory

    return parse_memory(str(dask.config.get(MEMORY_KEY, None) or _DEFAULT_MEMORY))


def kept_dtypes() -> Any:
    """Return a context in which Dask keeps the in-memory release's dtypes (not string[pyarrow])."""
    import dask

    return dask.config.set({"dataframe.convert-string": False})


def categories(source: DaskSource) -> dict[str, Any]:
    """Return the frame's categorical dtypes of known categories, by column name.

    They give a copied column back the frame's category order (the file's has its own).
    """
    import pandas as pd
    from dask.dataframe.utils import has_known_categories

    meta = source.frame._meta
    return {
        str(name): meta[name].dtype
        for name in meta.columns
        if isinstance(meta[name].dtype, pd.CategoricalDtype)
        and has_known_categories(meta[name])
        and len(meta[name].dtype.categories)  # none: unknown (DaskSource.from_parquet's)
    }


def read_in_order(path: str | Path, dtypes: Mapping[str, Any] | None = None) -> Any:
    """Return a Parquet file as a lazy Dask DataFrame, its rows in the file's order.

    A directory (``part-NNNNN.parquet`` files) is its files in name order. One partition per
    row group, read by the workers, indexed by row number (divisions known); columns have
    ``pyarrow``'s ``to_pandas`` types (the in-memory release's), or ``dtypes[name]``.
    """
    import dask.dataframe as dd

    where = Path(path).absolute()
    files = sorted(where.glob("*.parquet")) if where.is_dir() else [where]
    pieces, first = [], 0
    for file in files:
        metadata = pq.read_metadata(str(file))
        for group in range(metadata.num_row_groups):
            rows = metadata.row_group(group).num_rows
            pieces.append(Piece(str(file), group, first, rows))
            first += rows
    meta = metadata.schema.to_arrow_schema().remove_metadata().empty_table().to_pandas()
    cast = {name: dtype for name, dtype in (dtypes or {}).items() if name in meta.columns}
    meta = _with_dtypes(meta, cast)
    divisions = (*(p.first_row for p in pieces), max(0, first - 1))
    with kept_dtypes():
        return dd.from_map(
            _numbered_part,
            pieces,
            args=[cast],
            meta=meta,
            divisions=divisions,
            enforce_metadata=False,
            label="dpfast-release",
        )


def _numbered_part(piece: Piece, dtypes: dict[str, Any]) -> Any:
    """Read one row group as pandas, indexed by its rows' numbers in the file."""
    import pandas as pd

    frame = _with_dtypes(piece.pandas(), dtypes)
    frame.index = pd.RangeIndex(piece.first_row, piece.first_row + piece.rows)
    return frame


def _with_dtypes(frame: Any, dtypes: Mapping[str, Any]) -> Any:
    """Return ``frame`` with the columns ``dtypes`` names cast to those dtypes.

    A categorical column gets the dtype's category order (``astype`` would keep its own:
    unordered categorical dtypes of the same categories compare equal).
    """
    import pandas as pd

    for name, dtype in dtypes.items():
        column = frame[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            frame[name] = column.cat.set_categories(dtype.categories, ordered=dtype.ordered)
        else:
            frame[name] = column.astype(dtype)
    return frame
