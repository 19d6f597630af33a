"""Clamping bounds chosen with DP: the split of ``bounds=``, the ledger entry, the step.

A column given a :class:`~dpfast.schema.DPBounds` in place of its public bounds is
planned over its public outer range, with its share of ε cut in two: ``epsilon_share`` of
it for the bounds (:func:`bounds_share`, one ledger entry) and the rest for its noise.
Once the whole ε is reserved, :func:`choose_bounds` reads each such column once
(:func:`~dpfast.steps.edge_counts` over the public candidates of
:func:`~dpfast.partitions.candidates.bound_candidates`) and draws each bound asked for
with :func:`~dpfast.noise.exponential_quantile`; the method then plans its noise again
over the chosen bounds, and spends the bounds' entries (docs/privacy.md#bounds-chosen-with-dp).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

import numpy as np

from dpfast import noise
from dpfast._release.columns import fit_domains
from dpfast._validation import quoted
from dpfast.accounting import LedgerEntry, names
from dpfast.dataflow.values import NumericColumn
from dpfast.engines.base import Engine
from dpfast.partitions.candidates import (
    OCTAVES,
    PER_OCTAVE,
    bound_candidates,
    candidate_edges,
    candidate_ranks,
)
from dpfast.schema import BOUNDS_STEP, DPBounds
from dpfast.steps import edge_counts

Args = TypeVar("Args", bound=Any)  # a method's arguments dataclass
Plan = TypeVar("Plan")

__all__ = [
    "BOUNDS_STEP",
    "DPBounds",
    "bounds_guarantee",
    "bounds_note",
    "bounds_parameters",
    "bounds_share",
    "choose_bounds",
    "likely_bounds",
    "likely_note",
    "over_bounds",
    "protected_specs",
    "split_bounds",
]

_GRID = (
    f"geometric: the anchor (the outer lower bound if it is >= 0, the outer upper bound if "
    f"it is <= 0, else 0) plus or minus m * 2**e, m in [{PER_OCTAVE}, {2 * PER_OCTAVE}), over "
    f"the {OCTAVES} octaves below the distance from the anchor to each side's outer bound, "
    "and the outer bounds"
)


def split_bounds(bounds: Any) -> tuple[Any, dict[Hashable, DPBounds]]:
    """Return ``bounds`` with each :class:`DPBounds` replaced by its outer range, and those.

    What is not a mapping comes back as it is (``"data"``, ``None``, a wrong type, which
    the bounds' own check refuses).
    """
    if not isinstance(bounds, Mapping):
        return bounds, {}
    chosen = {name: spec for name, spec in bounds.items() if isinstance(spec, DPBounds)}
    if not chosen:
        return bounds, {}
    plain = {name: spec.outer if name in chosen else spec for name, spec in bounds.items()}
    return plain, chosen


def protected_specs(
    specs: Mapping[Hashable, DPBounds], numeric: Sequence[NumericColumn]
) -> dict[Hashable, DPBounds]:
    """Return the specs of the protected numeric columns (the others name no bound)."""
    return {c.name: specs[c.name] for c in numeric if c.name in specs}


def bounds_share(
    specs: Mapping[Hashable, DPBounds], column: NumericColumn, share: float
) -> tuple[float, LedgerEntry | None]:
    """Return the part of a column's ``share`` of ε its noise gets, and its bounds' entry.

    A column without a :class:`DPBounds` keeps ``share`` (and no entry); one with a spec
    gives ``share * epsilon_share`` to its bounds' ledger entry and the rest to its noise.
    """
    spec = specs.get(column.name)
    if spec is None:
        return share, None
    spent = share * spec.epsilon_share
    return share - spent, _entry(column, spec, spent)


def _entry(column: NumericColumn, spec: DPBounds, epsilon: float) -> LedgerEntry:
    """Return the ledger entry of a column's bounds chosen with DP (one or two draws)."""
    draw = epsilon / spec.draws
    base = noise.exponential_base(epsilon=draw, sensitivity=noise.QUANTILE_SENSITIVITY)
    unit = 2.0**-noise.QUANTILE_BITS
    candidates = bound_candidates(*spec.outer, integer=column.integer)
    return LedgerEntry(
        step=BOUNDS_STEP,
        columns=(str(column.name),),
        epsilon=epsilon,
        mechanism="exponential mechanism over public candidate bounds, quality = minus the "
        "distance from q n to [#{x < c}, #{x <= c}] (x the column clamped to its outer "
        "range), one draw per bound chosen",
        sensitivity=1.0,
        noise_scale=base.scale(unit),
        sampler=noise.EM_SAMPLER_NAME,
        details={
            "outer": list(spec.outer),
            "upper_quantile": spec.upper_quantile,
            "lower_quantile": spec.lower_quantile,
            "epsilon_share": spec.epsilon_share,
            "draws": spec.draws,
            "epsilon_per_draw": draw,
            "candidates": int(candidates.shape[0]),
            "candidate_grid": _GRID,
            "sensitivity_meaning": "one record changes every count #{x < c}, #{x <= c} by "
            "at most 1 (bounded DP: n is public, so q n is fixed)",
            "noise_scale_meaning": "Pr[c] ∝ exp(quality(c) / noise_scale), quality in records",
            **base.details(unit),
        },
    )


def choose_bounds(
    engine: Engine,
    method: str,
    numeric: Sequence[NumericColumn],
    specs: Mapping[Hashable, DPBounds],
    entries: Mapping[Hashable, LedgerEntry],
    source: noise.NoiseSource,
) -> dict[Hashable, tuple[float, float]]:
    """Draw the bounds of every column of ``specs``: one pass and one or two draws each.

    The lower bound (if asked for) is drawn among the candidates below the outer upper
    bound with the stream ``(key, 0)``, the upper bound (if asked for) among those above
    the chosen lower one with ``(key, 1)``, ``key`` the column's ``(method, "bounds",
    column)``; each spends its entry's ε over its draws. Returns ``{column: (lower,
    upper)}``, ``lower < upper``, within the outer range.
    """
    n = engine.n_rows
    chosen: dict[Hashable, tuple[float, float]] = {}
    for column in numeric:
        spec = specs.get(column.name)
        if spec is None:
            continue
        key = source.key(method, "bounds", str(column.name))
        draw = partial(_draw, key, entries[column.name].epsilon / spec.draws, n)
        chosen[column.name] = _pick_bounds(engine, column, spec, draw)
    return chosen


def _draw(key: Any, epsilon: float, n: int, below: Any, at_most: Any, q: float, start: int) -> int:
    """Draw a candidate's index with the exact DP quantile of ``key``'s stream ``start``."""
    return noise.exponential_quantile(
        key, below, at_most, quantile=q, n=n, epsilon=epsilon, start=start
    )


def likely_bounds(
    engine: Engine, numeric: Sequence[NumericColumn], specs: Mapping[Hashable, DPBounds]
) -> dict[Hashable, tuple[float, float]]:
    """PRIVATE: the bounds :func:`choose_bounds` is most likely to draw, for a forecast.

    Each bound is the candidate of highest quality (the first of them on a tie): the one
    nearest the column's own quantile, which the exponential mechanism draws most often.
    It is computed from the data without noise, so it goes only into the forecast from the
    data (docs/forecast.md#from-the-data), never into a release or a public report.
    """
    n = engine.n_rows

    def best(below: Any, at_most: Any, q: float, start: int) -> int:
        return int(np.argmax(noise.quantile_quality(below, at_most, quantile=q, n=n)))

    return {
        column.name: _pick_bounds(engine, column, specs[column.name], best)
        for column in numeric
        if column.name in specs
    }


def likely_note(specs: Mapping[Hashable, DPBounds]) -> tuple[str, ...]:
    """Say, in a forecast from the data, at which bounds the columns of ``specs`` were read."""
    if not specs:
        return ()
    return (
        f"column(s) {names(list(specs))}: forecast at the clamping bounds the DP quantile "
        "is most likely to choose (the public candidates nearest the column's own "
        "quantiles); the release draws its bounds with noise, so they may differ",
    )


def over_bounds(
    args: Args, chosen: Mapping[Hashable, tuple[float, float]], replan: Callable[[Args], Plan]
) -> tuple[Args, Plan]:
    """Return a method's arguments with ``chosen`` as their columns' bounds, and its plan.

    ``args`` is a method's arguments dataclass (fields ``numeric`` and ``domains``), whose
    column types still hold the outer ranges; ``replan(args)`` plans the noise again.
    """
    domains = {**args.domains, **chosen}
    numeric, _ = fit_domains(args.numeric, domains)  # their types hold the outer ranges
    args = replace(args, numeric=numeric, domains=domains)
    return args, replan(args)


def _pick_bounds(
    engine: Engine,
    column: NumericColumn,
    spec: DPBounds,
    pick: Callable[[Any, Any, float, int], int],
) -> tuple[float, float]:
    """Return a column's ``(lower, upper)`` among its candidates, each picked by ``pick``.

    ``pick(below, at_most, q, start)`` returns an index into the candidates it is given:
    for the lower bound those below the outer upper bound (``start`` 0), for the upper
    bound those above the lower one (``start`` 1).
    """
    n = engine.n_rows
    candidates = bound_candidates(*spec.outer, integer=column.integer)
    counts = edge_counts(engine.dataflow, column, candidate_edges(candidates))
    below, at_most = candidate_ranks(counts, candidates, n)
    low, high = 0, candidates.shape[0] - 1
    if spec.lower_quantile is not None:
        low = pick(below[:-1], at_most[:-1], spec.lower_quantile, 0)
    if spec.upper_quantile is not None:
        high = low + 1
        high += pick(below[high:], at_most[high:], spec.upper_quantile, 1)
    return float(candidates[low]), float(candidates[high])


def bounds_parameters(
    specs: Mapping[Hashable, DPBounds], domains: Mapping[Hashable, tuple[float, float]]
) -> dict[str, Any]:
    """Return the report's ``dp_bounds`` parameter: each column's spec and chosen bounds.

    The chosen bounds are DP outputs, public; without a spec there is no such parameter.
    """
    if not specs:
        return {}
    return {
        "dp_bounds": {
            str(name): {
                "outer": list(spec.outer),
                **spec.to_dict(),
                "chosen": list(domains[name]),
            }
            for name, spec in specs.items()
        }
    }


def bounds_guarantee(text: str, entries: Mapping[Hashable, LedgerEntry]) -> str:
    """Return a guarantee's text, with how the bounds chosen with DP are covered, if any."""
    if not entries:
        return text
    spent = ", ".join(f"{quoted(e.columns[0])} {e.epsilon:.6g}" for e in entries.values())
    return (
        f"{text} The clamping bounds of column(s) {names(list(entries))} were chosen with DP "
        f"inside their public outer ranges (an exact exponential-mechanism quantile; {spent}) "
        "from their share of epsilon; by sequential composition the total stays the one "
        "above, and the chosen bounds may be published."
    )


def bounds_note(specs: Mapping[Hashable, DPBounds]) -> tuple[str, ...]:
    """Say, in a forecast, that the bounds chosen with DP are not known before the release."""
    if not specs:
        return ()
    return (
        f"column(s) {names(list(specs))}: the clamping bounds are chosen with DP when the "
        "release runs (a DP quantile inside the public outer range), which no forecast can "
        "know without spending epsilon; their noise is forecast over the outer range, the "
        "widest the bounds can be, with the epsilon left after the bounds' share (the "
        "chosen, narrower bounds get proportionally less noise; the share on a bound, "
        "which depends on the noise scale relative to the width, stays about the same)",
    )
