"""The :class:`Schema`: a table's declared columns, read from JSON and checked against data."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dpfast._validation import check_unique_names, did_you_mean, quoted
from dpfast.exceptions import DPFastKeyError, DPFastValueError
from dpfast.schema._dp_bounds import DPBounds
from dpfast.schema._parse import _VERSION, ColumnSpec, parse_schema, read_schema_json


class Schema:
    """Declared columns of a table, in declaration order.

    Build one with :meth:`from_json` or :meth:`from_dict`.

    Parameters
    ----------
    columns : iterable of ColumnSpec
        The declared columns; names must be unique.
    source : str, optional
        Where the schema came from (a file path), used in error messages.
    description : str, optional
        Free text.

    Examples
    --------
    >>> schema = Schema.from_dict({"columns": {
    ...     "age": {"type": "integer", "bounds": [17, 90]},
    ...     "income": {"type": "float", "bounds": [0, 1e6]},
    ...     "id": {"type": "string", "protect": False}}})
    >>> schema.protected_numeric()
    ['age', 'income']
    >>> schema.bounds()
    {'age': (17, 90), 'income': (0.0, 1000000.0)}
    >>> schema["id"].protect
    False
    """

    def __init__(
        self,
        columns: Any,
        *,
        source: str | None = None,
        description: str | None = None,
    ) -> None:
        specs = tuple(columns)
        by_name: dict[str, ColumnSpec] = {}
        for spec in specs:
            if spec.name in by_name:
                raise DPFastValueError(
                    f"{source or 'schema'}: column {quoted(spec.name)} is declared twice; "
                    "declare each column once"
                )
            by_name[spec.name] = spec
        self._columns = by_name
        self.source = source
        self.description = description

    # -- construction ------------------------------------------------------------------

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> Schema:
        """Read a schema file.

        Relative ``taxonomy`` paths are resolved against the file's directory.

        Raises
        ------
        ValueError
            If the file is missing or unreadable, is not valid JSON (the message gives
            the line and column), or does not describe a valid schema.
        """
        data = read_schema_json(path)
        return cls.from_dict(data, base_dir=Path(path).parent, source=os.fspath(path))

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        base_dir: str | os.PathLike[str] | None = None,
        *,
        source: str | None = None,
    ) -> Schema:
        """Build a schema from its parsed JSON form.

        Parameters
        ----------
        data : mapping
            The JSON object, e.g. ``{"columns": {"age": {"type": "integer",
            "bounds": [17, 90]}}}``.
        base_dir : path, optional
            Directory against which relative ``taxonomy`` paths are resolved; the
            current directory when omitted.
        source : str, optional
            Name used in error messages (the file's path).

        Raises
        ------
        ValueError
            If anything in ``data`` is not a valid schema.
        """
        specs, description = parse_schema(data, base_dir, source)
        return cls(specs, source=source, description=description)

    # -- queries -----------------------------------------------------------------------

    def __getitem__(self, name: str) -> ColumnSpec:
        try:
            return self._columns[name]
        except KeyError:
            raise DPFastKeyError(f"the schema declares no column {quoted(name)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._columns

    def __iter__(self) -> Iterator[ColumnSpec]:
        return iter(self._columns.values())

    def __len__(self) -> int:
        return len(self._columns)

    def __repr__(self) -> str:
        return f"Schema({list(self._columns.values())!r})"

    @property
    def names(self) -> list[str]:
        """All declared column names, in declaration order."""
        return list(self._columns)

    def protected_numeric(self) -> list[str]:
        """Names of the protected integer and float columns, in declaration order."""
        return [c.name for c in self if c.protect and c.is_numeric]

    def protected_categorical(self) -> list[str]:
        """Names of the protected categorical columns, in declaration order."""
        return [c.name for c in self if c.protect and c.type == "categorical"]

    def unprotected(self) -> list[str]:
        """Names of the declared columns marked ``"protect": false``."""
        return [c.name for c in self if not c.protect]

    def from_data(self, columns: Iterable[str]) -> dict[str, list[str]]:
        """Return, for those of ``columns`` that have any, the fields taken from the data."""
        wanted = set(columns)
        return {c.name: list(c.from_data) for c in self if c.name in wanted and c.from_data}

    def bounds(self) -> dict[str, tuple[float, float]]:
        """Public bounds of the protected numeric columns, ``{name: (lower, upper)}``."""
        out: dict[str, tuple[float, float]] = {}
        for spec in self:
            if spec.protect and spec.is_numeric and spec.bounds is not None:
                out[spec.name] = spec.bounds
        return out

    def dp_bounds(self) -> dict[str, DPBounds]:
        """Clamping bounds chosen with DP, ``{name: DPBounds}``, of the columns that declare them.

        Each lies within the column's :meth:`bounds` (its public outer range); a release
        takes them in place of those bounds (``bounds={**schema.bounds(),
        **schema.dp_bounds()}``).
        """
        return {spec.name: spec.dp_bounds for spec in self if spec.dp_bounds is not None}

    def transforms(self) -> dict[str, str]:
        """Return the protected numeric columns' public transforms, ``{name: "log" | "asinh"}``."""
        return {c.name: c.transform for c in self if c.transform is not None}

    def epsilon_weights(self, columns: Iterable[str]) -> dict[str, float] | None:
        """Return the weights of ``columns`` in the split of ε, or ``None`` when none has one.

        A column without an ``"epsilon_weight"`` weighs 1 when another one has one.

        Examples
        --------
        >>> schema = Schema.from_dict({"columns": {
        ...     "age": {"type": "integer", "bounds": [17, 90]},
        ...     "income": {"type": "float", "bounds": [0, 1e6], "transform": "log",
        ...                "epsilon_weight": 3}}})
        >>> schema.epsilon_weights(["age", "income"]), schema.transforms()
        ({'age': 1.0, 'income': 3.0}, {'income': 'log'})
        """
        chosen = list(columns)
        if all(self[c].epsilon_weight is None for c in chosen):
            return None
        return {c: self[c].epsilon_weight or 1.0 for c in chosen}

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (taxonomy paths as absolute strings)."""
        columns: dict[str, Any] = {}
        for spec in self:
            entry: dict[str, Any] = {"type": spec.type}
            if spec.bounds is not None:
                entry["bounds"] = list(spec.bounds)
            entry["protect"] = spec.protect
            if isinstance(spec.taxonomy, Path):
                entry["taxonomy"] = str(spec.taxonomy)
            elif spec.taxonomy is not None:
                entry["taxonomy"] = spec.taxonomy
            if spec.dp_bounds is not None:
                entry["dp_bounds"] = spec.dp_bounds.to_dict()
            if spec.from_data:
                entry["from_data"] = list(spec.from_data)
            if spec.transform is not None:
                entry["transform"] = spec.transform
            if spec.epsilon_weight is not None:
                entry["epsilon_weight"] = spec.epsilon_weight
            if spec.description is not None:
                entry["description"] = spec.description
            columns[spec.name] = entry
        out: dict[str, Any] = {"version": _VERSION}
        if self.description is not None:
            out["description"] = self.description
        out["columns"] = columns
        return out

    # -- checking data -----------------------------------------------------------------

    def check_table(self, table: Any) -> Any:
        """Check that a table matches the schema, and return it ready for release.

        Checks that every declared column exists, that numeric columns hold numbers and
        that protected numeric columns have no missing values, then casts every numeric
        column to its declared type: ``"float"`` to float64 and ``"integer"`` to int64.
        The declared type alone decides what a release does with a column (integer
        columns are rounded, float columns are not), never the values: a ``"float"``
        column whose values are all whole numbers is still float64. A cast is always
        exact: integers that float64 cannot hold exactly, and values of an
        ``"integer"`` column that are fractional, infinite, NaN or outside int64, are
        refused.

        Parameters
        ----------
        table : pyarrow.Table
            The input table (as returned by :func:`dpfast.io.read_table`).

        Returns
        -------
        pyarrow.Table
            ``table`` when every numeric column already has its declared type, else a
            copy with those columns cast.

        Raises
        ------
        ValueError
            On the first mismatch, naming the column and how to fix it.
        """
        return check_table(self, table)

    def cast_column(self, column: Any, name: str, first_row: int = 0) -> Any:
        """Return a numeric column (Arrow) cast exactly to its declared type.

        ``column`` holds rows ``first_row ...`` of the table (errors name them); see
        :meth:`check_table` for what a cast refuses.
        """
        return _cast_declared(column, name, self[name].type, self.source or "the schema", first_row)


def check_table(schema: Schema, table: Any) -> Any:
    """Check ``table`` against ``schema``; see :meth:`Schema.check_table`."""
    where = schema.source or "the schema"
    present = list(table.column_names)
    check_unique_names(present, "the input", "rename the repeats where the input is written")
    missing = [name for name in schema.names if name not in present]
    if missing:
        hint = did_you_mean(missing[0], present)
        raise DPFastValueError(
            f"{where} declares column(s) {quoted(missing, listed=True)} that the input does "
            f"not have; {hint}fix the names in the schema or remove those entries (the input "
            f"has {len(present)} columns: {quoted(present, listed=True)})"
        )
    for spec in schema:
        if not spec.is_numeric:
            continue
        column = table.column(spec.name)
        kind = _arrow_kind(column.type)
        if kind not in ("i", "u", "f"):
            raise DPFastValueError(
                f"column {quoted(spec.name)} is declared {spec.type} in {where} but holds "
                f"{column.type} values; convert it to numbers, or declare it "
                '"categorical" or "string"'
            )
        if spec.protect and column.null_count:
            first = _first_null(column)
            raise DPFastValueError(
                f"protected column {quoted(spec.name)} has {column.null_count} missing "
                f"value(s) (first at row {first}); drop or impute those rows, or set "
                '"protect": false for the column'
            )
        cast = _cast_declared(column, spec.name, spec.type, where)
        if cast is not column:
            table = table.set_column(present.index(spec.name), spec.name, cast)
    return table


# float64 holds every integer of magnitude up to 2**53 exactly, and larger ones only when
# they are multiples of a power of two.
_FLOAT64_EXACT = 2**53
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _cast_declared(column: Any, name: str, declared: str, where: str, first_row: int = 0) -> Any:
    """Return ``column`` cast exactly to its declared type (``column`` itself if it has it).

    Missing values stay missing. Raises ``ValueError`` naming the first value that the
    declared type cannot hold exactly, and its row (``column`` starting at ``first_row``).
    ``column`` is a chunked or a plain Arrow array.
    """
    target = np.dtype(np.float64) if declared == "float" else np.dtype(np.int64)
    dtype = np.dtype(column.type.to_pandas_dtype())
    if dtype == target:
        return column
    if declared == "float":
        if dtype.kind in "iu":
            _check_exact_floats(column, name, where, first_row)
    elif dtype.kind == "f":
        _check_whole(column, name, where, first_row)
    elif dtype == np.uint64:
        _check_int64_range(column, name, where, first_row)
    return column.cast(target.name, safe=False)


def _present_values(column: Any, first_row: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Return the non-missing values of a (chunked) column as NumPy, and their row numbers."""
    values = []
    rows = []
    offset = first_row
    for chunk in column.chunks if hasattr(column, "chunks") else [column]:
        valid = np.asarray(chunk.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        present = chunk.drop_null().to_numpy(zero_copy_only=False)
        values.append(np.asarray(present))
        rows.append(offset + np.flatnonzero(valid))
        offset += len(chunk)
    if not values:
        return np.empty(0), np.empty(0, dtype=np.int64)
    return np.concatenate(values), np.concatenate(rows)


def _check_exact_floats(column: Any, name: str, where: str, first_row: int = 0) -> None:
    values, rows = _present_values(column, first_row)
    large = np.flatnonzero((values > _FLOAT64_EXACT) | (values < -_FLOAT64_EXACT))
    for i in large:  # rare: check each one in exact Python integers
        value = int(values[i])
        if int(float(value)) != value:
            raise DPFastValueError(
                f"column {quoted(name)} is declared float in {where} but holds the integer "
                f"{value} at row {int(rows[i])}, which float64 cannot hold exactly; "
                'declare it "integer", or round the data to a value float64 holds'
            )


def _check_whole(column: Any, name: str, where: str, first_row: int = 0) -> None:
    values, rows = _present_values(column, first_row)
    values = values.astype(np.float64)
    finite = np.isfinite(values)
    fractional = finite & (values != np.floor(values))
    outside = finite & ((values < _INT64_MIN) | (values >= 2.0**63))
    bad = ~finite | fractional | outside
    if bad.any():
        i = int(np.argmax(bad))
        reason = ", outside the int64 range" if outside[i] else ""
        raise DPFastValueError(
            f"column {quoted(name)} is declared integer in {where} but holds "
            f"{quoted(float(values[i]))} "
            f'at row {int(rows[i])}{reason}; declare it "float" or fix the data'
        )


def _check_int64_range(column: Any, name: str, where: str, first_row: int = 0) -> None:
    values, rows = _present_values(column, first_row)
    over = values > np.uint64(_INT64_MAX)
    if over.any():
        i = int(np.argmax(over))
        raise DPFastValueError(
            f"column {quoted(name)} is declared integer in {where} but holds {int(values[i])} at "
            f"row {int(rows[i])}, outside the int64 range; rescale the column or declare "
            'it "float"'
        )


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
