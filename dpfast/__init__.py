"""dpfast: fast differentially private release of tabular microdata.

The public API is re-exported here; nothing is compiled at import (kernels compile on
first use and are cached on disk).
"""

from __future__ import annotations

from dpfast import datasets, metrics, risk
from dpfast._release import (
    ColumnForecast,
    DPMetricsReleaseOptions,
    DPReleaseOptions,
    Forecast,
    MetricsReleaseOptions,
    PublicTable,
    Release,
    ReleaseOptions,
    SeededReleaseOptions,
)
from dpfast._version import __version__
from dpfast.accounting import Ledger, LedgerEntry, PrivateReport, Report
from dpfast.budget import BudgetEntry, BudgetFile, Reservation
from dpfast.exceptions import (
    BudgetExceededError,
    BudgetFileError,
    DPFastError,
    EpsilonRangeError,
    IndexDroppedWarning,
    NoiseDominatesWarning,
    PrivacyLeakWarning,
    TransformBiasWarning,
    UnprovenReleaseWarning,
    UnsafeSamplerWarning,
)
from dpfast.intervals import Accuracy, accuracy
from dpfast.methods.diffgen import Cut, CutColumn, DiffGenRelease, diffgen
from dpfast.methods.forecast import forecast
from dpfast.methods.individual_ranking import individual_ranking
from dpfast.methods.ir_dp import ir_dp
from dpfast.methods.k_noise import k_noise
from dpfast.methods.k_pram import k_pram
from dpfast.methods.laplace_dp import laplace_dp
from dpfast.methods.mdav import mdav
from dpfast.methods.mdav_dp import mdav_dp
from dpfast.methods.randomized_response import randomized_response
from dpfast.schema import DPBounds
from dpfast.taxonomy import Taxonomy, TaxonomyError

__all__ = [
    "Accuracy",
    "BudgetEntry",
    "BudgetExceededError",
    "BudgetFile",
    "BudgetFileError",
    "ColumnForecast",
    "Cut",
    "CutColumn",
    "DPBounds",
    "DPFastError",
    "DPMetricsReleaseOptions",
    "DPReleaseOptions",
    "DiffGenRelease",
    "EpsilonRangeError",
    "Forecast",
    "IndexDroppedWarning",
    "Ledger",
    "LedgerEntry",
    "MetricsReleaseOptions",
    "NoiseDominatesWarning",
    "PrivacyLeakWarning",
    "PrivateReport",
    "PublicTable",
    "Release",
    "ReleaseOptions",
    "Report",
    "Reservation",
    "SeededReleaseOptions",
    "Taxonomy",
    "TaxonomyError",
    "TransformBiasWarning",
    "UnprovenReleaseWarning",
    "UnsafeSamplerWarning",
    "__version__",
    "accuracy",
    "datasets",
    "diffgen",
    "forecast",
    "individual_ranking",
    "ir_dp",
    "k_noise",
    "k_pram",
    "laplace_dp",
    "mdav",
    "mdav_dp",
    "metrics",
    "randomized_response",
    "risk",
]
