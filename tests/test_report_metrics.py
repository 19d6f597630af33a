"""Utility metrics in release reports (``metrics=True``): values, alignment, the warning."""

import json
import math

import numpy as np
import pandas as pd
import pytest

import dpfast
from dpfast import metrics

# these tests exercise the record-linked release (linkage="records") on purpose
pytestmark = pytest.mark.filterwarnings("ignore::dpfast.exceptions.UnprovenReleaseWarning")

BOUNDS = {"age": (17, 90), "income": (0.0, 200_000.0)}


def _frame(n=600, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(17, 91, n),
            "income": rng.gamma(2.0, 20_000.0, n).clip(0, 200_000),
        }
    )


def _check(report_metrics, original, released, bounds):
    assert "do not publish" in report_metrics["warning"]
    for name in original.columns:
        got = report_metrics["variance_variation"][name]
        assert math.isclose(
            got, metrics.variance_variation(original[name], released[name]), rel_tol=1e-12
        )
        pair = bounds[name] if bounds else (original[name].min(), original[name].max())
        assert math.isclose(
            report_metrics["relative_error"][name],
            metrics.relative_error(original[name], released[name], pair),
            rel_tol=1e-12,
        )
    assert math.isclose(
        report_metrics["mean_variance_variation"],
        metrics.variance_variation(original, released),
        rel_tol=1e-12,
    )


def test_ir_dp_report_metrics_match_the_metrics_module_without_shuffle():
    frame = _frame()
    release = dpfast.ir_dp(
        frame,
        k=5,
        epsilon=1.0,
        bounds=BOUNDS,
        seed=2,
        linkage="records",
        shuffle=False,
        metrics=True,
    )
    _check(release.private.metrics, frame, release.data, BOUNDS)
    json.loads(release.report.to_json())


def test_shuffled_ir_dp_and_mdav_dp_report_record_linked_metrics():
    frame = _frame(seed=1)
    plain = dpfast.ir_dp(
        frame,
        k=5,
        epsilon=1.0,
        bounds=BOUNDS,
        seed=2,
        linkage="records",
        shuffle=False,
        metrics=True,
    ).private.metrics
    shuffled = dpfast.ir_dp(
        frame, k=5, epsilon=1.0, bounds=BOUNDS, seed=2, metrics=True
    ).private.metrics
    # the same noise (same seed) and the same rows, matched through the shuffle
    for key in ("relative_error", "variance_variation", "jensen_shannon"):
        for name in frame.columns:
            assert shuffled[key][name] == pytest.approx(plain[key][name], rel=1e-12)
    release = dpfast.mdav_dp(frame, k=10, epsilon=1.0, bounds=BOUNDS, seed=3, metrics=True)
    report = release.private.metrics
    assert set(report["variance_variation"]) == {"age", "income"}
    # variance variation does not depend on the row order
    assert report["variance_variation"]["income"] == pytest.approx(
        metrics.variance_variation(frame["income"], release.data["income"]), rel=1e-12
    )


def test_laplace_and_individual_ranking_reports():
    frame = _frame(seed=4)
    release = dpfast.laplace_dp(frame, epsilon=1.0, bounds=BOUNDS, seed=5, metrics=True)
    _check(release.private.metrics, frame, release.data, BOUNDS)
    release = dpfast.individual_ranking(frame, k=4, metrics=True)
    _check(release.private.metrics, frame, release.data, None)
    # microaggregation shrinks the variance, never grows it
    assert all(0 <= v < 1 for v in release.private.metrics["variance_variation"].values())


def test_no_metrics_unless_asked():
    release = dpfast.ir_dp(_frame(), k=5, epsilon=1.0, bounds=BOUNDS, seed=2)
    assert "metrics" not in release.report.extra


def test_categorical_columns_have_no_variance_variation():
    frame = dpfast.datasets.adult(drop_missing=True).head(400)[["age", "occupation"]]
    taxonomy = dpfast.datasets.adult_taxonomy("occupation")
    release = dpfast.ir_dp(
        frame,
        k=10,
        epsilon=1.0,
        bounds={"age": (17, 90)},
        taxonomies={"occupation": taxonomy},
        seed=1,
        metrics=True,
    )
    report = release.private.metrics
    assert set(report["relative_error"]) == {"age", "occupation"}
    assert set(report["variance_variation"]) == {"age"}
