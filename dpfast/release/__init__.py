"""Releases: compose validation, microaggregation, noise and accounting into one call.

Every function here takes a pandas DataFrame, an Arrow table or a 2-D NumPy array and
returns a :class:`Release` whose ``data`` is of the same kind, with a :class:`Report`.
The helpers shared with the other release modules (MDAV, mechanisms) are in
:mod:`dpfast.release._common`.
"""

from __future__ import annotations

from dpfast.release._baselines import individual_ranking, laplace_dp
from dpfast.release._common import SEEDED_NOTE, Progress, Release
from dpfast.release._ir_dp import ir_dp

__all__ = [
    "SEEDED_NOTE",
    "Progress",
    "Release",
    "individual_ranking",
    "ir_dp",
    "laplace_dp",
]
