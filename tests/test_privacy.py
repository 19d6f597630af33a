"""The ε-DP inequality, tested on neighbouring tables for every release labelled ``proven``.

Each test first asserts the label its release states, then runs the harness
(``tests/privacy/harness.py``) on a tiny pair of bounded neighbours (one row's values
changed; DiffGen, whose guarantee is unbounded DP, gets one row removed). A large ε (1
to 4) keeps the noise small, so that a leak shows as an event that is impossible under
one table and frequent under the other, which ε-DP forbids for every ε; the number of
runs is chosen so that such an event is found (``runs > e^ε ln(4 m / alpha)`` divided by
its probability).

Those pilot-chosen events find leaks through structure; the noise's calibration is tested
apart, on the designs of ``tests/privacy/designs.py``: for every method, a pair and an
event fixed in advance where the release's privacy loss reaches its ε. Run at its stated
ε the release must pass (the event's ratio is ``e^ε``: flagged with chance at most
``alpha``); run at twice that ε and audited as the stated one, it must be flagged.
``python -m tests.privacy.power`` measures how often the second holds on other seeds.

The harness's own tests come first: it flags mechanisms that leak (a randomized response
that keeps its input too often, Laplace noise of half the stated scale, a row order that
follows the data) and does not flag correct ones whose probability ratio is exactly
``e^ε``.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import re
from collections.abc import Callable, Hashable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dpfast
from dpfast import cli, noise
from dpfast.taxonomy import Taxonomy
from tests.privacy import designs, harness

pytestmark = pytest.mark.statistical

# issue 13, case 1: ids next to one protected column; the neighbour changes the last row
ID_TABLE = pd.DataFrame({"id": [0, 1, 2, 3], "v": [1, 2, 3, 4]})
ID_NEIGHBOUR = pd.DataFrame({"id": [0, 1, 2, 3], "v": [1, 2, 3, 0]})
JOBS = Taxonomy.from_mapping(
    {"*": {"Technical": ["Tech-support", "Craft-repair"], "Other": ["Sales", "Adm-clerical"]}}
)


# one thread: three times faster on tables this small, and the draws do not depend on it
_ir_dp = functools.partial(dpfast.ir_dp, n_threads=1)


def _key(seed: int, label: str) -> np.ndarray:
    return noise.NoiseSource.from_seed(seed).key("test_privacy", label)


# -- the harness's exact binomial bounds ---------------------------------------------------


def _slow_tail(count: int, n: int, p: float) -> float:
    """``Pr[Binomial(n, p) >= count]`` with exact rationals, rounded once."""
    q = Fraction(p)
    return float(sum(math.comb(n, k) * q**k * (1 - q) ** (n - k) for k in range(count, n + 1)))


@pytest.mark.parametrize(("count", "n"), [(1, 10), (5, 10), (17, 40), (39, 40), (3, 200)])
def test_clopper_pearson_lower_bound_solves_the_binomial_tail(count: int, n: int) -> None:
    delta = 0.01
    got = harness.clopper_pearson_lower(count, n, delta)
    assert _slow_tail(count, n, got) == pytest.approx(delta, rel=1e-9)
    # just above the bound, the tail is already past delta: it is the largest such p
    assert _slow_tail(count, n, min(1.0, got * (1 + 1e-9))) > delta


def test_clopper_pearson_matches_closed_forms_and_a_published_interval() -> None:
    n, delta = 25, 0.001
    assert harness.clopper_pearson_lower(n, n, delta) == pytest.approx(delta ** (1 / n))
    assert harness.clopper_pearson_upper(0, n, delta) == pytest.approx(1 - delta ** (1 / n))
    assert harness.clopper_pearson_lower(0, n, delta) == 0.0
    assert harness.clopper_pearson_upper(n, n, delta) == 1.0
    # the exact two-sided 95% interval of 5 successes in 10 trials is [0.1871, 0.8129]
    assert harness.clopper_pearson_lower(5, 10, 0.025) == pytest.approx(0.1871, abs=1e-4)
    assert harness.clopper_pearson_upper(5, 10, 0.025) == pytest.approx(0.8129, abs=1e-4)


def test_clopper_pearson_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="count"):
        harness.clopper_pearson_lower(11, 10, 0.01)
    with pytest.raises(ValueError, match="delta"):
        harness.clopper_pearson_upper(1, 10, 0.0)


# -- the harness's event families ----------------------------------------------------------


def test_features_read_the_canonical_form_by_typed_label() -> None:
    frame = pd.DataFrame({"id": [7, 8, 9, 6], "v": [2.0, 1.0, 2.0, 1.5]})
    frame[0] = [1, 1, 1, 1]
    frame["0"] = [3, 1, 3, 2]
    release = harness.canonical(frame)
    got = {
        "rows": harness.row_partition("v")(release),
        "grouping": harness.grouping("id", "v")(release),
        "ranks": harness.grouping("id", "v", ranks=True)(release),
        "linkage": harness.linkage("id", "v")(release),
        "comparison": sorted(harness.comparison(0, "0")(release)),
        "differences": harness.differences(0, "0")(release),
        "cells": sorted(harness.cells("id")(release)),
        "positions": harness.positions("id", 9)(release),
        "order": harness.rank_order("v")(release),
        "integers v": harness.all_integers("v")(release),
        "integers id": harness.all_integers("id")(release),
        "multiset": harness.multiset("v")(release),
        "bins": harness.bins("v", [1.5, 2.0])(release),
        "missing": harness.multiset("w")(release),
    }
    expected = {
        "rows": ((0, 2), (1,), (3,)),
        "grouping": ((6,), (7, 9), (8,)),
        "ranks": ((0,), (1, 3), (2,)),
        "linkage": ((0, 1), (1, 2), (2, 0), (3, 2)),
        "comparison": [(0, -1), (1, 0), (2, -1), (3, -1)],
        "differences": {-2.0, 0.0, -1.0},
        "cells": [(0, 7), (1, 8), (2, 9), (3, 6)],
        "positions": (2,),
        "order": (2, 0, 2, 1),
        "integers v": False,
        "integers id": True,
        "multiset": (1.0, 1.5, 2.0, 2.0),
        "bins": (0, 1, 2, 2),
        "missing": harness.ABSENT,
    }
    assert got == expected


def test_standard_features_cover_every_family_and_pair() -> None:
    features = harness.standard_features(["a", "b"], edges={"a": [0.0]}, values={"b": [1]})
    names = [f.name for f in features]
    for expected in (
        "row_partition('a')",
        "rank_order('b')",
        "all_integers('a')",
        "multiset('b')",
        "bins('a', [0.0])",
        "positions('b' == 1)",
        "grouping(ranks of 'a' by 'b')",
        "grouping(ranks of 'b' by 'a')",
        "linkage('a', 'b')",
        "comparison('a', 'b')",
        "differences('a' - 'b')",
        "cells('a')",
    ):
        assert expected in names
    assert len(names) == len(set(names))


def test_labels_keep_their_type_and_tags_count_once_per_run() -> None:
    release = harness.canonical({0: [1, 2], "0": [0, 1]})
    assert harness.multiset(0)(release) == (1, 2)
    assert harness.multiset("0")(release) == (0, 1)
    assert harness.multiset(False)(release) == harness.ABSENT  # False == 0, but not a label
    # both rows differ by 1: one tag, counted once in each of the 30 runs
    audit = harness.audit(
        lambda table, seed: table,
        {"a": [1, 2], "b": [0, 1]},
        {"a": [1, 2], "b": [0, 1]},
        epsilon=1.0,
        features=[harness.differences("a", "b")],
        n_runs=30,
    )
    assert [(t.outcome, t.count, t.count_neighbour) for t in audit.tests] == [(1.0, 30, 30)]
    assert not audit.violations


# -- the harness flags broken mechanisms and not correct ones ------------------------------


def _response(keep: Fraction) -> Callable[[Any, int], Any]:
    """Randomized response on the one bit ``x``: keep it with probability ``keep``."""

    def run(table: Any, seed: int) -> Any:
        bits = np.asarray(table["x"], dtype=np.int64)
        kept = noise.bernoulli_rational(
            _key(seed, "keep"), keep.numerator, keep.denominator, bits.shape[0]
        )
        return {"x": np.where(kept, bits, 1 - bits)}

    return run


def _laplace(scale: int) -> Callable[[Any, int], Any]:
    """The count ``v`` plus exact discrete Laplace noise of scale ``scale``."""

    def run(table: Any, seed: int) -> Any:
        values = np.asarray(table["v"], dtype=np.int64)
        return {"v": values + noise.discrete_laplace(_key(seed, "laplace"), scale, values.size)}

    return run


def test_harness_passes_randomized_response_at_its_exact_ratio() -> None:
    # keep with probability 3/4: Pr[1 | x=1] / Pr[1 | x=0] = 3 = e^ε exactly
    audit = harness.audit(
        _response(Fraction(3, 4)),
        {"x": [1]},
        {"x": [0]},
        epsilon=math.log(3),
        features=harness.standard_features(["x"]),
        n_runs=4000,
    )
    assert not audit.violations, audit.summary()
    assert {t.outcome for t in audit.tests} >= {(0,), (1,)}


def test_harness_flags_randomized_response_that_keeps_too_often() -> None:
    # stated ln 3, but keeping with probability 7/8 makes the ratio 7
    audit = harness.audit(
        _response(Fraction(7, 8)),
        {"x": [1]},
        {"x": [0]},
        epsilon=math.log(3),
        features=harness.standard_features(["x"]),
        n_runs=1000,
    )
    assert audit.violations, audit.summary()
    worst = audit.violations[0]
    # the flagged event is "x is released as 1" (or as 0): 7/8 against 1/8
    assert sorted([worst.probability, worst.probability_neighbour]) == pytest.approx(
        [1 / 8, 7 / 8], abs=0.04
    )


@pytest.mark.parametrize(("scale", "leaks"), [(2, False), (1, True)])
def test_harness_flags_laplace_noise_of_half_the_stated_scale(scale: int, leaks: bool) -> None:
    # a sensitivity-1 count with scale 2 is 0.5-DP; scale 1 is only 1-DP
    audit = harness.audit(
        _laplace(scale),
        {"v": [0]},
        {"v": [1]},
        epsilon=0.5,
        features=[harness.bins("v", [-2, 1, 4])],
        n_runs=3000,
    )
    assert bool(audit.violations) == leaks, audit.summary()


def _shuffled_response(sort_rows: bool) -> Callable[[Any, int], Any]:
    """Randomized response (keep 3/4) per row, ids kept in their rows, rows in random order
    (correct) or in the order of the true values (a leak through row positions)."""

    def run(table: Any, seed: int) -> Any:
        released = _response(Fraction(3, 4))(table, seed)["x"]
        ids = np.asarray(table["id"])
        if sort_rows:
            order = np.argsort(np.asarray(table["x"]), kind="stable")
        else:
            order = noise.permutation(_key(seed, "rows"), ids.shape[0])
        return {"id": ids[order], "x": released[order]}

    return run


@pytest.mark.parametrize(("sort_rows", "leaks"), [(False, False), (True, True)])
def test_harness_flags_a_row_order_that_follows_the_data(sort_rows: bool, leaks: bool) -> None:
    table = {"id": [0, 1, 2], "x": [1, 0, 0]}
    neighbour = {"id": [0, 1, 2], "x": [0, 0, 0]}
    audit = harness.audit(
        _shuffled_response(sort_rows),
        table,
        neighbour,
        epsilon=math.log(3),
        features=harness.standard_features(["id", "x"], values={"id": [0, 1, 2]}),
        n_runs=600,
    )
    assert bool(audit.violations) == leaks, audit.summary()


def test_audit_rejects_bad_arguments() -> None:
    run = _response(Fraction(3, 4))
    features = harness.standard_features(["x"])
    with pytest.raises(ValueError, match="epsilon"):
        harness.audit(run, {"x": [1]}, {"x": [0]}, epsilon=0.0, features=features, n_runs=10)
    with pytest.raises(ValueError, match="alpha"):
        harness.audit(
            run, {"x": [1]}, {"x": [0]}, epsilon=1.0, features=features, n_runs=10, alpha=1.0
        )


# -- designed events: one direction, no pilot ----------------------------------------------


def test_designed_events_read_cells_by_position_or_key() -> None:
    release = harness.canonical({"y": ["a", "b"], "count": [3, 0], "c": ["*", "*"]})
    got = {
        "by key": harness.at_least("count", 1, likelier="table", row=("y", "a")),
        "other key": harness.at_least("count", 1, likelier="table", row=("y", "b")),
        "no such key": harness.at_least("count", 0, likelier="table", row=("y", "z")),
        "last row": harness.at_most("count", 0, likelier="table", row=-1),
        "no such row": harness.at_most("count", 9, likelier="table", row=2),
        "not a number": harness.at_least("c", 0, likelier="table"),
        "missing column": harness.equal_to("x", "a", likelier="table"),
        "equal": harness.equal_to("c", "*", likelier="table", row=1),
        "both": harness.equal_to("y", "a", likelier="table")
        & harness.at_least("count", 3, likelier="table"),
    }
    expected = {
        "by key": True,
        "other key": False,
        "no such key": False,
        "last row": True,
        "no such row": False,
        "not a number": False,
        "missing column": False,
        "equal": True,
        "both": True,
    }
    assert {name: event.contains(release) for name, event in got.items()} == expected
    assert got["by key"].name == "'count'['y' == 'a'] >= 1"
    with pytest.raises(ValueError, match="same table"):
        _ = got["by key"] & harness.equal_to("y", "a", likelier="neighbour")
    with pytest.raises(ValueError, match="likelier"):
        harness.Event("e", lambda release: True, likelier="both")


def test_a_designed_event_is_tested_in_its_direction_only() -> None:
    # E is 20 times likelier under D' than under D: a violation of "D' <= e^ε D" only
    audit = harness.audit_events(
        lambda table, seed: {"x": [int(seed % 20 == 0 or table == "D'")]},
        "D",
        "D'",
        epsilon=1.0,
        events=[
            harness.equal_to("x", 1, likelier="neighbour"),
            harness.equal_to("x", 1, likelier="table"),
        ],
        n_runs=400,
    )
    got = [(t.feature, t.direction, t.count, t.count_neighbour, t.violation) for t in audit.tests]
    assert got == [("'x'[0] == 1", -1, 20, 400, True), ("'x'[0] == 1", 1, 20, 400, False)]
    # two events: each bound at alpha / 4
    assert audit.tests[0].upper == harness.clopper_pearson_upper(20, 400, 1e-3 / 4)
    assert "designed events" in audit.summary()


_RESPONSE_PAIR = ({"x": [1]}, {"x": [0]}, math.log(3), harness.equal_to("x", 1, likelier="table"))
_LAPLACE_PAIR = ({"v": [0]}, {"v": [1]}, 0.5, harness.at_least("v", 1, likelier="neighbour"))


@pytest.mark.parametrize(
    ("run", "pair", "n_runs", "leaks"),
    [
        # stated ln 3: keeping 3/4 is exactly that ratio, keeping 9/10 is 9 = e^(2 ln 3)
        (_response(Fraction(3, 4)), _RESPONSE_PAIR, 300, False),
        (_response(Fraction(9, 10)), _RESPONSE_PAIR, 300, True),
        # the tail "v >= 1" holds Pr[Z >= 0] under v = 1 and e^(-1/scale) of it under v = 0:
        # scale 2 is the stated 0.5, scale 1 twice that; 600 runs where the pilot needs 3000
        (_laplace(2), _LAPLACE_PAIR, 600, False),
        (_laplace(1), _LAPLACE_PAIR, 600, True),
    ],
    ids=["response-exact", "response-twice", "laplace-exact", "laplace-twice"],
)
def test_a_designed_event_flags_twice_the_stated_epsilon_and_passes_the_exact_ratio(
    run: Callable[[Any, int], Any], pair: tuple[Any, ...], n_runs: int, leaks: bool
) -> None:
    table, neighbour, epsilon, event = pair
    audit = harness.audit_events(
        run, table, neighbour, epsilon=epsilon, events=[event], n_runs=n_runs
    )
    assert bool(audit.violations) == leaks, audit.summary()


def test_audit_events_rejects_bad_arguments() -> None:
    event = harness.equal_to("x", 1, likelier="table")
    run = _response(Fraction(3, 4))
    for bad, match in (
        ({"epsilon": 0.0}, "epsilon"),
        ({"n_runs": 0}, "n_runs"),
        ({"events": []}, "event"),
        ({"alpha": 0.0}, "alpha"),
        ({"first_seed": -1}, "first_seed"),
    ):
        arguments = {"epsilon": 1.0, "events": [event], "n_runs": 10, **bad}
        with pytest.raises(ValueError, match=match):
            harness.audit_events(run, {"x": [1]}, {"x": [0]}, **arguments)


# -- every proven release: 2x understatement flagged, honest release passed ---------------


def _designs() -> list[Any]:
    return [
        pytest.param(design, id=design.name, marks=[pytest.mark.slow] if design.slow else [])
        for design in designs.DESIGNS
    ]


def test_every_proven_method_has_a_design() -> None:
    methods = {design.name.split("-")[0] for design in designs.DESIGNS}
    assert methods == {"ir_dp", "laplace_dp", "mdav_dp", "diffgen", "randomized_response"}
    assert {"ir_dp-categorical", "mdav_dp-categorical"} <= {d.name for d in designs.DESIGNS}


@pytest.mark.parametrize("design", _designs())
def test_release_at_its_stated_epsilon_passes_the_event_where_its_loss_is_epsilon(
    design: designs.Design,
) -> None:
    # the event's ratio is at most e^ε (Laplace noise: e^ε), flagged with chance <= alpha
    audit = design.audit()
    assert not audit.violations, audit.summary()


@pytest.mark.parametrize("design", _designs())
def test_release_at_twice_its_stated_epsilon_is_flagged(design: designs.Design) -> None:
    # run at 2ε, audited as ε: the understatement of issue 30, item 10
    audit = design.audit(factor=2.0)
    assert audit.violations, audit.summary()
    assert audit.violations[0].feature == design.event.name


# -- the releases labelled "proven" --------------------------------------------------------


def _proven(release: Any) -> Any:
    """The release's data, after checking that its report states a proven guarantee."""
    assert release.report.guarantee_level == "proven", release.report.guarantee
    return release.data


def _arrow(table: Any) -> Any:
    """A pandas frame with string labels as an Arrow table, else ``table`` itself.

    Runs are the harness's cost and an Arrow table is released in about a third less time
    than the same pandas frame (1.2-1.8 ms against 1.8-2.7 ms per release on tables this
    small, 2-core VM, 2026-12-06); the release is the same, seed for seed. Labels that
    are not strings (the twins ``0`` and ``"0"``) keep the frame.
    """
    if isinstance(table, pd.DataFrame) and all(isinstance(c, str) for c in table.columns):
        return pa.Table.from_pandas(table, preserve_index=False)
    return table


def _check(
    call: Callable[[Any, int], Any],
    table: Any,
    neighbour: Any,
    *,
    epsilon: float,
    columns: list[Hashable],
    n_runs: int,
    edges: dict[Hashable, list[float]] | None = None,
    values: dict[Hashable, list[Any]] | None = None,
) -> harness.Audit:
    """Check both labels, then audit ``call`` (which returns a Release) on the pair.

    The audit's runs take the pair as Arrow tables (:func:`_arrow`); the first seed checks
    that each gives the very release of the frame.
    """
    fast = _arrow(table), _arrow(neighbour)
    for frame, arrow in zip((table, neighbour), fast, strict=True):
        released = harness.canonical(_proven(call(frame, 0)))
        assert harness.canonical(_proven(call(arrow, 0))) == released
    return harness.audit(
        lambda data, seed: call(data, seed).data,
        *fast,
        epsilon=epsilon,
        features=harness.standard_features(columns, edges=edges, values=values),
        n_runs=n_runs,
    )


def test_ir_dp_one_column_linkage_columns_is_dp() -> None:
    # the copied id column follows the shared row order, which the protected column's
    # own order does not depend on: ids must not show the rank groups
    audit = _check(
        lambda data, seed: _ir_dp(
            data,
            k=2,
            epsilon=2.0,
            bounds={"v": (0, 4)},
            columns=["v"],
            linkage="columns",
            seed=seed,
        ),
        ID_TABLE,
        ID_NEIGHBOUR,
        epsilon=2.0,
        columns=["id", "v"],
        n_runs=300,
        edges={"v": [1.0, 2.0, 3.0]},
        values={"id": [0, 3]},
    )
    assert not audit.violations, audit.summary()


def test_ir_dp_one_column_in_random_row_order_is_dp() -> None:
    audit = _check(
        lambda data, seed: _ir_dp(data, k=2, epsilon=2.0, bounds={"v": (0, 4)}, seed=seed),
        pd.DataFrame({"v": [1, 2, 3, 4]}),
        pd.DataFrame({"v": [1, 2, 3, 0]}),
        epsilon=2.0,
        columns=["v"],
        n_runs=300,
    )
    assert not audit.violations, audit.summary()


def test_ir_dp_two_columns_linkage_columns_is_dp() -> None:
    audit = _check(
        lambda data, seed: _ir_dp(
            data,
            k=2,
            epsilon=4.0,
            bounds={"a": (0, 4), "b": (0, 4)},
            linkage="columns",
            seed=seed,
        ),
        pd.DataFrame({"a": [1, 2, 3, 4], "b": [4, 3, 2, 1]}),
        pd.DataFrame({"a": [1, 2, 3, 0], "b": [4, 3, 2, 4]}),
        epsilon=4.0,
        columns=["a", "b"],
        n_runs=300,
    )
    assert not audit.violations, audit.summary()


def test_ir_dp_categorical_with_proven_sensitivity_is_dp() -> None:
    audit = _check(
        lambda data, seed: _ir_dp(
            data, k=2, epsilon=4.0, taxonomies={"job": JOBS}, sensitivity="proven", seed=seed
        ),
        pd.DataFrame({"job": ["Sales", "Sales", "Tech-support", "Craft-repair"]}),
        pd.DataFrame({"job": ["Sales", "Sales", "Tech-support", "Adm-clerical"]}),
        epsilon=4.0,
        columns=["job"],
        n_runs=200,
    )
    assert not audit.violations, audit.summary()


def test_ir_dp_mixed_columns_linkage_columns_is_dp() -> None:
    audit = _check(
        lambda data, seed: _ir_dp(
            data,
            k=2,
            epsilon=4.0,
            bounds={"age": (0, 60)},
            taxonomies={"job": JOBS},
            sensitivity="proven",
            linkage="columns",
            seed=seed,
        ),
        pd.DataFrame(
            {"job": ["Sales", "Sales", "Tech-support", "Craft-repair"], "age": [20, 25, 50, 55]}
        ),
        pd.DataFrame({"job": ["Sales", "Sales", "Tech-support", "Sales"], "age": [20, 25, 50, 0]}),
        epsilon=4.0,
        columns=["job", "age"],
        n_runs=150,
    )
    assert not audit.violations, audit.summary()


def test_laplace_dp_is_dp_with_an_unprotected_id_column() -> None:
    # each row's output depends on that row alone, so ids next to it leak nothing more
    audit = _check(
        lambda data, seed: dpfast.laplace_dp(
            data, epsilon=4.0, bounds={"a": (0, 4), "b": (0, 4)}, columns=["a", "b"], seed=seed
        ),
        pd.DataFrame({"id": [0, 1, 2], "a": [0, 2, 4], "b": [4, 2, 0]}),
        pd.DataFrame({"id": [0, 1, 2], "a": [0, 2, 0], "b": [4, 2, 4]}),
        epsilon=4.0,
        columns=["id", "a", "b"],
        n_runs=300,
        values={"id": [0, 2]},
    )
    assert not audit.violations, audit.summary()


def test_mdav_dp_numeric_is_dp() -> None:
    audit = _check(
        lambda data, seed: dpfast.mdav_dp(
            data, k=2, epsilon=4.0, bounds={"a": (0, 4), "b": (0, 4)}, seed=seed
        ),
        pd.DataFrame({"a": [0, 1, 3, 4], "b": [0, 1, 3, 4]}),
        pd.DataFrame({"a": [0, 1, 3, 0], "b": [0, 1, 3, 0]}),
        epsilon=4.0,
        columns=["a", "b"],
        n_runs=300,
    )
    assert not audit.violations, audit.summary()


def test_mdav_dp_categorical_is_dp() -> None:
    audit = _check(
        lambda data, seed: dpfast.mdav_dp(
            data, k=2, epsilon=4.0, bounds={"age": (0, 60)}, taxonomies={"job": JOBS}, seed=seed
        ),
        pd.DataFrame(
            {"job": ["Sales", "Sales", "Tech-support", "Craft-repair"], "age": [20, 25, 50, 55]}
        ),
        pd.DataFrame({"job": ["Sales", "Sales", "Tech-support", "Sales"], "age": [20, 25, 50, 20]}),
        epsilon=4.0,
        columns=["job", "age"],
        n_runs=200,
    )
    assert not audit.violations, audit.summary()


def test_diffgen_is_dp_for_one_record_removed() -> None:
    table = pd.DataFrame(
        {
            "job": ["Sales", "Sales", "Tech-support", "Craft-repair", "Adm-clerical"],
            "age": [20, 30, 40, 50, 60],
            "y": ["a", "b", "a", "b", "a"],
        }
    )

    def call(data: Any, seed: int) -> Any:
        release = dpfast.diffgen(
            data,
            target="y",
            epsilon=2.0,
            steps=1,
            taxonomies={"job": JOBS},
            bounds={"age": (0, 80)},
            classes=["a", "b"],
            seed=seed,
        )
        assert release.report.guarantee_level == "proven", release.report.guarantee
        return release.counts

    neighbour = table.iloc[:4]
    for frame in (table, neighbour):
        assert harness.canonical(call(_arrow(frame), 0)) == harness.canonical(call(frame, 0))
    audit = harness.audit(
        call,
        _arrow(table),
        _arrow(neighbour),
        epsilon=2.0,
        features=harness.standard_features(["job", "age", "y", "count"]),
        n_runs=150,
    )
    assert not audit.violations, audit.summary()


# -- issue 13, case 1: unprotected columns re-link the protected groups --------------------


def _grouping_method(name: str) -> Callable[..., Any]:
    return {"ir_dp": _ir_dp, "mdav_dp": dpfast.mdav_dp}[name]


@pytest.mark.parametrize("method", ["ir_dp", "mdav_dp"])
def test_unprotected_columns_do_not_show_the_groups(method: str) -> None:
    function = _grouping_method(method)
    audit = _check(
        lambda data, seed: function(
            data, k=2, epsilon=2.0, bounds={"v": (0, 4)}, columns=["v"], seed=seed
        ),
        ID_TABLE,
        ID_NEIGHBOUR,
        epsilon=2.0,
        columns=["id", "v"],
        n_runs=300,
        values={"id": [0, 3]},
    )
    assert not audit.violations, audit.summary()


def _unprotected_call(method: str, mode: str) -> Callable[[Any, int], Any]:
    """``method`` on the id table with ``unprotected=mode``; skips while it has no such option."""
    function = _grouping_method(method)
    if "unprotected" not in inspect.signature(function).parameters:
        pytest.skip(f"{method} has no unprotected= parameter yet")
    # ir_dp keeps rows whole only under the record linkage (one column: still "proven");
    # under linkage="columns" no output row is an input record, and "keep" is refused
    extra = {"linkage": "records"} if method == "ir_dp" else {}

    def call(data: Any, seed: int) -> Any:
        return function(
            data,
            k=2,
            epsilon=2.0,
            bounds={"v": (0, 4)},
            columns=["v"],
            unprotected=mode,
            seed=seed,
            **extra,
        )

    return call


@pytest.mark.parametrize("method", ["ir_dp", "mdav_dp"])
def test_unprotected_keep_is_not_proven_and_shows_the_groups(method: str) -> None:
    call = _unprotected_call(method, "keep")
    release = call(ID_TABLE, 0)
    assert release.report.guarantee_level != "proven"
    # the audit's Arrow tables (_arrow) give the very release of the frames
    assert harness.canonical(call(_arrow(ID_TABLE), 0).data) == harness.canonical(release.data)
    audit = harness.audit(
        lambda data, seed: call(data, seed).data,
        _arrow(ID_TABLE),
        _arrow(ID_NEIGHBOUR),
        epsilon=2.0,
        features=harness.standard_features(["id", "v"], values={"id": [0, 3]}),
        n_runs=300,
    )
    assert audit.violations, audit.summary()


@pytest.mark.parametrize("method", ["ir_dp", "mdav_dp"])
def test_unprotected_shuffle_releases_ids_apart_from_the_groups(method: str) -> None:
    # the neighbour changes a protected value only, so ids in an independent order are
    # the same under both tables: no event may separate them
    call = _unprotected_call(method, "shuffle")
    release = call(ID_TABLE, 0)
    assert release.report.guarantee_level == "protected_only"
    assert sorted(harness.canonical(release.data).get("id") or ()) == [0, 1, 2, 3]
    assert harness.canonical(call(_arrow(ID_TABLE), 0).data) == harness.canonical(release.data)
    audit = harness.audit(
        lambda data, seed: call(data, seed).data,
        _arrow(ID_TABLE),
        _arrow(ID_NEIGHBOUR),
        epsilon=2.0,
        features=harness.standard_features(["id", "v"], values={"id": [0, 3]}),
        n_runs=300,
    )
    assert not audit.violations, audit.summary()


# -- issue 13, case 3: the CLI takes integer-ness from the schema --------------------------


def _cli_release(
    folder: Path, method: str, values: list[float], extra: list[str]
) -> Callable[[Any, int], Any]:
    """Write ``values`` as a CSV column declared "float"; return ``run(_, seed)`` via the CLI."""
    folder.mkdir()
    source = folder / "in.csv"
    source.write_text("v\n" + "".join(f"{value:g}\n" for value in values))
    schema = folder / "schema.json"
    schema.write_text(json.dumps({"columns": {"v": {"type": "float", "bounds": [0, 5]}}}))
    output = folder / "out.csv"
    report = folder / "out.csv.public-report.json"

    def run(_: Any, seed: int) -> Any:
        argv = ["release", method, str(source), "-o", str(output), "--schema", str(schema)]
        seeded = ["--epsilon", "1", "--seed", str(seed), "--quiet", "--force"]  # one run per seed
        code = cli.main([*argv, *extra, *seeded])
        assert code == 0
        level = json.loads(report.read_text())["guarantee_level"]
        assert level == "proven", f"{method} on {values}: {level}"
        return pd.read_csv(output, dtype={"v": str}).astype({"v": float})

    return run


@pytest.mark.parametrize(
    ("method", "extra"), [("ir-dp", ["--k", "2"]), ("laplace", [])], ids=["ir-dp", "laplace"]
)
def test_cli_float_column_of_whole_numbers_is_not_rounded(
    tmp_path: Path, method: str, extra: list[str]
) -> None:
    whole = _cli_release(tmp_path / "whole", method, [1, 2, 3, 4], extra)
    fractional = _cli_release(tmp_path / "fractional", method, [1, 2, 3, 4.5], extra)
    audit = harness.audit(
        lambda table, seed: (whole if table == "D" else fractional)(table, seed),
        "D",
        "D'",
        epsilon=1.0,
        features=[harness.all_integers("v"), harness.multiset("v"), harness.cells("v")],
        n_runs=100,
        max_events=8,
    )
    assert not audit.violations, audit.summary()


@pytest.mark.parametrize("method", ["ir_dp", "laplace_dp"])
def test_float_column_of_whole_numbers_is_dp_through_the_api(method: str) -> None:
    # what the command line should do: a float column stays float, whole values or not
    def call(data: Any, seed: int) -> Any:
        if method == "ir_dp":
            return _ir_dp(data, k=2, epsilon=1.0, bounds={"v": (0, 5)}, seed=seed)
        return dpfast.laplace_dp(data, epsilon=1.0, bounds={"v": (0, 5)}, seed=seed)

    audit = _check(
        call,
        pd.DataFrame({"v": [1.0, 2.0, 3.0, 4.0]}),
        pd.DataFrame({"v": [1.0, 2.0, 3.0, 4.5]}),
        epsilon=1.0,
        columns=["v"],
        n_runs=100,
    )
    assert not audit.violations, audit.summary()


# -- issue 13, case 4: column labels 0 and "0" get distinct noise --------------------------

TWIN_TABLE = pd.DataFrame({0: [1.0, 2.0, 3.0, 4.0], "0": [4.0, 3.0, 2.0, 1.0]})
TWIN_NEIGHBOUR = pd.DataFrame({0: [1.0, 2.0, 3.0, 4.0], "0": [1.0, 3.0, 2.0, 1.0]})
TWIN_BOUNDS = {0: (0, 4), "0": (0, 4)}


def _refused(call: Callable[[Any, int], Any]) -> bool:
    """Whether the release refuses the twin labels with a clear ValueError."""
    try:
        call(TWIN_TABLE, 0)
    except ValueError as error:
        message = str(error)
        assert re.search("column", message, re.IGNORECASE), message
        # a clear message tells the labels apart, so it quotes the string one
        assert "'0'" in message or '"0"' in message, message
        return True
    return False


@pytest.mark.parametrize(
    ("call", "n_runs"),
    [
        (
            lambda data, seed: _ir_dp(
                data, k=2, epsilon=2.0, bounds=TWIN_BOUNDS, linkage="columns", seed=seed
            ),
            300,
        ),
        (
            lambda data, seed: dpfast.laplace_dp(data, epsilon=2.0, bounds=TWIN_BOUNDS, seed=seed),
            500,
        ),
        (
            lambda data, seed: dpfast.mdav_dp(
                data, k=2, epsilon=2.0, bounds=TWIN_BOUNDS, seed=seed
            ),
            600,
        ),
    ],
    ids=["ir_dp-columns", "laplace_dp", "mdav_dp"],
)
def test_columns_0_and_str_0_get_independent_noise(
    call: Callable[[Any, int], Any], n_runs: int
) -> None:
    # shared noise and order show as linked ranks (ir_dp), as rows where the two columns
    # are equal or differ by an exact amount (laplace_dp, mdav_dp)
    if _refused(call):
        return
    audit = _check(
        call,
        TWIN_TABLE,
        TWIN_NEIGHBOUR,
        epsilon=2.0,
        columns=[0, "0"],
        n_runs=n_runs,
    )
    assert not audit.violations, audit.summary()
