"""Helpers shared by ``mdav`` and ``mdav_dp``: partition inputs and taxonomy parameters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dpfast.release._common import _Categorical, _Column
from dpfast.taxonomy import Taxonomy


def _partition_inputs(
    protected: Sequence[_Column], categorical: Sequence[_Categorical], n_records: int
) -> tuple[np.ndarray, np.ndarray, list[Taxonomy]]:
    """Numeric matrix ``(n, m)``, categorical codes ``(n, c)`` and their taxonomies."""
    matrix = (
        np.column_stack([c.values for c in protected]) if protected else np.zeros((n_records, 0))
    )
    codes = (
        np.column_stack([c.codes for c in categorical])
        if categorical
        else np.zeros((n_records, 0), dtype=np.int64)
    )
    return matrix, codes, [c.taxonomy for c in categorical]


def _taxonomy_parameters(categorical: Sequence[_Categorical]) -> dict[str, Any]:
    return {
        str(c.name): {"name": c.taxonomy.name, "leaves": len(c.taxonomy.domain)}
        for c in categorical
    }
