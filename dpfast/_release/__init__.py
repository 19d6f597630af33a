"""The release skeleton every method uses: open → validate → plan → steps → finish.

A method opens a :class:`Run` over the engine its input belongs to (:func:`open_run`),
checks its arguments and asks the engine for its protected columns, reserves its ε in its
budget (if it has one) and plans every step on its :class:`~dpfast.accounting.Ledger`
before any noise is drawn, releases each column through the engine's primitives
(recording it with :meth:`Run.keep`), and ends with :meth:`Run.finish`, which places the
columns it did not protect, builds the two reports once for every method, commits the
budget's spend and publishes the data.
"""

from __future__ import annotations

from dpfast._release._entries import (
    check_unprotected,
    choice_entry,
    grid_noise_entry,
    keep_numerator,
    noise_source,
    not_dp_guarantee,
    warn_unproven,
)
from dpfast._release._reports import (
    SEEDED_NOTE,
    unprotected_guarantee,
    unprotected_note,
)
from dpfast._release._run import Release, Run, open_run
from dpfast._release.bounds import (
    BOUNDS_STEP,
    DPBounds,
    bounds_guarantee,
    bounds_note,
    bounds_parameters,
    bounds_share,
    choose_bounds,
    protected_specs,
    split_bounds,
)
from dpfast._release.choices import (
    Choices,
    distinct_groups,
    expected_tvd,
    group_tvd,
    sorted_group_kinds,
)
from dpfast._release.columns import (
    ClassLookup,
    TableView,
    check_taxonomies,
    check_width,
    column_names,
    fit_domains,
    numeric_ranges,
    protected_columns,
    protected_domains,
    taxonomy_parameters,
    value_range,
)
from dpfast._release.data_forecast import (
    ColumnDataForecast,
    DataForecast,
    advise_k_from_data,
    forecast_check,
)
from dpfast._release.expected import NumericOutcome, numeric_outcome, pushed_share
from dpfast._release.forecast import (
    THRESHOLD,
    ColumnForecast,
    Forecast,
    PublicTable,
    advise_k,
    bisect_edge,
    bound_steps,
    choice_forecast,
    numeric_forecast,
    refuse_over,
)
from dpfast._release.options import (
    BudgetLike,
    DPMetricsReleaseOptions,
    DPReleaseOptions,
    MetricsReleaseOptions,
    Progress,
    ReleaseOptions,
    Reservation,
    SeededReleaseOptions,
    Unpack,
    options_class,
    release_options,
)
from dpfast._release.shares import (
    budget_parts,
    check_epsilon_weights,
    epsilon_shares,
    weight_parameters,
    weights_option,
)
from dpfast._release.transforms import (
    check_transforms,
    noise_grid,
    transform_notes,
    transform_parameters,
    warn_uncorrected,
)
from dpfast._validation import cli_spelling, method_call, option
from dpfast.engines import EngineChoice
from dpfast.engines.base import Engine
from dpfast.engines.values import (
    Bins,
    CategoricalColumn,
    CodeCells,
    CodedNumeric,
    Contingency,
    NumericColumn,
    check_in_domain,
    column_threads,
    inverse_permutation,
    partition_inputs,
)

__all__ = [
    "BOUNDS_STEP",
    "SEEDED_NOTE",
    "THRESHOLD",
    "Bins",
    "BudgetLike",
    "CategoricalColumn",
    "Choices",
    "ClassLookup",
    "CodeCells",
    "CodedNumeric",
    "ColumnDataForecast",
    "ColumnForecast",
    "Contingency",
    "DPBounds",
    "DPMetricsReleaseOptions",
    "DPReleaseOptions",
    "DataForecast",
    "Engine",
    "EngineChoice",
    "Forecast",
    "MetricsReleaseOptions",
    "NumericColumn",
    "NumericOutcome",
    "Progress",
    "PublicTable",
    "Release",
    "ReleaseOptions",
    "Reservation",
    "Run",
    "SeededReleaseOptions",
    "TableView",
    "Unpack",
    "advise_k",
    "advise_k_from_data",
    "bisect_edge",
    "bound_steps",
    "bounds_guarantee",
    "bounds_note",
    "bounds_parameters",
    "bounds_share",
    "budget_parts",
    "check_epsilon_weights",
    "check_in_domain",
    "check_taxonomies",
    "check_transforms",
    "check_unprotected",
    "check_width",
    "choice_entry",
    "choice_forecast",
    "choose_bounds",
    "cli_spelling",
    "column_names",
    "column_threads",
    "distinct_groups",
    "epsilon_shares",
    "expected_tvd",
    "fit_domains",
    "forecast_check",
    "grid_noise_entry",
    "group_tvd",
    "inverse_permutation",
    "keep_numerator",
    "method_call",
    "noise_grid",
    "noise_source",
    "not_dp_guarantee",
    "numeric_forecast",
    "numeric_outcome",
    "numeric_ranges",
    "open_run",
    "option",
    "options_class",
    "partition_inputs",
    "protected_columns",
    "protected_domains",
    "protected_specs",
    "pushed_share",
    "refuse_over",
    "release_options",
    "sorted_group_kinds",
    "split_bounds",
    "taxonomy_parameters",
    "transform_notes",
    "transform_parameters",
    "unprotected_guarantee",
    "unprotected_note",
    "value_range",
    "warn_uncorrected",
    "warn_unproven",
    "weight_parameters",
    "weights_option",
]
