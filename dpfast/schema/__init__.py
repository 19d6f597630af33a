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

Bounds are *public* inputs (docs/design.md#public-bounds): they must come from a codebook or from
knowledge that does not depend on the data, never from the data's own minimum and maximum.
A column may instead have its clamping bounds chosen with DP within its public bounds
(``"dp_bounds"``, a :class:`DPBounds`; docs/privacy.md#bounds-chosen-with-dp).

Every problem raises :class:`ValueError` with a one-line message that names the column,
what was expected, what was found and how to fix it. The CLI shows that line as is.
"""

from __future__ import annotations

from dpfast.schema._dp_bounds import BOUNDS_STEP, DPBounds
from dpfast.schema._parse import COLUMN_TYPES, PLACEHOLDER, ColumnSpec
from dpfast.schema._schema import Schema

__all__ = ["BOUNDS_STEP", "COLUMN_TYPES", "PLACEHOLDER", "ColumnSpec", "DPBounds", "Schema"]
