"""Accuracy of DP releases from public values: intervals for statistics of a released file.

:func:`accuracy_section` builds the public report's ``accuracy`` field from the report's
other public fields; :func:`accuracy` (bound as :func:`dpfast.accuracy`) gives the
interval of a mean, sum or count a user computes on a released file, from its public
report. :func:`group_sizes` is the one place the rows sharing a noise draw (rank groups,
clusters) are laid out from ``(n, k)`` and the report's remainder rule
(docs/accuracy.md).
"""

from __future__ import annotations

from dpfast.intervals._api import accuracy
from dpfast.intervals._groups import group_sizes, layout, remainder_rule
from dpfast.intervals._models import Accuracy
from dpfast.intervals._quantiles import greedy_weights, laplace_sum_quantile, lattice_quantile
from dpfast.intervals._report import LEVEL, accuracy_section, read_models

__all__ = [
    "LEVEL",
    "Accuracy",
    "accuracy",
    "accuracy_section",
    "greedy_weights",
    "group_sizes",
    "laplace_sum_quantile",
    "lattice_quantile",
    "layout",
    "read_models",
    "remainder_rule",
]
