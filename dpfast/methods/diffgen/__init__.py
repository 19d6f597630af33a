"""DiffGen: differentially private generalisation for classification (docs/design.md#diffgen).

:func:`diffgen` releases a noisy generalised contingency table (:class:`DiffGenRelease`)
built by top-down specialisation over taxonomies (categorical predictors) and public root
intervals (numeric predictors), with the final :class:`Cut` to generalise test data.
"""

from __future__ import annotations

from dpfast.methods.diffgen._forecast import diffgen_forecast
from dpfast.methods.diffgen.cut import Cut, CutColumn
from dpfast.methods.diffgen.release import DiffGenRelease, diffgen

__all__ = ["Cut", "CutColumn", "DiffGenRelease", "diffgen", "diffgen_forecast"]
