"""One column's declaration: :class:`ColumnSpec` and the types a schema may declare."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The column types a schema may declare.
COLUMN_TYPES: tuple[str, ...] = ("integer", "float", "categorical", "string")
_NUMERIC = ("integer", "float")


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
