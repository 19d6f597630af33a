"""The Dask engine's settings, and a release file read back as a Dask DataFrame.

A release the workers cannot compute from small state is written by the client, from
passes run on the workers, as one Parquet file into the Dask scratch directory
(:func:`scratch_directory`), published there by rename; its data is that file read back
by the workers (:func:`read_in_order`), one partition per row group, in the file's row
order, so it is the in-memory release, rows in the same order.

Two Dask settings (``dask.config``, e.g. ``dask.config.set({"dpfast.scratch-dir":
"/shared/tmp"})`` or ``DASK_DPFAST__SCRATCH_DIR``) configure it:

* ``dpfast.scratch-dir``: the directory of release files (a ``dpfast-dask-*`` directory
  is made in it per process), by default a new directory of the client's temporary
  directory; either is removed when the interpreter exits, so a release frame is
  readable until then (write it elsewhere to keep it). The client writes the file and the
  workers read it: on a cluster whose workers run on other machines, set it to a
  directory they see at the same path (a shared file system), or the frame cannot be read.
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


def categories(source: DaskSource) -> dict[str, Any]:
    """Return the frame's categorical dtypes of known categories, by column name.

    A copied column keeps its values, and these dtypes give it back its categories in
    the frame's order (the file's dictionaries hold them in an order of their own).
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

    A directory (a release written as ``part-NNNNN.parquet`` files) is its files in name
    order. One partition per row group, read by the workers; the index is the row number in
    the file (divisions known), and the columns have the types of ``pyarrow``'s
    ``to_pandas`` (those of the in-memory release), or ``dtypes[name]`` for a column
    named there (a categorical column's own categories).
    """
    import dask
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
    # text keeps the in-memory release's dtype (Dask would make it string[pyarrow])
    with dask.config.set({"dataframe.convert-string": False}):
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
    """Return ``frame`` with its columns ``dtypes`` names of those dtypes.

    A categorical column gets the categories in the dtype's order (``astype`` keeps its
    own order: unordered categorical dtypes of the same categories compare equal).
    """
    import pandas as pd

    for name, dtype in dtypes.items():
        column = frame[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            frame[name] = column.cat.set_categories(dtype.categories, ordered=dtype.ordered)
        else:
            frame[name] = column.astype(dtype)
    return frame
