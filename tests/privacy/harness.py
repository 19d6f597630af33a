"""A statistical test of the ε-DP inequality on a pair of neighbouring tables.

ε-differential privacy says that for neighbouring tables ``D`` and ``D'`` and every set
``E`` of outputs, ``Pr[M(D) ∈ E] <= exp(ε) · Pr[M(D') ∈ E]``. :func:`audit` estimates
both sides for a family of events from seeded runs of a release (seed ``s`` gives the
``s``-th independent draw, as dpfast's keyed streams do) and flags an event when the
inequality fails beyond an exact confidence margin. :func:`audit` chooses its events on
pilot runs; :func:`audit_events` tests events fixed in advance ("Designed events" below).

How the test decides
--------------------
- Runs with seeds ``0 .. n_pilot - 1`` choose the events: every outcome of every feature
  (below) seen in the pilot is a candidate, and the ``max_events`` candidates whose pilot
  counts are furthest past ``exp(ε)`` (in either direction) are kept. The pilot is
  discarded afterwards, so the choice cannot bias the test.
- Runs with seeds ``n_pilot .. n_pilot + n_runs - 1`` test them. For each kept event and
  each table, exact one-sided Clopper-Pearson bounds ``lower`` and ``upper`` of
  ``Pr[E]`` are computed at level ``δ = alpha / (4 m)`` (``m`` kept events; four bounds per
  event: Bonferroni over the events and both directions). An event is a violation when
  ``lower(D) > exp(ε) · upper(D')`` or ``lower(D') > exp(ε) · upper(D)``. If the release
  is ε-DP, some bound must have failed for any flag, so the chance of any false flag is
  at most ``alpha``. The draws of ``D`` and ``D'`` may share seeds: the union bound needs no
  independence between the two tables' runs.

Impossible events (probability 0 under one table, positive under the other) violate
ε-DP for every ε; they are found with about ``exp(ε) · ln(4 m / alpha)`` runs, so a large ε
keeps such tests fast.

Event families
--------------
A release is first put in a canonical form (:class:`Released`: an ordered mapping from
column label to a tuple of Python values, one per row position; labels keep their type,
so ``0`` and ``"0"`` stay distinct). A *feature* maps it to a hashable outcome; each
outcome ``o`` of a feature ``f`` defines the event ``f(release) == o``. A *tag* feature
maps it to a set of tags instead, and each tag ``t`` defines the event "``t`` is among
the tags": events that overlap, such as "row 0 holds 3" and "row 1 holds 3". A feature
of a missing column returns :data:`ABSENT` (one tag of it), the same outcome for both
tables, so dropping a column can never be a violation.

(a) :func:`row_partition`: the partition of row positions into sets of equal values of
    a column (which rows share a rank group or cluster).
(b) Links between two columns. :func:`grouping`: the partition of one column's values
    (or their ranks) into sets whose rows share a value of the other: for an unprotected
    column next to a protected one, which unprotected values share a protected value
    (the linkage pattern). :func:`linkage`: the multiset of per-row pairs of ranks.
    :func:`comparison` (tags): row ``i``'s first value is below, equal to or above its
    second. :func:`differences` (tags): the values of the per-row difference, where
    noise shared by two columns cancels.
(c) Row positions. :func:`positions`: the row positions that hold a given value of a
    column. :func:`rank_order`: the ranks of a column's values in row order.
    :func:`cells` (tags): row ``i`` holds value ``v``.
(d) :func:`all_integers`: whether every released value of a column is a whole number.
(e) :func:`multiset`: the exact sorted multiset of a column's released values (useful
    when its support is small: categorical outputs, clamped values or few groups).
(f) :func:`bins`: the sorted multiset of the bins (given edges) of a column's values.

:func:`standard_features` builds all of them for a list of columns.

Designed events
---------------
The pilot finds leaks through structure (rows that share a group, linked ranks), but it
spends runs and splits ``alpha`` over many events in both directions, so it sees a
mechanism's calibration only when ε is badly understated. :func:`audit_events` tests
events fixed before any run instead. An :class:`Event` is a set of releases and the
table (``likelier``) that the mechanism's analysis makes it likelier under: a tail where
the privacy loss reaches the stated ε (for a Laplace mechanism whose centroid moves by its
whole sensitivity, "the value is released at the upper bound", where the ratio of the two
probabilities is ``exp(ε)``). How it decides:

- Runs with seeds ``first_seed .. first_seed + n_runs - 1`` count each event under each
  table; no run is spent on choosing.
- With ``m`` events, the bounds are at level ``δ = alpha / (2 m)``. An event likelier under
  table ``T`` (the other one ``T'``) is a violation when ``lower(T) > exp(ε) · upper(T')``.
  If the release is ε-DP then ``Pr[E|T] <= exp(ε) Pr[E|T']``, so a flag needs
  ``lower(T) > Pr[E|T]`` or ``upper(T') < Pr[E|T']``: one of ``2 m`` bounds fails, each
  with chance at most ``δ``, and the chance of any false flag is at most ``alpha``. This
  holds whatever ``likelier`` says (a wrong direction costs power, never validity) and
  however the two tables' runs depend on each other.

A release that spends ``c ε`` while it states ``ε`` puts ``Pr[E|T] = exp(c ε) Pr[E|T']``
on such an event, and the test flags it once ``n_runs`` separates the two bounds by more
than ``exp(ε)``; the designs of tests/privacy/designs.py choose the pair, the event and ε
so that ``c = 2`` is flagged in a few hundred runs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import Any

import numpy as np

#: The outcome of a feature whose column is not in the release.
ABSENT = ("absent",)


# -- canonical form ----------------------------------------------------------------------


@dataclass(frozen=True)
class Released:
    """A released table as ``{label: tuple of Python values}``, in column order."""

    columns: Mapping[Hashable, tuple[Any, ...]]
    n_rows: int

    def get(self, name: Hashable) -> tuple[Any, ...] | None:
        """Return the column's values, or ``None`` if it was not released."""
        for label, values in self.columns.items():
            # 0 == 0.0 == False in Python: compare the types too, so 0 and "0" (and 0 and
            # False) name different columns.
            if label == name and type(label) is type(name):
                return values
        return None


def canonical(table: Any) -> Released:
    """Put a pandas frame, Arrow table, 2-D NumPy array or mapping in canonical form.

    NumPy columns are labelled by integer position, as dpfast does.
    """
    if isinstance(table, Released):
        return table
    columns: dict[Hashable, tuple[Any, ...]] = {}
    if isinstance(table, np.ndarray):
        if table.ndim != 2:
            raise ValueError(f"a NumPy release must be 2-D, got {table.ndim} dimension(s)")
        for j in range(table.shape[1]):
            columns[j] = tuple(table[:, j].tolist())
    elif hasattr(table, "iloc") and hasattr(table, "columns"):  # pandas.DataFrame
        for j, label in enumerate(table.columns):
            columns[_plain(label)] = tuple(table.iloc[:, j].tolist())
    elif hasattr(table, "column_names") and hasattr(table, "column"):  # pyarrow.Table
        for j, label in enumerate(table.column_names):
            columns[label] = tuple(table.column(j).to_pylist())
    elif isinstance(table, Mapping):
        for label, values in table.items():
            columns[label] = tuple(np.asarray(values).tolist())
    else:
        raise TypeError(
            f"expected a pandas DataFrame, Arrow table, 2-D NumPy array or mapping, got "
            f"{type(table).__name__}"
        )
    lengths = {len(values) for values in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"columns of different lengths: {sorted(lengths)}")
    return Released(columns, lengths.pop() if lengths else 0)


def _plain(label: Any) -> Hashable:
    """A NumPy scalar label as the Python value it stands for (``np.int64(0)`` as ``0``)."""
    return label.item() if isinstance(label, np.generic) else label


# -- features ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Feature:
    """A named map from a canonical release to a hashable outcome.

    With ``tags=True`` the map returns a collection of tags instead, and each tag ``t``
    defines the event "``t`` is among the tags" (e.g. "row 2 holds value 5"), so that one
    feature stands for many events that are not disjoint.
    """

    name: str
    compute: Callable[[Released], Any]
    tags: bool = False

    def __call__(self, release: Released) -> Any:
        return self.compute(release)


def _dense_ranks(values: Sequence[Any]) -> tuple[int, ...]:
    order = {value: rank for rank, value in enumerate(sorted(set(values)))}
    return tuple(order[value] for value in values)


def _blocks(keys: Sequence[Any], items: Sequence[Any]) -> tuple[tuple[Any, ...], ...]:
    """The partition of ``items`` by equal ``keys``, as a sorted tuple of sorted tuples."""
    groups: dict[Any, list[Any]] = {}
    for key, item in zip(keys, items, strict=True):
        groups.setdefault(key, []).append(item)
    return tuple(sorted(tuple(sorted(group)) for group in groups.values()))


def _sign(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_whole(value: Any) -> bool:
    if isinstance(value, bool | int):
        return True
    return isinstance(value, float) and value.is_integer()


def _label(name: Hashable) -> str:
    return repr(name)


def row_partition(column: Hashable) -> Feature:
    """(a) The partition of row positions by equal values of ``column``."""

    def compute(release: Released) -> Hashable:
        values = release.get(column)
        if values is None:
            return ABSENT
        return _blocks(values, range(len(values)))

    return Feature(f"row_partition({_label(column)})", compute)


def grouping(of: Hashable, by: Hashable, *, ranks: bool = False) -> Feature:
    """(b) The partition of ``of``'s values (dense ranks if ``ranks``) by equal ``by`` values."""

    def compute(release: Released) -> Hashable:
        items, keys = release.get(of), release.get(by)
        if items is None or keys is None:
            return ABSENT
        return _blocks(keys, _dense_ranks(items) if ranks else items)

    kind = "ranks of " if ranks else ""
    return Feature(f"grouping({kind}{_label(of)} by {_label(by)})", compute)


def linkage(a: Hashable, b: Hashable) -> Feature:
    """(b) The sorted multiset of per-row pairs ``(rank of a, rank of b)``."""

    def compute(release: Released) -> Hashable:
        first, second = release.get(a), release.get(b)
        if first is None or second is None:
            return ABSENT
        return tuple(sorted(zip(_dense_ranks(first), _dense_ranks(second), strict=True)))

    return Feature(f"linkage({_label(a)}, {_label(b)})", compute)


def comparison(a: Hashable, b: Hashable) -> Feature:
    """(b) Tags ``(row, sign)``: row ``row``'s ``a`` is below (-1), equal to (0), above (1) ``b``.

    Values that cannot be compared (a string and a number) give no tag.
    """

    def compute(release: Released) -> Any:
        first, second = release.get(a), release.get(b)
        if first is None or second is None:
            return [ABSENT]
        try:
            return [(i, _sign(x, y)) for i, (x, y) in enumerate(zip(first, second, strict=True))]
        except TypeError:
            return []

    return Feature(f"comparison({_label(a)}, {_label(b)})", compute, tags=True)


def differences(a: Hashable, b: Hashable) -> Feature:
    """(b) Tags: each value of ``a - b`` (rounded to 9 decimals) that some row holds.

    Noise shared by two columns cancels in their difference, which then shows the data.
    Non-numeric columns give no tag.
    """

    def compute(release: Released) -> Any:
        first, second = release.get(a), release.get(b)
        if first is None or second is None:
            return [ABSENT]
        pairs = list(zip(first, second, strict=True))
        if not all(_is_number(x) and _is_number(y) for x, y in pairs):
            return []
        return {round(float(x) - float(y), 9) for x, y in pairs}

    return Feature(f"differences({_label(a)} - {_label(b)})", compute, tags=True)


def cells(column: Hashable) -> Feature:
    """(c) Tags ``(row, value)``: row position ``row`` holds ``value``."""

    def compute(release: Released) -> Any:
        values = release.get(column)
        return [ABSENT] if values is None else list(enumerate(values))

    return Feature(f"cells({_label(column)})", compute, tags=True)


def positions(column: Hashable, value: Any) -> Feature:
    """(c) The row positions where ``column`` holds ``value``."""

    def compute(release: Released) -> Hashable:
        values = release.get(column)
        if values is None:
            return ABSENT
        return tuple(i for i, v in enumerate(values) if v == value)

    return Feature(f"positions({_label(column)} == {value!r})", compute)


def rank_order(column: Hashable) -> Feature:
    """(c) The dense ranks of ``column``'s values, in row order."""

    def compute(release: Released) -> Hashable:
        values = release.get(column)
        return ABSENT if values is None else _dense_ranks(values)

    return Feature(f"rank_order({_label(column)})", compute)


def all_integers(column: Hashable) -> Feature:
    """(d) Whether every released value of ``column`` is a whole number."""

    def compute(release: Released) -> Hashable:
        values = release.get(column)
        return ABSENT if values is None else all(_is_whole(v) for v in values)

    return Feature(f"all_integers({_label(column)})", compute)


def multiset(column: Hashable) -> Feature:
    """(e) The sorted multiset of ``column``'s released values."""

    def compute(release: Released) -> Hashable:
        values = release.get(column)
        return ABSENT if values is None else tuple(sorted(values))

    return Feature(f"multiset({_label(column)})", compute)


def bins(column: Hashable, edges: Sequence[float]) -> Feature:
    """(f) The sorted multiset of bin indices of ``column``'s values.

    Bin ``i`` is ``[edges[i-1], edges[i])``; bin ``0`` is everything below ``edges[0]``.
    """
    cuts = np.asarray(edges, dtype=np.float64)
    if cuts.ndim != 1 or not np.all(np.diff(cuts) > 0):
        raise ValueError(f"bin edges must be strictly increasing, got {list(edges)}")

    def compute(release: Released) -> Hashable:
        values = release.get(column)
        if values is None:
            return ABSENT
        found = np.searchsorted(cuts, np.asarray(values, dtype=np.float64), side="right")
        return tuple(sorted(found.tolist()))

    return Feature(f"bins({_label(column)}, {list(edges)})", compute)


def standard_features(
    columns: Sequence[Hashable],
    *,
    edges: Mapping[Hashable, Sequence[float]] | None = None,
    values: Mapping[Hashable, Iterable[Any]] | None = None,
) -> list[Feature]:
    """Every event family above for ``columns`` (and every ordered pair of them).

    ``edges`` gives the bins of numeric columns (f); ``values`` the values whose row
    positions are events (c), typically those of an unprotected identifier column.
    """
    features: list[Feature] = []
    for column in columns:
        features += [
            row_partition(column),
            rank_order(column),
            cells(column),
            all_integers(column),
            multiset(column),
        ]
        if edges and column in edges:
            features.append(bins(column, edges[column]))
        for value in (values or {}).get(column, ()):
            features.append(positions(column, value))
    for a, b in permutations(columns, 2):
        features.append(grouping(a, b, ranks=True))
        if _label(a) < _label(b):
            features += [linkage(a, b), comparison(a, b), differences(a, b)]
    return features


# -- exact binomial bounds ---------------------------------------------------------------


def _log_binomials(n: int) -> np.ndarray:
    """``log C(n, k)`` for ``k = 0 .. n``."""
    k = np.arange(1, n + 1, dtype=np.float64)
    return np.concatenate(([0.0], np.cumsum(np.log(n - k + 1) - np.log(k))))


def _upper_tail(count: int, n: int, p: float, logs: np.ndarray) -> float:
    """``Pr[X >= count]`` for ``X ~ Binomial(n, p)``."""
    if count <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    k = np.arange(count, n + 1, dtype=np.float64)
    terms = logs[count:] + k * math.log(p) + (n - k) * math.log1p(-p)
    top = float(terms.max())
    return min(1.0, math.exp(top) * float(np.exp(terms - top).sum()))


def clopper_pearson_lower(count: int, n: int, delta: float) -> float:
    """One-sided exact lower bound: ``Pr[p >= bound] >= 1 - delta`` for ``count`` of ``n``.

    It is the ``p`` with ``Pr[Binomial(n, p) >= count] = delta``, found by bisection and
    rounded down (the bound returned never exceeds the exact one by more than 1e-15).
    """
    if not 0 <= count <= n or n < 1:
        raise ValueError(f"need 0 <= count <= n and n >= 1, got count={count}, n={n}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if count == 0:
        return 0.0
    if count == n:
        return float(delta ** (1.0 / n))
    logs = _log_binomials(n)
    low, high = 0.0, 1.0
    for _ in range(100):
        middle = (low + high) / 2
        if _upper_tail(count, n, middle, logs) <= delta:
            low = middle
        else:
            high = middle
        if high - low < 1e-15:
            break
    return low


def clopper_pearson_upper(count: int, n: int, delta: float) -> float:
    """One-sided exact upper bound: ``Pr[p <= bound] >= 1 - delta`` for ``count`` of ``n``."""
    return 1.0 - clopper_pearson_lower(n - count, n, delta)


# -- the audit ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EventTest:
    """One event's estimates under both tables and whether it breaks the inequality.

    ``direction`` says which inequality is tested: ``0`` both (events chosen on the pilot),
    ``1`` only ``Pr[E|D] <= e^ε Pr[E|D']`` (a designed event likelier under ``D``), ``-1``
    only ``Pr[E|D'] <= e^ε Pr[E|D]``.
    """

    feature: str
    outcome: Hashable
    n_runs: int
    count: int
    count_neighbour: int
    lower: float
    upper: float
    lower_neighbour: float
    upper_neighbour: float
    epsilon: float
    direction: int = 0

    @classmethod
    def bounded(
        cls,
        feature: str,
        outcome: Hashable,
        counts: tuple[int, int],
        n_runs: int,
        *,
        delta: float,
        epsilon: float,
        direction: int = 0,
    ) -> EventTest:
        """The test of an event counted ``counts`` times (``D``, ``D'``), bounds at ``delta``."""
        a, b = counts
        return cls(
            feature=feature,
            outcome=outcome,
            n_runs=n_runs,
            count=a,
            count_neighbour=b,
            lower=clopper_pearson_lower(a, n_runs, delta),
            upper=clopper_pearson_upper(a, n_runs, delta),
            lower_neighbour=clopper_pearson_lower(b, n_runs, delta),
            upper_neighbour=clopper_pearson_upper(b, n_runs, delta),
            epsilon=epsilon,
            direction=direction,
        )

    @property
    def probability(self) -> float:
        """Estimated ``Pr[E | D]``."""
        return self.count / self.n_runs

    @property
    def probability_neighbour(self) -> float:
        """Estimated ``Pr[E | D']``."""
        return self.count_neighbour / self.n_runs

    @property
    def excess(self) -> float:
        """How far the bounds go past ``exp(ε)`` in the tested direction(s): ``> 0`` violates."""
        factor = math.exp(self.epsilon)
        forward = self.lower - factor * self.upper_neighbour
        backward = self.lower_neighbour - factor * self.upper
        if self.direction > 0:
            return forward
        if self.direction < 0:
            return backward
        return max(forward, backward)

    @property
    def violation(self) -> bool:
        """``lower(D) > e^ε upper(D')`` or ``lower(D') > e^ε upper(D)`` (as tested)."""
        return self.excess > 0.0

    def describe(self) -> str:
        """One line: the event, both estimated probabilities and their bounds."""
        outcome = repr(self.outcome)
        if len(outcome) > 80:
            outcome = outcome[:77] + "..."
        event = self.feature if self.direction else f"{self.feature} == {outcome}"
        return (
            f"{event}: Pr[E|D] = {self.count}/{self.n_runs} "
            f"in [{self.lower:.4f}, {self.upper:.4f}], Pr[E|D'] = {self.count_neighbour}/"
            f"{self.n_runs} in [{self.lower_neighbour:.4f}, {self.upper_neighbour:.4f}], "
            f"e^eps = {math.exp(self.epsilon):.4g}"
        )


@dataclass(frozen=True)
class Audit:
    """The tested events of one :func:`audit`, worst first."""

    epsilon: float
    alpha: float
    n_pilot: int
    n_runs: int
    tests: tuple[EventTest, ...]

    @property
    def violations(self) -> list[EventTest]:
        """The events whose bounds break ``Pr[E|D] <= e^ε Pr[E|D']`` (either direction)."""
        return [test for test in self.tests if test.violation]

    def summary(self, lines: int = 5) -> str:
        """The verdict and the worst ``lines`` events, with their measured probabilities."""
        verdict = (
            f"{len(self.violations)} of {len(self.tests)} events violate"
            if self.violations
            else f"no violation among {len(self.tests)} events"
        )
        runs = f"{self.n_pilot} pilot and " if self.n_pilot else "designed events, "
        head = (
            f"{verdict} {self.epsilon:g}-DP (alpha = {self.alpha:g}, {runs}{self.n_runs} "
            "test runs per table)"
        )
        return "\n".join([head, *("  " + t.describe() for t in self.tests[:lines])])


Release = Callable[[Any, int], Any]


def _outcomes(
    run: Release, table: Any, features: Sequence[Feature], seeds: range
) -> list[Counter[Hashable]]:
    counts: list[Counter[Hashable]] = [Counter() for _ in features]
    for seed in seeds:
        release = canonical(run(table, seed))
        for counter, feature in zip(counts, features, strict=True):
            if feature.tags:
                counter.update(set(feature(release)))
            else:
                counter[feature(release)] += 1
    return counts


def _select(
    pilot: list[Counter[Hashable]],
    pilot_neighbour: list[Counter[Hashable]],
    epsilon: float,
    max_events: int,
) -> list[tuple[int, Hashable]]:
    """The ``max_events`` pilot outcomes furthest past ``e^ε``, in a deterministic order."""
    factor = math.exp(epsilon)
    scored = []
    for index, (here, there) in enumerate(zip(pilot, pilot_neighbour, strict=True)):
        for outcome in set(here) | set(there):
            a, b = here[outcome], there[outcome]
            score = max(a - factor * b, b - factor * a)
            scored.append((-score, -(a + b), index, repr(outcome), outcome))
    scored.sort(key=lambda item: item[:4])
    return [(index, outcome) for *_, index, _, outcome in scored[:max_events]]


def audit(
    run: Release,
    table: Any,
    neighbour: Any,
    *,
    epsilon: float,
    features: Sequence[Feature],
    n_runs: int,
    n_pilot: int | None = None,
    alpha: float = 1e-3,
    max_events: int = 20,
) -> Audit:
    """Test ``Pr[E|D] <= e^ε Pr[E|D']`` (both directions) for the features' events.

    Parameters
    ----------
    run : callable
        ``run(table, seed) -> released table``; seed ``s`` must give the ``s``-th
        independent draw.
    table, neighbour : any
        Neighbouring inputs ``D`` and ``D'``.
    epsilon : float
        The guarantee the release states.
    features : sequence of Feature
        The event families (see the module docstring).
    n_runs : int
        Test runs per table (seeds ``n_pilot .. n_pilot + n_runs - 1``).
    n_pilot : int, optional
        Pilot runs per table that choose the events (seeds ``0 .. n_pilot - 1``); default
        ``n_runs // 4``, at least 10.
    alpha : float
        Chance of flagging any event of an ε-DP release.
    max_events : int
        Events kept from the pilot (the Bonferroni count).

    Returns
    -------
    Audit
        Its ``violations`` is empty when no event breaks the inequality.
    """
    _check_levels(epsilon, alpha)
    if n_runs < 1 or max_events < 1 or not features:
        raise ValueError("need n_runs >= 1, max_events >= 1 and at least one feature")
    pilot_runs = max(10, n_runs // 4) if n_pilot is None else n_pilot
    if pilot_runs < 1:
        raise ValueError(f"n_pilot must be >= 1, got {n_pilot}")
    pilot_seeds = range(pilot_runs)
    chosen = _select(
        _outcomes(run, table, features, pilot_seeds),
        _outcomes(run, neighbour, features, pilot_seeds),
        epsilon,
        max_events,
    )
    used = sorted({index for index, _ in chosen})
    test_seeds = range(pilot_runs, pilot_runs + n_runs)
    counted = _outcomes(run, table, [features[i] for i in used], test_seeds)
    counted_neighbour = _outcomes(run, neighbour, [features[i] for i in used], test_seeds)
    where = {index: position for position, index in enumerate(used)}
    delta = alpha / (4 * len(chosen))
    tests = [
        EventTest.bounded(
            features[index].name,
            outcome,
            (counted[where[index]][outcome], counted_neighbour[where[index]][outcome]),
            n_runs,
            delta=delta,
            epsilon=epsilon,
        )
        for index, outcome in chosen
    ]
    tests.sort(key=lambda t: -t.excess)
    return Audit(epsilon, alpha, pilot_runs, n_runs, tuple(tests))


def _check_levels(epsilon: float, alpha: float) -> None:
    if epsilon <= 0 or not math.isfinite(epsilon):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


# -- designed events ---------------------------------------------------------------------

Row = int | tuple[Hashable, Any]


@dataclass(frozen=True)
class Event:
    """A set of releases fixed before any run, and the table it should be likelier under.

    ``contains(release)`` says whether a canonical release is in the set. ``likelier`` is
    ``"table"`` or ``"neighbour"``: :func:`audit_events` tests ``Pr[E | likelier] <= e^ε
    Pr[E | other]`` only. ``first & second`` is the event that both hold.
    """

    name: str
    contains: Callable[[Released], bool]
    likelier: str = "table"

    def __post_init__(self) -> None:
        if self.likelier not in ("table", "neighbour"):
            raise ValueError(f"likelier must be 'table' or 'neighbour', got {self.likelier!r}")

    def __and__(self, other: Event) -> Event:
        if other.likelier != self.likelier:
            raise ValueError(
                f"both events must be likelier under the same table: {self.name} under "
                f"{self.likelier}, {other.name} under {other.likelier}"
            )
        return Event(
            f"{self.name} and {other.name}",
            lambda release: self.contains(release) and other.contains(release),
            self.likelier,
        )


def _cell(release: Released, column: Hashable, row: Row) -> Any:
    """The value at ``row`` of ``column`` (``row`` a position, or ``(key column, value)``
    for the first row whose key column holds that value); :data:`ABSENT` if there is none."""
    values = release.get(column)
    if values is None:
        return ABSENT
    if isinstance(row, tuple):
        key, wanted = row
        keys = release.get(key)
        found = [i for i, v in enumerate(keys or ()) if v == wanted]
        return values[found[0]] if found else ABSENT
    return values[row] if -len(values) <= row < len(values) else ABSENT


def _row_name(column: Hashable, row: Row) -> str:
    if isinstance(row, tuple):
        return f"{_label(column)}[{_label(row[0])} == {row[1]!r}]"
    return f"{_label(column)}[{row}]"


def at_least(column: Hashable, threshold: float, *, likelier: str, row: Row = 0) -> Event:
    """The cell holds a number ``>= threshold`` (a missing cell or a non-number does not)."""

    def contains(release: Released) -> bool:
        value = _cell(release, column, row)
        return _is_number(value) and value >= threshold

    return Event(f"{_row_name(column, row)} >= {threshold!r}", contains, likelier)


def at_most(column: Hashable, threshold: float, *, likelier: str, row: Row = 0) -> Event:
    """The cell holds a number ``<= threshold`` (a missing cell or a non-number does not)."""

    def contains(release: Released) -> bool:
        value = _cell(release, column, row)
        return _is_number(value) and value <= threshold

    return Event(f"{_row_name(column, row)} <= {threshold!r}", contains, likelier)


def equal_to(column: Hashable, value: Any, *, likelier: str, row: Row = 0) -> Event:
    """The cell holds ``value``."""

    def contains(release: Released) -> bool:
        found = _cell(release, column, row)
        return found is not ABSENT and bool(found == value)

    return Event(f"{_row_name(column, row)} == {value!r}", contains, likelier)


def audit_events(
    run: Release,
    table: Any,
    neighbour: Any,
    *,
    epsilon: float,
    events: Sequence[Event],
    n_runs: int,
    alpha: float = 1e-3,
    first_seed: int = 0,
) -> Audit:
    """Test ``Pr[E|likelier] <= e^ε Pr[E|other]`` for events fixed before any run.

    See "Designed events" in the module docstring: no pilot, one direction per event, and
    Clopper-Pearson bounds at level ``alpha / (2 m)`` for ``m`` events.

    Parameters
    ----------
    run, table, neighbour, epsilon, alpha
        As for :func:`audit`.
    events : sequence of Event
        Chosen from the mechanism's analysis, never from runs of these seeds.
    n_runs : int
        Runs per table, seeds ``first_seed .. first_seed + n_runs - 1``.
    first_seed : int
        The first seed; disjoint blocks of seeds give independent audits.

    Returns
    -------
    Audit
        With ``n_pilot`` 0; its ``violations`` is empty when no event breaks the inequality.
    """
    _check_levels(epsilon, alpha)
    if n_runs < 1 or not events:
        raise ValueError("need n_runs >= 1 and at least one event")
    if first_seed < 0:
        raise ValueError(f"first_seed must be >= 0, got {first_seed}")
    counts = {"table": [0] * len(events), "neighbour": [0] * len(events)}
    for seed in range(first_seed, first_seed + n_runs):
        for which, data in (("table", table), ("neighbour", neighbour)):
            release = canonical(run(data, seed))
            for i, event in enumerate(events):
                counts[which][i] += bool(event.contains(release))
    delta = alpha / (2 * len(events))
    tests = [
        EventTest.bounded(
            event.name,
            True,
            (counts["table"][i], counts["neighbour"][i]),
            n_runs,
            delta=delta,
            epsilon=epsilon,
            direction=1 if event.likelier == "table" else -1,
        )
        for i, event in enumerate(events)
    ]
    tests.sort(key=lambda t: -t.excess)
    return Audit(epsilon, alpha, 0, n_runs, tuple(tests))
