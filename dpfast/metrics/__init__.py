"""Utility metrics comparing an original table with its release (docs/design.md#metrics).

Each metric takes pandas, Arrow or NumPy input. A single column (1-D array, Series,
Arrow array) gives a float; a table gives the mean over its columns, as Sánchez et al.
(2016) report it, or a mapping ``{column: value}`` with ``per_column=True``. The
exceptions say so: :func:`information_loss` returns IL1-IL6 of the whole table, and
:func:`sse` / :func:`sst` sum over columns.

- :func:`relative_error`: record-linked error with a sanity bound (docs/design.md#relative-error);
- :func:`jensen_shannon`: divergence of the marginal histograms (docs/design.md#jsd);
- :func:`variance_variation`: relative change of each variance (docs/design.md#variance-variation);
- :func:`information_loss`: IL1-IL5 and IL6 (docs/design.md#information-loss);
- :func:`correlation_error`: mean absolute change of the correlations between columns,
  rows not paired (docs/metrics.md);
- :func:`sse`, :func:`sst`: within-group and total sums of squares of a partition;
- :func:`reconstruct_distribution`: category frequencies after randomized response
  (docs/design.md#randomized-response).

Metrics read the original data: they are for the data holder and must not be published
with the release.
"""

from __future__ import annotations

from dpfast.metrics._common import column_metric
from dpfast.metrics._correlation import correlation_error
from dpfast.metrics._distribution import (
    MAX_DISCRETE_VALUES,
    jensen_shannon,
    jensen_shannon_counts,
    relative_error,
    variance_variation,
)
from dpfast.metrics._loss import InformationLoss, information_loss, sse, sst
from dpfast.metrics._randomized import reconstruct_distribution

__all__ = [
    "MAX_DISCRETE_VALUES",
    "InformationLoss",
    "column_metric",
    "correlation_error",
    "information_loss",
    "jensen_shannon",
    "jensen_shannon_counts",
    "reconstruct_distribution",
    "relative_error",
    "sse",
    "sst",
    "variance_variation",
]
