"""Checking a table against a schema: declared columns present, numeric, whole, complete."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from dpfast.schema._schema import Schema


def check_table(schema: Schema, table: Any) -> Any:
    """Check ``table`` against ``schema``; see :meth:`Schema.check_table`."""
    where = schema.source or "the schema"
    present = list(table.column_names)
    missing = [name for name in schema.names if name not in present]
    if missing:
        shown = ", ".join(repr(m) for m in missing[:5])
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        close = difflib.get_close_matches(missing[0], present, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(
            f"{where} declares column(s) {shown}{more} that the input does not have; "
            f"{hint}fix the names in the schema or remove those entries "
            f"(the input has {len(present)} columns: {', '.join(present[:8])}"
            f"{', ...' if len(present) > 8 else ''})"
        )
    for spec in schema:
        if not spec.is_numeric:
            continue
        column = table.column(spec.name)
        kind = _arrow_kind(column.type)
        if kind not in ("i", "u", "f"):
            raise ValueError(
                f"column {spec.name!r} is declared {spec.type} in {where} but holds "
                f"{column.type} values; convert it to numbers, or declare it "
                '"categorical" or "string"'
            )
        if spec.protect and column.null_count:
            first = _first_null(column)
            raise ValueError(
                f"protected column {spec.name!r} has {column.null_count} missing "
                f"value(s) (first at row {first}); drop or impute those rows, or set "
                '"protect": false for the column'
            )
        if spec.type == "integer" and kind == "f":
            values = column.to_numpy()
            fractional = np.isfinite(values) & (values != np.floor(values))
            if fractional.any():
                row = int(np.argmax(fractional))
                raise ValueError(
                    f"column {spec.name!r} is declared integer in {where} but holds "
                    f'{float(values[row])!r} at row {row}; declare it "float" or fix the data'
                )
            if not np.isnan(values).any():
                index = present.index(spec.name)
                table = table.set_column(index, spec.name, column.cast("int64"))
    return table


def _arrow_kind(arrow_type: Any) -> str:
    """NumPy kind character of an Arrow type ("i", "u", "f", "b", "O", ...)."""
    try:
        return str(np.dtype(arrow_type.to_pandas_dtype()).kind)
    except (NotImplementedError, TypeError):
        return "O"


def _first_null(column: Any) -> int:
    offset = 0
    for chunk in column.chunks:
        if chunk.null_count:
            mask = np.asarray(chunk.is_null().to_numpy(zero_copy_only=False))
            return offset + int(np.argmax(mask))
        offset += len(chunk)
    return -1
