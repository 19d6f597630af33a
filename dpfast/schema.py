"""Schema files: each column's type, public domain and whether it is protected.

A schema is a JSON object (format reference: ``docs/schema.md``)::

    {
      "version": 1,
      "columns": {
        "age":        {"type": "integer", "bounds": [17, 90]},
        "occupation": {"type": "categorical", "protect": false},
        "id":         {"type": "string", "protect": false}
      }
    }

Bounds are *public* inputs (SPEC A1): they must come from a codebook or from knowledge
that does not depend on the data, never from the data's own minimum and maximum.

Every problem raises :class:`ValueError` with a one-line message that names the column,
what was expected, what was found and how to fix it. The CLI shows that line as is.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["COLUMN_TYPES", "ColumnSpec", "Schema"]

#: The column types a schema may declare.
COLUMN_TYPES: tuple[str, ...] = ("integer", "float", "categorical", "string")
_NUMERIC = ("integer", "float")
_TOP_KEYS = ("version", "description", "columns")
_COLUMN_KEYS = ("type", "bounds", "protect", "taxonomy", "description")
_VERSION = 1


def _hint(word: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


@dataclass(frozen=True)
class ColumnSpec:
    """What a schema says about one column.

    Attributes
    ----------
    name : str
        The column's name in the data.
    type : {"integer", "float", "categorical", "string"}
        The declared type.
    bounds : tuple of (lower, upper) or None
        The public domain of a numeric column (ints for integer columns).
    protect : bool
        Whether releases must protect the column. Columns that are not protected are
        copied to the output unchanged.
    taxonomy : pathlib.Path or None
        A categorical column's hierarchy file, resolved against the schema's directory.
    description : str or None
        Free text, e.g. where the bounds come from.
    """

    name: str
    type: str
    bounds: tuple[float, float] | None = None
    protect: bool = True
    taxonomy: Path | None = None
    description: str | None = None

    @property
    def is_numeric(self) -> bool:
        """Whether the column is declared ``integer`` or ``float``."""
        return self.type in _NUMERIC


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
                raise ValueError(
                    f"{source or 'schema'}: column {spec.name!r} is declared twice; "
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
        where = os.fspath(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValueError(f"schema file {where!r} does not exist; check the path") from None
        except IsADirectoryError:
            raise ValueError(
                f"schema path {where!r} is a directory; give the path of a .json file"
            ) from None
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"schema file {where!r} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
            ) from None
        except OSError as exc:
            raise ValueError(
                f"cannot read schema file {where!r}: {exc.strerror or exc}; check its permissions"
            ) from None
        try:
            data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"schema file {where!r} is not valid JSON: {exc.msg} at line {exc.lineno}, "
                f"column {exc.colno}; fix the JSON syntax there"
            ) from None
        except _DuplicateKeyError as exc:
            raise ValueError(
                f"schema file {where!r} repeats the key {exc.key!r}; "
                "declare each column and each setting once"
            ) from None
        return cls.from_dict(data, base_dir=Path(path).parent, source=where)

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
        where = source or "schema"
        if not isinstance(data, Mapping):
            raise ValueError(
                f'{where}: the top level must be a JSON object with a "columns" key, '
                f"got {_json_type(data)}; see docs/schema.md"
            )
        for key in data:
            if key not in _TOP_KEYS:
                raise ValueError(
                    f"{where}: unknown top-level key {key!r}; {_hint(key, _TOP_KEYS)}"
                    f"allowed keys are {', '.join(_TOP_KEYS)}"
                )
        version = data.get("version", _VERSION)
        if isinstance(version, bool) or version != _VERSION:
            raise ValueError(
                f"{where}: unsupported schema version {version!r}; this dpfast reads "
                f"version {_VERSION}"
            )
        description = _optional_text(data.get("description"), where, "description")
        if "columns" not in data:
            raise ValueError(
                f'{where}: missing "columns"; add an object mapping each column name to '
                'its settings, e.g. {"columns": {"age": {"type": "integer", '
                '"bounds": [17, 90]}}}'
            )
        columns = data["columns"]
        if not isinstance(columns, Mapping) or not columns:
            raise ValueError(
                f'{where}: "columns" must be a non-empty object mapping column names to '
                f"settings, got {_json_type(columns) if columns != {} else 'an empty object'}"
            )
        base = Path(base_dir) if base_dir is not None else Path.cwd()
        specs = [_column_spec(name, entry, base, where) for name, entry in columns.items()]
        return cls(specs, source=source, description=description)

    # -- queries -----------------------------------------------------------------------

    def __getitem__(self, name: str) -> ColumnSpec:
        try:
            return self._columns[name]
        except KeyError:
            raise KeyError(f"the schema declares no column {name!r}") from None

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

    def bounds(self) -> dict[str, tuple[float, float]]:
        """Public bounds of the protected numeric columns, ``{name: (lower, upper)}``."""
        out: dict[str, tuple[float, float]] = {}
        for spec in self:
            if spec.protect and spec.is_numeric and spec.bounds is not None:
                out[spec.name] = spec.bounds
        return out

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (taxonomy paths as absolute strings)."""
        columns: dict[str, Any] = {}
        for spec in self:
            entry: dict[str, Any] = {"type": spec.type}
            if spec.bounds is not None:
                entry["bounds"] = list(spec.bounds)
            entry["protect"] = spec.protect
            if spec.taxonomy is not None:
                entry["taxonomy"] = str(spec.taxonomy)
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

        Checks that every declared column exists, that numeric columns hold numbers,
        that integer columns hold whole numbers, and that protected numeric columns
        have no missing values. Float columns declared ``integer`` whose values are all
        whole numbers are returned cast to int64, so that releases round them.

        Parameters
        ----------
        table : pyarrow.Table
            The input table (as returned by :func:`dpfast.io.read_table`).

        Returns
        -------
        pyarrow.Table
            ``table``, or a copy with some float columns cast to int64.

        Raises
        ------
        ValueError
            On the first mismatch, naming the column and how to fix it.
        """
        where = self.source or "the schema"
        present = list(table.column_names)
        missing = [name for name in self._columns if name not in present]
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
        for spec in self:
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


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


def _optional_text(value: Any, where: str, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{where}: {what} must be a string, got {_json_type(value)}")


def _column_spec(name: str, entry: Any, base: Path, where: str) -> ColumnSpec:
    col = f"{where}: column {name!r}"
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: column names must be non-empty strings, got {name!r}")
    if not isinstance(entry, Mapping):
        raise ValueError(
            f'{col} must map to an object such as {{"type": "integer", '
            f'"bounds": [0, 100]}}, got {_json_type(entry)}'
        )
    for key in entry:
        if key not in _COLUMN_KEYS:
            raise ValueError(
                f"{col} has unknown key {key!r}; {_hint(key, _COLUMN_KEYS)}"
                f"allowed keys are {', '.join(_COLUMN_KEYS)}"
            )
    if "type" not in entry:
        raise ValueError(
            f'{col} has no "type"; add one of {", ".join(repr(t) for t in COLUMN_TYPES)}'
        )
    kind = entry["type"]
    if not isinstance(kind, str) or kind not in COLUMN_TYPES:
        shown = repr(kind) if isinstance(kind, str) else _json_type(kind)
        hint = _hint(kind, COLUMN_TYPES) if isinstance(kind, str) else ""
        raise ValueError(
            f"{col} has unknown type {shown}; {hint}use one of "
            f"{', '.join(repr(t) for t in COLUMN_TYPES)}"
        )
    numeric = kind in _NUMERIC

    protect = entry.get("protect", kind != "string")
    if not isinstance(protect, bool):
        raise ValueError(f'{col}: "protect" must be true or false, got {protect!r}')
    if kind == "string" and protect:
        raise ValueError(
            f"{col} is a string column, which no release method can protect; "
            'set "protect": false to copy it unchanged, declare it "categorical", '
            "or drop it from the input"
        )

    bounds = None
    if "bounds" in entry:
        if not numeric:
            raise ValueError(
                f'{col} is {kind}, but only integer and float columns take "bounds"; '
                "remove them or change the type"
            )
        bounds = _parse_bounds(entry["bounds"], kind, col)
    elif numeric and protect:
        raise ValueError(
            f'{col} is a protected {kind} column without bounds; add "bounds": '
            "[lower, upper] taken from public knowledge (never from the data), or set "
            '"protect": false to copy it unchanged'
        )

    taxonomy = None
    if "taxonomy" in entry:
        raw = entry["taxonomy"]
        if kind != "categorical":
            raise ValueError(
                f'{col} is {kind}, but only categorical columns take a "taxonomy"; '
                "remove it or declare the column categorical"
            )
        if not isinstance(raw, str) or not raw:
            raise ValueError(
                f'{col}: "taxonomy" must be the path of a hierarchy file, got {_json_type(raw)}'
            )
        taxonomy = Path(raw) if Path(raw).is_absolute() else base / raw
        if not taxonomy.is_file():
            raise ValueError(
                f"{col}: taxonomy file {str(taxonomy)!r} does not exist; relative paths are "
                "read from the schema file's directory"
            )

    description = _optional_text(entry.get("description"), col, '"description"')
    return ColumnSpec(name, kind, bounds, protect, taxonomy, description)


def _parse_bounds(raw: Any, kind: str, col: str) -> tuple[float, float]:
    if (
        not isinstance(raw, (list, tuple))
        or len(raw) != 2
        or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in raw)
    ):
        raise ValueError(
            f'{col}: "bounds" must be a list of two numbers [lower, upper], got '
            f"{json.dumps(raw) if _jsonable(raw) else repr(raw)}"
        )
    lower, upper = raw
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise ValueError(
            f"{col}: bounds must be finite, got [{lower}, {upper}]; give the column's "
            "public minimum and maximum"
        )
    if lower > upper:
        raise ValueError(
            f"{col}: lower bound {lower} is greater than upper bound {upper}; "
            f"write them as [{upper}, {lower}]"
        )
    if kind == "integer":
        if lower != math.floor(lower) or upper != math.floor(upper):
            raise ValueError(
                f"{col} is integer but its bounds [{lower}, {upper}] are not whole numbers; "
                'use whole numbers or declare the column "float"'
            )
        return (int(lower), int(upper))
    return (float(lower), float(upper))


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


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
