"""The schema file format: declared column types and reading a schema's JSON (one-line fixes)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpfast._validation import QUOTED_CHARACTERS, did_you_mean, quoted
from dpfast.exceptions import DPFastError, DPFastValueError
from dpfast.schema._dp_bounds import DPBounds

#: The column types a schema may declare.
COLUMN_TYPES: tuple[str, ...] = ("integer", "float", "categorical", "string")
_NUMERIC = ("integer", "float")
#: The public monotone transforms a protected numeric column may take (docs/schema.md).
TRANSFORMS: tuple[str, ...] = ("log", "asinh")


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
        Whether releases must protect the column. A column that is not protected is
        released as the method says (docs/schema.md, "Columns not protected"): left out
        by default where a method takes ``unprotected``, else unchanged in its rows.
    taxonomy : pathlib.Path, list, dict or None
        A categorical column's taxonomy: its hierarchy file (resolved against the schema's
        directory), a list of its public values (a flat taxonomy), or a nested mapping
        with one root (see :func:`dpfast.taxonomy.as_taxonomy`).
    description : str or None
        Free text, e.g. where the bounds come from.
    from_data : tuple of str
        The fields (``"bounds"``, ``"taxonomy"``) that were read from the data (by
        ``dpfast schema init --bounds-from-data`` or ``--domains-from-data``): a release
        that uses them is not differentially private, and says so.
    dp_bounds : DPBounds or None
        A protected numeric column's clamping bounds chosen with DP within ``bounds``
        (its public outer range), from the column's ``"dp_bounds"`` (docs/schema.md).
    transform : {"log", "asinh"} or None
        A protected numeric column's public monotone transform (the ``transforms=`` of
        ``ir_dp``, ``laplace_dp`` and ``mdav_dp``; docs/privacy.md#transforms).
    epsilon_weight : float or None
        A protected column's public weight in the split of ε (``epsilon_weights=``;
        docs/privacy.md#weights); a column without one weighs 1 when another has one.
    """

    name: str
    type: str
    bounds: tuple[float, float] | None = None
    protect: bool = True
    taxonomy: Path | list[str] | dict[str, Any] | None = None
    description: str | None = None
    from_data: tuple[str, ...] = ()
    dp_bounds: DPBounds | None = None
    transform: str | None = None
    epsilon_weight: float | None = None

    @property
    def is_numeric(self) -> bool:
        """Whether the column is declared ``integer`` or ``float``."""
        return self.type in _NUMERIC


_TOP_KEYS = ("version", "description", "columns")
_COLUMN_KEYS = (
    "type",
    "bounds",
    "protect",
    "taxonomy",
    "description",
    "from_data",
    "dp_bounds",
    "transform",
    "epsilon_weight",
)
#: The keys of a column's ``"dp_bounds"`` (the fields of :class:`DPBounds` but ``outer``).
_DP_BOUNDS_KEYS = ("upper_quantile", "lower_quantile", "epsilon_share")

#: What ``dpfast schema init`` writes where a public value must be filled in by hand.
PLACEHOLDER = "FILL IN"
_FROM_DATA_KEYS = ("bounds", "taxonomy")
_VERSION = 1


def _check_known_keys(data: Mapping[str, Any], known: tuple[str, ...], unknown: str) -> None:
    """Refuse the first key of ``data`` not in ``known``; the message starts with ``unknown``."""
    for key in data:
        if key not in known:
            raise DPFastValueError(
                f"{unknown} {quoted(key)}; {did_you_mean(key, known)}allowed keys are "
                f"{', '.join(known)}"
            )


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


def read_schema_json(path: str | os.PathLike[str]) -> Any:
    """Return the parsed JSON of a schema file (see :meth:`Schema.from_json`)."""
    where = os.fspath(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DPFastValueError(f"schema file {where!r} does not exist; check the path") from None
    except IsADirectoryError:
        raise DPFastValueError(
            f"schema path {where!r} is a directory; give the path of a .json file"
        ) from None
    except UnicodeDecodeError as exc:
        raise DPFastValueError(
            f"schema file {where!r} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None
    except OSError as exc:
        raise DPFastValueError(
            f"cannot read schema file {where!r}: {exc.strerror or exc}; check its permissions"
        ) from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise DPFastValueError(
            f"schema file {where!r} is not valid JSON: {exc.msg} at line {exc.lineno}, "
            f"column {exc.colno}; fix the JSON syntax there"
        ) from None
    except _DuplicateKeyError as exc:
        raise DPFastValueError(
            f"schema file {where!r} repeats the key {quoted(exc.key)}; "
            "declare each column and each setting once"
        ) from None
    return data


def parse_schema(
    data: Mapping[str, Any],
    base_dir: str | os.PathLike[str] | None,
    source: str | None,
) -> tuple[list[ColumnSpec], str | None]:
    """Return the column specs and description of a schema's JSON (see :meth:`Schema.from_dict`)."""
    where = source or "schema"
    if not isinstance(data, Mapping):
        raise DPFastValueError(
            f'{where}: the top level must be a JSON object with a "columns" key, '
            f"got {_json_type(data)}; see docs/schema.md"
        )
    _check_known_keys(data, _TOP_KEYS, f"{where}: unknown top-level key")
    version = data.get("version", _VERSION)
    if isinstance(version, bool) or version != _VERSION:
        raise DPFastValueError(
            f"{where}: unsupported schema version {quoted(version)}; this dpfast reads version "
            f"{_VERSION}"
        )
    description = _optional_text(data.get("description"), where, "description")
    if "columns" not in data:
        raise DPFastValueError(
            f'{where}: missing "columns"; add an object mapping each column name to '
            'its settings, e.g. {"columns": {"age": {"type": "integer", '
            '"bounds": [17, 90]}}}'
        )
    columns = data["columns"]
    if not isinstance(columns, Mapping) or not columns:
        raise DPFastValueError(
            f'{where}: "columns" must be a non-empty object mapping column names to '
            f"settings, got {_json_type(columns) if columns != {} else 'an empty object'}"
        )
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    _check_no_placeholders(columns, where)  # every one at once, before any other check
    specs = [_column_spec(name, entry, base, where) for name, entry in columns.items()]
    return specs, description


class _DuplicateKeyError(DPFastValueError):
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
    raise DPFastValueError(f"{where}: {what} must be a string, got {_json_type(value)}")


def _column_spec(name: str, entry: Any, base: Path, where: str) -> ColumnSpec:
    col = f"{where}: column {quoted(name)}"
    if not isinstance(name, str) or not name:
        raise DPFastValueError(
            f"{where}: column names must be non-empty strings, got {quoted(name)}"
        )
    _check_column_keys(entry, col)
    kind = _parse_type(entry, col)
    protect = _parse_protect(entry, kind, col)
    from_data = _parse_from_data(entry.get("from_data", []), col)
    bounds = _column_bounds(entry, kind, protect, col)
    taxonomy = None
    if "taxonomy" in entry:
        if kind != "categorical":
            raise DPFastValueError(
                f'{col} is {kind}, but only categorical columns take a "taxonomy"; '
                "remove it or declare the column categorical"
            )
        taxonomy = _parse_taxonomy(entry["taxonomy"], col, base)
    description = _optional_text(entry.get("description"), col, '"description"')
    missing = [key for key in from_data if key not in entry]
    if missing:
        raise DPFastValueError(
            f'{col}: "from_data" names {quoted(missing)}, which the column does not have'
        )
    dp_bounds = _column_dp_bounds(entry, kind, protect, bounds, col)
    transform = _parse_transform(entry, kind, protect, bounds, col)
    weight = _parse_weight(entry, protect, col)
    return ColumnSpec(
        name, kind, bounds, protect, taxonomy, description, from_data, dp_bounds, transform,
        weight,
    )  # fmt: skip


def _parse_transform(
    entry: Mapping[str, Any],
    kind: str,
    protect: bool,
    bounds: tuple[float, float] | None,
    col: str,
) -> str | None:
    """Return a protected numeric column's ``"transform"``, or ``None`` without one."""
    if "transform" not in entry:
        return None
    raw = entry["transform"]
    if kind not in _NUMERIC or not protect:
        raise DPFastValueError(
            f"{col} is {'a protected ' + kind if protect else 'not protected'}, but only "
            'protected integer and float columns take a "transform"; remove it'
        )
    if not isinstance(raw, str) or raw not in TRANSFORMS:
        hint = did_you_mean(raw, TRANSFORMS) if isinstance(raw, str) else ""
        shown = repr(raw) if isinstance(raw, str) else _json_type(raw)
        raise DPFastValueError(
            f'{col}: "transform" must be "log" (log1p, for values >= 0) or "asinh" (for '
            f"signed values), got {shown}; {hint}".rstrip("; ")
        )
    if raw == "log" and bounds is not None and bounds[0] < 0:
        raise DPFastValueError(
            f'{col}: "transform": "log" (log1p) needs values >= 0, but the lower bound is '
            f'{bounds[0]}; use "asinh" for a column with negative values'
        )
    return raw


def _parse_weight(entry: Mapping[str, Any], protect: bool, col: str) -> float | None:
    """Return a protected column's ``"epsilon_weight"``, or ``None`` without one."""
    if "epsilon_weight" not in entry:
        return None
    raw = entry["epsilon_weight"]
    if not protect:
        raise DPFastValueError(
            f'{col} is not protected, but only protected columns take an "epsilon_weight"; '
            "remove it"
        )
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise DPFastValueError(
            f'{col}: "epsilon_weight" must be a number > 0, got {_json_type(raw)}'
        )
    if not (math.isfinite(raw) and raw > 0):
        raise DPFastValueError(
            f'{col}: "epsilon_weight" must be a finite number > 0, got {quoted(raw)}; a column '
            'that should get no budget cannot be protected: set "protect": false'
        )
    return float(raw)


def _check_column_keys(entry: Any, col: str) -> None:
    """Check that a column's entry is an object of known keys, with a ``"type"``."""
    if not isinstance(entry, Mapping):
        raise DPFastValueError(
            f'{col} must map to an object such as {{"type": "integer", '
            f'"bounds": [0, 100]}}, got {_json_type(entry)}'
        )
    _check_known_keys(entry, _COLUMN_KEYS, f"{col} has unknown key")
    if "type" not in entry:
        raise DPFastValueError(
            f'{col} has no "type"; add one of {", ".join(repr(t) for t in COLUMN_TYPES)}'
        )


def _parse_type(entry: Mapping[str, Any], col: str) -> str:
    """Return a column's declared type, one of :data:`COLUMN_TYPES`."""
    kind = entry["type"]
    if not isinstance(kind, str) or kind not in COLUMN_TYPES:
        shown = quoted(kind) if isinstance(kind, str) else _json_type(kind)
        hint = did_you_mean(kind, COLUMN_TYPES) if isinstance(kind, str) else ""
        raise DPFastValueError(
            f"{col} has unknown type {shown}; {hint}use one of "
            f"{', '.join(repr(t) for t in COLUMN_TYPES)}"
        )
    return kind


def _parse_protect(entry: Mapping[str, Any], kind: str, col: str) -> bool:
    """Return whether a column is protected (by default every column but strings)."""
    protect = entry.get("protect", kind != "string")
    if not isinstance(protect, bool):
        raise DPFastValueError(f'{col}: "protect" must be true or false, got {quoted(protect)}')
    if kind == "string" and protect:
        raise DPFastValueError(
            f"{col} is a string column, which no release method can protect; "
            'set "protect": false to leave it unprotected (docs/schema.md, "Columns not '
            'protected"), declare it "categorical", or drop it from the input'
        )
    return protect


_PLACEHOLDER_FILLS = {
    "bounds": "[lower, upper]",
    "taxonomy": "the column's public values (a list)",
}


def _check_no_placeholders(columns: Mapping[str, Any], where: str) -> None:
    """Refuse every ``"bounds"`` or ``"taxonomy"`` still holding :data:`PLACEHOLDER`, at once."""
    found = [
        (name, key)
        for name, entry in columns.items()
        if isinstance(entry, Mapping)
        for key in _PLACEHOLDER_FILLS
        if isinstance(entry.get(key), str) and entry[key].startswith(PLACEHOLDER)
    ]
    if not found:
        return
    keys = [key for key in _PLACEHOLDER_FILLS if any(k == key for _, k in found)]
    fills = " and ".join(f'each "{key}" with {_PLACEHOLDER_FILLS[key]}' for key in keys)
    listed = ", ".join(f'column {quoted(name)} "{key}"' for name, key in found)
    raise DPFastValueError(
        f"{where}: {len(found)} value(s) still the placeholder {quoted(PLACEHOLDER)}: {listed}; "
        f"replace {fills}, taken from public knowledge (never from the data), or set "
        '"protect": false on the column'
    )


def _column_bounds(
    entry: Mapping[str, Any], kind: str, protect: bool, col: str
) -> tuple[float, float] | None:
    """Return a column's bounds: required for a protected numeric column, else optional."""
    if "bounds" in entry:
        if kind not in _NUMERIC:
            raise DPFastValueError(
                f'{col} is {kind}, but only integer and float columns take "bounds"; '
                "remove them or change the type"
            )
        return _parse_bounds(entry["bounds"], kind, col)
    if kind in _NUMERIC and protect:
        raise DPFastValueError(
            f'{col} is a protected {kind} column without bounds; add "bounds": [lower, upper] '
            'from public knowledge (never from the data), or set "protect": false to leave '
            'it unprotected (docs/schema.md, "Columns not protected")'
        )
    return None


def _column_dp_bounds(
    entry: Mapping[str, Any], kind: str, protect: bool, bounds: Any, col: str
) -> DPBounds | None:
    """Return a column's clamping bounds chosen with DP within its ``"bounds"``, if declared."""
    if "dp_bounds" not in entry:
        return None
    raw = entry["dp_bounds"]
    if kind not in _NUMERIC or not protect or bounds is None:
        raise DPFastValueError(
            f'{col} has "dp_bounds", which only a protected integer or float column with '
            '"bounds" (its public outer range) takes; remove it or declare the column so'
        )
    if not isinstance(raw, Mapping):
        raise DPFastValueError(
            f'{col}: "dp_bounds" must be an object such as {{"upper_quantile": 0.99, '
            f'"epsilon_share": 0.1}}, got {_json_type(raw)}'
        )
    _check_known_keys(raw, _DP_BOUNDS_KEYS, f'{col}: "dp_bounds" has unknown key')
    if "epsilon_share" not in raw:
        raise DPFastValueError(
            f'{col}: "dp_bounds" has no "epsilon_share"; add the share of the column\'s '
            'epsilon spent on its bounds, e.g. "epsilon_share": 0.1'
        )
    if not bounds[0] < bounds[1]:
        raise DPFastValueError(
            f'{col}: "dp_bounds" chooses bounds within "bounds", which must then have '
            f"lower < upper, got {list(bounds)}; widen them to the column's public range"
        )
    try:
        return DPBounds(outer=bounds, **raw)
    except DPFastError as exc:
        raise DPFastValueError(f'{col}: "dp_bounds" {str(exc).removeprefix("DPBounds ")}') from None


def _parse_from_data(raw: Any, col: str) -> tuple[str, ...]:
    """Return the fields a column marks as taken from the data (``"from_data"``)."""
    if not isinstance(raw, list) or not all(key in _FROM_DATA_KEYS for key in raw):
        raise DPFastValueError(
            f'{col}: "from_data" must list the fields taken from the data, among '
            f"{list(_FROM_DATA_KEYS)}; got {quoted(raw)}"
        )
    return tuple(raw)


def _parse_taxonomy(raw: Any, col: str, base: Path) -> Path | list[str] | dict[str, Any]:
    """Return a hierarchy file's path (checked), a list of leaves, or a nested mapping.

    The tree of an inline taxonomy is checked when it is built (``dpfast.taxonomy``).
    """
    if isinstance(raw, list):
        if not raw or not all(isinstance(leaf, str) and leaf for leaf in raw):
            raise DPFastValueError(
                f'{col}: a "taxonomy" list must hold the column\'s public values as non-empty '
                f"strings, got {quoted(raw)}"
            )
        return list(raw)
    if isinstance(raw, dict):
        if len(raw) != 1:
            raise DPFastValueError(
                f'{col}: a "taxonomy" mapping must have one root, e.g. '
                '{"*": {"A": ["a1", "a2"], "B": ["b1"]}}, '
                f"got {len(raw)} top-level keys"
            )
        return dict(raw)
    if not isinstance(raw, str) or not raw:
        raise DPFastValueError(
            f'{col}: "taxonomy" must be the path of a hierarchy file (ARX format), a list of '
            f"the public values, or a nested mapping with one root; got {_json_type(raw)}"
        )
    taxonomy = Path(raw) if Path(raw).is_absolute() else base / raw
    if not taxonomy.is_file():
        raise DPFastValueError(
            f"{col}: taxonomy file {str(taxonomy)!r} does not exist; relative paths are "
            "read from the schema file's directory"
        )
    return taxonomy


def _parse_bounds(raw: Any, kind: str, col: str) -> tuple[float, float]:
    if (
        not isinstance(raw, (list, tuple))
        or len(raw) != 2
        or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in raw)
    ):
        text = json.dumps(raw) if _jsonable(raw) else ""
        shown = text if 0 < len(text) <= QUOTED_CHARACTERS else quoted(raw)  # JSON if short
        raise DPFastValueError(
            f'{col}: "bounds" must be a list of two numbers [lower, upper], got {shown}'
        )
    lower, upper = raw
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise DPFastValueError(
            f"{col}: bounds must be finite, got [{lower}, {upper}]; give the column's "
            "public minimum and maximum"
        )
    if lower > upper:
        raise DPFastValueError(
            f"{col}: lower bound {lower} is greater than upper bound {upper}; "
            f"write them as [{upper}, {lower}]"
        )
    if kind == "integer":
        if lower != math.floor(lower) or upper != math.floor(upper):
            raise DPFastValueError(
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
