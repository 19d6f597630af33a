"""dpfast: fast differentially private release of tabular microdata.

The public API is re-exported here. ``import dpfast`` is light: it imports no NumPy,
pandas, pyarrow or Numba, and compiles nothing. Each public name is imported from its
module the first time it is used (PEP 562 module ``__getattr__``), so ``dpfast.ir_dp``,
``from dpfast import ir_dp`` and ``from dpfast import *`` work as if the names were
imported here; the kernels compile on their first call and are cached on disk.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dpfast._version import __version__

if TYPE_CHECKING:  # the same names, for type checkers and the API reference
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

#: Each public name and the module it is imported from on first use (a subpackage's name
#: maps to the subpackage itself). tests/test_architecture.py checks that this table, the
#: imports above and ``__all__`` name the same things.
_HOMES = {
    "Accuracy": "dpfast.intervals",
    "BudgetEntry": "dpfast.budget",
    "BudgetExceededError": "dpfast.exceptions",
    "BudgetFile": "dpfast.budget",
    "BudgetFileError": "dpfast.exceptions",
    "ColumnForecast": "dpfast._release",
    "Cut": "dpfast.methods.diffgen",
    "CutColumn": "dpfast.methods.diffgen",
    "DPBounds": "dpfast.schema",
    "DPFastError": "dpfast.exceptions",
    "DPMetricsReleaseOptions": "dpfast._release",
    "DPReleaseOptions": "dpfast._release",
    "DiffGenRelease": "dpfast.methods.diffgen",
    "EpsilonRangeError": "dpfast.exceptions",
    "Forecast": "dpfast._release",
    "IndexDroppedWarning": "dpfast.exceptions",
    "Ledger": "dpfast.accounting",
    "LedgerEntry": "dpfast.accounting",
    "MetricsReleaseOptions": "dpfast._release",
    "NoiseDominatesWarning": "dpfast.exceptions",
    "PrivacyLeakWarning": "dpfast.exceptions",
    "PrivateReport": "dpfast.accounting",
    "PublicTable": "dpfast._release",
    "Release": "dpfast._release",
    "ReleaseOptions": "dpfast._release",
    "Report": "dpfast.accounting",
    "Reservation": "dpfast.budget",
    "SeededReleaseOptions": "dpfast._release",
    "Taxonomy": "dpfast.taxonomy",
    "TransformBiasWarning": "dpfast.exceptions",
    "TaxonomyError": "dpfast.taxonomy",
    "UnprovenReleaseWarning": "dpfast.exceptions",
    "UnsafeSamplerWarning": "dpfast.exceptions",
    "accuracy": "dpfast.intervals",
    "datasets": "dpfast.datasets",
    "diffgen": "dpfast.methods.diffgen",
    "forecast": "dpfast.methods.forecast",
    "individual_ranking": "dpfast.methods.individual_ranking",
    "ir_dp": "dpfast.methods.ir_dp",
    "k_noise": "dpfast.methods.k_noise",
    "k_pram": "dpfast.methods.k_pram",
    "laplace_dp": "dpfast.methods.laplace_dp",
    "mdav": "dpfast.methods.mdav",
    "mdav_dp": "dpfast.methods.mdav_dp",
    "metrics": "dpfast.metrics",
    "randomized_response": "dpfast.methods.randomized_response",
    "risk": "dpfast.risk",
}

#: The public subpackages and modules not in ``__all__``: ``import dpfast`` makes each an
#: attribute on first use too (``dpfast.io.read_table``), as when the package imported them.
_SUBMODULES = (
    "accounting",
    "budget",
    "cli",
    "compare",
    "dataflow",
    "engines",
    "exceptions",
    "intervals",
    "io",
    "methods",
    "noise",
    "partitions",
    "schema",
    "steps",
    "taxonomy",
)

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


if not TYPE_CHECKING:  # hidden from type checkers, which then flag a misspelt name

    def __getattr__(name: str) -> Any:
        """Import the public ``name`` from its module on first use, and keep it here."""
        home = f"dpfast.{name}" if name in _SUBMODULES else _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module 'dpfast' has no attribute {name!r}")
        module = importlib.import_module(home)
        value = module if home == f"dpfast.{name}" else getattr(module, name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        """List the module's names, with the public names not imported yet."""
        return sorted({*globals(), *__all__, *_SUBMODULES})
