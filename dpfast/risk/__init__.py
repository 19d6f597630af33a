"""Disclosure risk of a release: how well an intruder could find people in it.

dpfast's statistical disclosure control methods (``mdav``, ``individual_ranking``,
``k_noise``, ``k_pram``) protect only as much as their risk turns out to be; these
measures estimate it (docs/risk.md):

- :func:`record_linkage`: share of released records whose nearest original record is
  their own source, on values or on ranks (docs/risk.md#record-linkage);
- :func:`interval_disclosure`: per column, share of released values whose ±p% interval
  holds the original value (docs/risk.md#interval-disclosure);
- :func:`uniqueness`: equivalence classes of quasi-identifiers, sample uniques, share of
  records in classes smaller than k (docs/risk.md#uniqueness);
- :func:`neighbourhood_counts`: original records within ±width of each released value,
  the k-noise paper's measure (docs/risk.md#neighbourhood-counts);
- :func:`risk_summary`: all of them at once, as a JSON-ready dict
  (docs/risk.md#risk-summary).

All but :func:`uniqueness` compare row ``i`` of the release with row ``i`` of the
original: a release whose report shows a new row order is refused
(docs/risk.md#alignment, :func:`misalignment`). Such a release measures its risk itself,
with ``risk=True``: :func:`release_risk` pairs each released row with its source through
the release's own order (docs/risk.md#risk-at-release-time). The measures read the
original data: they are for the data holder and must not be published with the release.
"""

from __future__ import annotations

from dpfast.risk._at_release import (
    RISK_KEYS,
    RISK_WARNING,
    ReleaseDefaults,
    RiskOptions,
    release_risk,
    risk_options,
)
from dpfast.risk._common import ROW_ORDER_METHODS, misalignment
from dpfast.risk._interval import interval_disclosure
from dpfast.risk._linkage import record_linkage
from dpfast.risk._neighbourhood import NeighbourhoodCounts, neighbourhood_counts
from dpfast.risk._summary import risk_summary
from dpfast.risk._uniqueness import Uniqueness, uniqueness

__all__ = [
    "RISK_KEYS",
    "RISK_WARNING",
    "ROW_ORDER_METHODS",
    "NeighbourhoodCounts",
    "ReleaseDefaults",
    "RiskOptions",
    "Uniqueness",
    "interval_disclosure",
    "misalignment",
    "neighbourhood_counts",
    "record_linkage",
    "release_risk",
    "risk_options",
    "risk_summary",
    "uniqueness",
]
