"""For each proven release, a neighbouring pair and an event where its privacy loss is ε.

A :class:`Design` is a case for :func:`~tests.privacy.harness.audit_events`. Run at the ε
it states, the release puts probabilities in a ratio of ``e^ε`` on the event (a hair
below it, or for the exponential mechanism ``(1 + e^ε) / 2``): at most the boundary of the
inequality, which only the harness's ``alpha`` can flag. Run at twice that ε while the
audit assumes the stated one (a 2x understatement), the ratio is ``e^(2ε)`` (``(1 +
e^(2ε)) / 2``), and the design's ``n_runs`` flag it in almost every block of seeds: the
exact binomial power for independent runs is at least 0.9998 for each, and ``python -m
tests.privacy.power`` measures the share on the real releases, on blocks of seeds that the
suite does not use.

Why these pairs and events
--------------------------
The power of a test of ``Pr[E|T] <= e^ε Pr[E|T']`` comes from an event whose ratio under
the understatement is far past ``e^ε`` while both probabilities stay large, so that few
runs pin them down. For every release here the tables are as small as the method allows,
so that one record moves the one group's released value by the whole sensitivity.

- Laplace noise on a group mean (``ir_dp``, ``mdav_dp``, numeric): ``k = n = 2`` records in
  one rank group or cluster, bounds ``(0, 4)``; one record moves from the lower to the
  upper bound, so the mean moves from 2 to 4, the sensitivity ``Δ / k``. The event "row 0
  is released at the upper bound" (outputs are clamped there) is the noise's upper tail
  beyond both means: its probability is about 1/2 under the neighbour and ``e^-ε'`` of
  that under the table, ``ε'`` below ε by a relative ``2**-38`` (the scale also covers one
  grid step of rounding per group). More groups would split the loss between them (Lemma
  1 bounds the sum of their shifts) and make the joint tail rarer.
- Plain per-cell Laplace (``laplace_dp``): one row moved from bound to bound, the same
  event.
- The split of ε over columns: two columns of one record move together, each column's
  noise spends ``ε / 2``, and the event is the joint tail, probability 1/4 and ratio
  ``e^ε``. A release that gives each column the whole ε is a 2x understatement that one
  column alone would not show.
- Shares of ε by weight (``epsilon_weights``): the same two columns, one weighted three
  times the other, so their noise spends ``3ε / 4`` and ``ε / 4``; the joint tail's ratio
  is still ``e^ε``. A release that gave the heavy column the whole ε, or took the weights
  unnormalised, would be flagged at the stated ε; one at twice it is flagged as above.
- A public transform (``transforms={0: "log"}``): the same pair on the ``log1p`` scale,
  where the group's mean moves by the whole transformed width over ``k``; the event is the
  release at the upper bound, which the mapping back keeps there (post-processing).
- The exponential mechanism of categorical columns (``ir_dp``, ``mdav_dp``), quality
  ``-Σ distance`` with the proven sensitivity ``n_groups Δq``: a two-leaf taxonomy, so that
  the one distance is ``Δq``, and one group of ``k = 2``. The table holds ``a, b``, the
  neighbour ``b, b``; the event "``a`` is released" has probability 1/2 under the table and
  ``1 / (1 + e^ε)`` under the neighbour. Its ratio ``(1 + e^ε) / 2`` stays below ``e^ε``
  (the mechanism's loss nears ε only where ``a`` is improbable), and a stated ε of 2 makes
  the most of it: run at 4, the ratio is ``(1 + e^4) / 2 = e^3.3``, against ``e^2``.
- Noisy counts (``diffgen``, unbounded DP): no numeric predictor and ``steps=0``, so the
  counts get the whole ε; the neighbour drops the one record of class ``a``. The event
  "the count of class ``a`` is at least 1" is the two-sided geometric noise's tail: ``1 /
  (1 + e^-ε)`` under the table, ``e^-ε`` of that under the neighbour.
- Bounds chosen with DP (``laplace_dp`` with a :class:`~dpfast.DPBounds`, the upper bound
  at the median of two records, outer range ``(0, 4)``): the design audits the chosen
  bound (a DP output the public report states) against the bounds' own ε, the release's
  ``epsilon_share`` of it (the run's ε is ``ε / share``, so a 2x understatement doubles
  both). The table holds ``0, 1/2``, the neighbour ``4, 1/2``. Every candidate up to 1/2
  has quality 0 under the table and -1 under the neighbour, every one above 1/2 the
  opposite; with ``N1 = 896`` candidates below 1/2 and ``N2 = 96`` above, the event "the
  upper bound is above 1/2" has the ratio ``e^(ε/2) (N1 + N2 e^(-ε/2)) / (N1 e^(-ε/2) +
  N2)``, which nears ``e^ε`` as ``N1 / N2`` grows (the exponential mechanism's two halves of
  ε: the candidate's own quality and the normaliser): ``e^1.78`` at ε = 2, against
  ``e^3.6`` at twice it, with probabilities 0.44 and 0.014: the rarer one needs 1,000 runs
  for the power the other designs have.
- Randomized response (local DP of one column): one record, domain ``a, b``; the event
  "``a`` is released" has probability ``e^ε / (1 + e^ε)`` when the record is ``a`` and
  ``1 / (1 + e^ε)`` when it is ``b``. Two categories give the largest probabilities for the
  ratio.

The stated ε of each design is chosen for power at its ``n_runs``: a small ε leaves
``e^(2ε)`` close to ``e^ε``, a large one makes the rarer probability, ``e^(-2ε)`` of the
other, too small to bound. The geometric tails (counts, randomized response) put more
than half of their mass on the event and need the fewest runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa

import dpfast
from dpfast.taxonomy import Taxonomy
from tests.privacy import harness

#: The smallest taxonomy: two leaves at the one (largest) distance from each other.
TWO_LEAVES = Taxonomy.from_mapping({"*": ["a", "b"]})
BOUNDS = (0.0, 4.0)


@dataclass(frozen=True)
class Design:
    """A release, a neighbouring pair, the event where its loss is ε, and its run count.

    ``release(data, *, epsilon, seed)`` returns the method's release object, whose
    ``output`` attribute holds the released table and whose report must state ``level``.
    """

    name: str
    release: Callable[..., Any]
    table: Any
    neighbour: Any
    event: harness.Event
    epsilon: float
    n_runs: int
    level: str = "proven"
    output: str = "data"
    slow: bool = False

    def run(self, factor: float = 1.0) -> Callable[[Any, int], Any]:
        """``run(data, seed)``: the release at ``factor * epsilon``, its label checked."""

        def run(data: Any, seed: int) -> Any:
            release = self.release(data, epsilon=factor * self.epsilon, seed=seed)
            report = release.report
            assert report.guarantee_level == self.level, f"{self.name}: {report.guarantee}"
            return getattr(release, self.output)

        return run

    def audit(self, factor: float = 1.0, block: int = 0) -> harness.Audit:
        """Audit the release at ``factor * epsilon`` against the stated ``epsilon``.

        Block ``b`` uses seeds ``b * n_runs .. (b + 1) * n_runs - 1``; the suite uses 0.
        """
        return harness.audit_events(
            self.run(factor),
            self.table,
            self.neighbour,
            epsilon=self.epsilon,
            events=[self.event],
            n_runs=self.n_runs,
            first_seed=block * self.n_runs,
        )


# one thread: faster on tables this small, and the draws do not depend on it
_ir_dp = functools.partial(dpfast.ir_dp, n_threads=1)


def _numeric(method: Callable[..., Any], n_columns: int, **options: Any) -> Callable[..., Any]:
    return functools.partial(method, bounds=dict.fromkeys(range(n_columns), BOUNDS), **options)


def _categorical(method: Callable[..., Any]) -> Callable[..., Any]:
    return functools.partial(method, k=2, taxonomies={"c": TWO_LEAVES})


# Runs are the cost, so each table is the cheapest input to release: NumPy arrays for the
# numeric ones (columns 0 and 1), Arrow tables for those with strings (about a third less
# time per release than the same pandas frames: 1.2-1.8 ms against 1.8-2.7 ms per call,
# 2-core VM, 2026-12-06). The release is the same public function either way.
# The group's mean moves from 2 to 4, so the tail at the upper bound is likelier under 4, 4.
_MEAN = (np.array([[0.0], [4.0]]), np.array([[4.0], [4.0]]))
_UPPER = harness.at_least(0, 4.0, likelier="neighbour")
# Both values of one record move: the joint tail of the two columns.
_MEANS = (np.array([[0.0, 0.0], [4.0, 4.0]]), np.array([[4.0, 4.0], [4.0, 4.0]]))
_UPPERS = _UPPER & harness.at_least(1, 4.0, likelier="neighbour")
# Column 0 weighs three times column 1: its noise spends 3ε/4, the other's ε/4.
_HEAVY = {0: 3.0, 1: 1.0}
_CHOICE = (pa.table({"c": ["a", "b"]}), pa.table({"c": ["b", "b"]}))
_A = harness.equal_to("c", "a", likelier="table")


#: The bounds' share of the column's ε in the design of bounds chosen with DP.
_SHARE = 0.5


def _chosen_upper_bound(data: Any, *, epsilon: float, seed: int) -> Any:
    """``laplace_dp`` whose bounds spend ``epsilon``: its report and the upper bound chosen."""
    spec = dpfast.DPBounds(outer=BOUNDS, upper_quantile=0.5, epsilon_share=_SHARE)
    release = dpfast.laplace_dp(data, epsilon=epsilon / _SHARE, bounds={0: spec}, seed=seed)
    upper = release.report.parameters["dp_bounds"]["0"]["chosen"][1]
    return SimpleNamespace(report=release.report, bounds={"upper": [upper]})


DESIGNS = (
    # the understated run is ir_dp at ε = 4 stated as 2, which 300 pilot runs missed
    Design("ir_dp", _numeric(_ir_dp, 1, k=2), *_MEAN, _UPPER, 2.0, 600),
    Design("ir_dp-two-columns", _numeric(_ir_dp, 2, k=2), *_MEANS, _UPPERS, 1.5, 1200, slow=True),
    Design("ir_dp-categorical", _categorical(_ir_dp), *_CHOICE, _A, 2.0, 1000, slow=True),
    Design(
        "ir_dp-weighted",
        _numeric(_ir_dp, 2, k=2, epsilon_weights=_HEAVY),
        *_MEANS,
        _UPPERS,
        1.5,
        1200,
        slow=True,
    ),
    Design(
        "ir_dp-log",
        _numeric(_ir_dp, 1, k=2, transforms={0: "log"}),
        *_MEAN,
        _UPPER,
        2.0,
        600,
        slow=True,
    ),
    Design(
        "laplace_dp",
        _numeric(dpfast.laplace_dp, 1),
        np.array([[0.0]]),
        np.array([[4.0]]),
        _UPPER,
        2.0,
        600,
    ),
    Design(
        "laplace_dp-two-columns",
        _numeric(dpfast.laplace_dp, 2),
        np.array([[0.0, 0.0]]),
        np.array([[4.0, 4.0]]),
        _UPPERS,
        1.5,
        1200,
    ),
    Design(
        "laplace_dp-dp-bounds",
        _chosen_upper_bound,
        np.array([[0.0], [0.5]]),
        np.array([[4.0], [0.5]]),  # the first record moved from 0 to 4
        harness.at_least("upper", 0.5 + 1e-9, likelier="neighbour"),
        2.0,
        1000,  # 600 flagged 19 of 20 blocks (exact binomial power 0.946); 1000: 0.9998
        output="bounds",
    ),
    Design(
        "laplace_dp-weighted",
        _numeric(dpfast.laplace_dp, 2, epsilon_weights=_HEAVY),
        np.array([[0.0, 0.0]]),
        np.array([[4.0, 4.0]]),
        _UPPERS,
        1.5,
        1200,
        slow=True,
    ),
    Design("mdav_dp", _numeric(dpfast.mdav_dp, 1, k=2), *_MEAN, _UPPER, 2.0, 600),
    Design(
        "mdav_dp-two-columns",
        _numeric(dpfast.mdav_dp, 2, k=2),
        *_MEANS,
        _UPPERS,
        1.5,
        1200,
        slow=True,
    ),
    Design("mdav_dp-categorical", _categorical(dpfast.mdav_dp), *_CHOICE, _A, 2.0, 1000, slow=True),
    Design(
        "diffgen",
        functools.partial(
            dpfast.diffgen, target="y", steps=0, taxonomies={"c": TWO_LEAVES}, classes=["a", "b"]
        ),
        pa.table({"c": ["a", "a"], "y": ["a", "b"]}),
        pa.table({"c": ["a"], "y": ["b"]}),  # the record of class a removed
        harness.at_least("count", 1, likelier="table", row=("y", "a")),
        1.0,
        300,
        output="counts",
    ),
    Design(
        "randomized_response",
        functools.partial(dpfast.randomized_response, column="x", domain=["a", "b"]),
        pa.table({"x": ["a"]}),
        pa.table({"x": ["b"]}),
        harness.equal_to("x", "a", likelier="table"),
        1.0,
        300,
        level="local",
    ),
)
