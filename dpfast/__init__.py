"""dpfast: fast differentially private release of tabular microdata.

The public API is re-exported here; nothing is compiled at import (kernels compile on
first use and are cached on disk).
"""

from __future__ import annotations

from dpfast import datasets, metrics
from dpfast._version import __version__
from dpfast.accounting import Ledger, LedgerEntry, Report
from dpfast.diffgen import Cut, DiffGenRelease, diffgen
from dpfast.exceptions import BudgetExceededError, PrivacyLeakWarning, UnsafeSamplerWarning
from dpfast.mechanisms import k_noise, k_pram, randomized_response
from dpfast.release import Release, individual_ranking, ir_dp, laplace_dp
from dpfast.release_mdav import mdav, mdav_dp
from dpfast.taxonomy import Taxonomy, TaxonomyError

__all__ = [
    "BudgetExceededError",
    "Cut",
    "DiffGenRelease",
    "Ledger",
    "LedgerEntry",
    "PrivacyLeakWarning",
    "Release",
    "Report",
    "Taxonomy",
    "TaxonomyError",
    "UnsafeSamplerWarning",
    "__version__",
    "datasets",
    "diffgen",
    "individual_ranking",
    "ir_dp",
    "k_noise",
    "k_pram",
    "laplace_dp",
    "mdav",
    "mdav_dp",
    "metrics",
    "randomized_response",
]
