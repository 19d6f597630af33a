"""Every ε is either served or refused before any work, with the usable range (issue 13.9).

Each release is called through the API and through the command line (in process) with
tiny, huge, infinite, NaN, negative and zero budgets. A refusal must name the parameter
(``--epsilon`` on the command line), the column or step, and a bound; the bound it gives
must itself be served, and the budget on the wrong side of it refused.
"""

from __future__ import annotations

import importlib
import json
import math
import re
import warnings
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpfast
from dpfast import cli, noise
from dpfast.accounting import MAX_SCALE_STEPS, scale_steps
from dpfast.exceptions import EpsilonRangeError

N_ROWS = 60
BOUNDS = {"age": (17, 90), "income": (0, 200_000)}
DOMAIN = ["clerk", "nurse", "pilot"]
TAXONOMY = dpfast.Taxonomy.from_mapping({"*": {"office": ["clerk"], "care": ["nurse", "pilot"]}})
INVALID = [math.inf, -math.inf, math.nan, -1.0, 0.0, -0.0]


def people() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame(
        {
            "age": rng.integers(17, 91, N_ROWS),
            "income": rng.uniform(0, 150_000, N_ROWS),
            "job": rng.choice(DOMAIN, N_ROWS),
            "label": rng.choice(["yes", "no"], N_ROWS),
        }
    )


# Each release as a function of epsilon only.
Release = Callable[[float], Any]


def _ir_dp(epsilon: float) -> Any:
    return dpfast.ir_dp(
        people(), k=3, epsilon=epsilon, bounds=BOUNDS, columns=["age", "income"], seed=1
    )


def _ir_dp_categorical(epsilon: float) -> Any:
    return dpfast.ir_dp(
        people(),
        k=3,
        epsilon=epsilon,
        bounds={"age": BOUNDS["age"]},
        taxonomies={"job": TAXONOMY},
        columns=["age", "job"],
        seed=1,
    )


def _laplace(epsilon: float) -> Any:
    return dpfast.laplace_dp(
        people(), epsilon=epsilon, bounds=BOUNDS, columns=["age", "income"], seed=1
    )


def _mdav_dp(epsilon: float) -> Any:
    return dpfast.mdav_dp(
        people(), k=10, epsilon=epsilon, bounds=BOUNDS, columns=["age", "income"], seed=1
    )


def _mdav_dp_published(epsilon: float) -> Any:
    return dpfast.mdav_dp(
        people(),
        k=10,
        epsilon=epsilon,
        bounds=BOUNDS,
        columns=["age", "income"],
        calibration="as_published",
        seed=1,
    )


def _mdav_dp_categorical(epsilon: float) -> Any:
    return dpfast.mdav_dp(
        people(),
        k=10,
        epsilon=epsilon,
        bounds={"age": BOUNDS["age"]},
        taxonomies={"job": TAXONOMY},
        columns=["age", "job"],
        seed=1,
    )


def _randomized_response(epsilon: float) -> Any:
    return dpfast.randomized_response(
        people(), column="job", domain=DOMAIN, epsilon=epsilon, seed=1
    )


def _diffgen(epsilon: float) -> Any:
    return dpfast.diffgen(
        people()[["age", "job", "label"]],
        target="label",
        epsilon=epsilon,
        steps=2,
        taxonomies={"job": TAXONOMY},
        bounds={"age": BOUNDS["age"]},
        classes=["no", "yes"],
        seed=1,
    )


RELEASES: dict[str, Release] = {
    "ir_dp": _ir_dp,
    "ir_dp categorical": _ir_dp_categorical,
    "laplace_dp": _laplace,
    "mdav_dp": _mdav_dp,
    "mdav_dp as_published": _mdav_dp_published,
    "mdav_dp categorical": _mdav_dp_categorical,
    "randomized_response": _randomized_response,
    "diffgen": _diffgen,
}
# The releases whose exponential mechanism limits how large epsilon may be.
# DiffGen's count noise has a largest ε; the exact exponential mechanism serves any ε (a
# rate above its cap spends less than asked, and the ledger says so)
WITH_UPPER_LIMIT = {"diffgen"}


def _bound(message: str, sign: str) -> float:
    found = re.search(rf"use epsilon {sign} ([0-9.e+-]+)$", message)
    assert found is not None, message
    return float(found.group(1))


@pytest.fixture(autouse=True)
def _quiet() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpfast.PrivacyLeakWarning)
        yield


# -- the API -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(RELEASES))
@pytest.mark.parametrize("epsilon", INVALID, ids=repr)
def test_invalid_epsilon_is_refused(name: str, epsilon: float) -> None:
    with pytest.raises(EpsilonRangeError, match=r"^epsilon must be a finite number > 0, got "):
        RELEASES[name](epsilon)


def _one_column(name: str) -> Release:
    """The release with only its first protected column (one share of the budget)."""
    if name == "ir_dp":
        return lambda e: dpfast.ir_dp(people(), k=3, epsilon=e, bounds=BOUNDS, columns=["age"])
    if name == "laplace_dp":
        return lambda e: dpfast.laplace_dp(people(), epsilon=e, bounds=BOUNDS, columns=["age"])
    if name == "mdav_dp":
        return lambda e: dpfast.mdav_dp(people(), k=10, epsilon=e, bounds=BOUNDS, columns=["age"])
    return RELEASES[name]


@pytest.mark.parametrize("name", ["ir_dp", "laplace_dp", "mdav_dp", "diffgen"])
def test_tiny_epsilon_is_refused_with_a_served_minimum(name: str) -> None:
    release = _one_column(name)
    with pytest.raises(EpsilonRangeError, match=r"^epsilon=1e-300 is too small: ") as info:
        release(1e-300)
    minimum = _bound(str(info.value), ">=")
    assert 1e-300 < minimum < 1e-3
    got = release(minimum)
    assert 0 < got.report.epsilon <= minimum * (1 + 1e-12)
    with pytest.raises(EpsilonRangeError, match="too small"):
        release(minimum / 2)


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_huge_epsilon_is_served_or_refused_with_a_served_maximum(name: str) -> None:
    release = RELEASES[name]
    if name not in WITH_UPPER_LIMIT:
        for epsilon in (1e300, 1.7976931348623157e308):
            got = release(epsilon)
            assert 0 < got.report.epsilon <= epsilon
            assert all(math.isfinite(entry.epsilon) for entry in got.report.ledger)
        return
    with pytest.raises(EpsilonRangeError, match=r"^epsilon=1e\+300 is too large: ") as info:
        release(1e300)
    maximum = _bound(str(info.value), "<=")
    assert 1e3 < maximum < 1e300
    assert release(maximum).report.epsilon <= maximum
    with pytest.raises(EpsilonRangeError, match="too large"):
        release(maximum * 2)


@pytest.mark.parametrize("method", ["ir_dp", "mdav_dp"])
@pytest.mark.parametrize("epsilon", [1e-300, 1e300])
def test_the_exact_exponential_mechanism_serves_any_epsilon(method: str, epsilon: float) -> None:
    function = getattr(dpfast, method)
    got = function(people(), k=3, epsilon=epsilon, taxonomies={"job": TAXONOMY}, columns=["job"])
    choices = [e for e in got.report.ledger if e.step == "centroid selection"]
    assert choices
    for entry in choices:
        assert 0 <= entry.details["effective_epsilon"] <= entry.epsilon


def test_minimum_is_per_column() -> None:
    # Each refusal gives the minimum of the column it names; a column with a wider grid
    # then names its own (larger) minimum, which serves the whole release.
    with pytest.raises(EpsilonRangeError, match="column 'age'") as info:
        _ir_dp(1e-300)
    first = _bound(str(info.value), ">=")
    with pytest.raises(EpsilonRangeError, match="column 'income'") as info:
        _ir_dp(first)
    second = _bound(str(info.value), ">=")
    assert first < second < 2 * first * (1 + 1e-2)
    assert _ir_dp(second).report.epsilon == second


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("ir_dp", "column 'age'"),
        ("laplace_dp", "column 'age'"),
        ("mdav_dp", "column 'age'"),
        ("diffgen", "the noisy counts"),
    ],
)
def test_refusal_names_the_column_or_step(name: str, what: str) -> None:
    with pytest.raises(EpsilonRangeError) as info:
        RELEASES[name](1e-30)
    assert what in str(info.value)
    assert "\n" not in str(info.value)


def test_refusal_comes_before_any_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a sampler ran before the budget was checked")

    for sampler in (
        "discrete_laplace",
        "permutation",
        "exponential_mechanism",
        "exponential_mechanism_sorted_groups",
        "apply_count_noise",
        "retain_or_replace",
    ):
        monkeypatch.setattr(noise, sampler, boom)
    # the partition is work too: the step that makes it must not run
    monkeypatch.setattr(
        importlib.import_module("dpfast.methods.mdav_dp"), "insensitive_clusters", boom
    )
    for name, release in RELEASES.items():
        if name in ("randomized_response", "ir_dp categorical", "mdav_dp categorical"):
            continue  # these serve every positive epsilon (see the tests above)
        with pytest.raises(EpsilonRangeError):
            release(1e-300)


def test_randomized_response_tiny_epsilon_is_served_by_keeping_nothing() -> None:
    # Below ln(1 + m / (2**32 - 1)) the retention rounds down to 0/2**32: every value is
    # redrawn from the domain, a release that spends 0 <= epsilon (never overstated).
    threshold = math.log1p(3 / (2**32 - 1))
    got = _randomized_response(1e-300).report
    assert got.epsilon == 0.0
    assert got.parameters["retention_fraction"].startswith("0/")
    assert _randomized_response(threshold * 1.001).report.epsilon > 0


def test_randomized_response_huge_epsilon_keeps_the_most_the_grid_holds() -> None:
    saturated = _randomized_response(23.5)  # above ln(1 + 3 (2**32 - 1)) = 23.28: saturated
    huge = _randomized_response(1.7976931348623157e308)
    assert huge.report.epsilon == saturated.report.epsilon
    assert huge.report.epsilon == pytest.approx(math.log(1 + 3 * (2**32 - 1)))
    assert list(huge.data["job"]) == list(saturated.data["job"])


# -- the privacy maps ----------------------------------------------------------------------


def test_scale_steps_limit_is_exact() -> None:
    assert scale_steps(MAX_SCALE_STEPS, 1.0) == MAX_SCALE_STEPS
    assert scale_steps(Fraction(MAX_SCALE_STEPS, 2), 0.5) == MAX_SCALE_STEPS
    assert scale_steps(0, 1e-300) == 0
    with pytest.raises(EpsilonRangeError, match=r"column 'x' would need a 4.61e\+18-step"):
        scale_steps(MAX_SCALE_STEPS + 1, 1.0, what="column 'x'")
    with pytest.raises(
        EpsilonRangeError, match=r"^epsilon=3 is too small: .* use epsilon >= 6.01$"
    ):
        scale_steps(MAX_SCALE_STEPS + 1, 0.5, shares=6)
    with pytest.raises(EpsilonRangeError, match="an infinite noise scale"):
        scale_steps(1, 0.0)


def test_count_noise_range() -> None:
    low = float(noise.COUNT_MIN_EPSILON)
    assert noise.count_noise_plan(low).numerator == 1
    with pytest.raises(EpsilonRangeError, match=r"use epsilon >= 2.33e-10"):
        noise.count_noise_plan(math.nextafter(low, 0.0))
    assert noise.count_noise_plan(2.0**62 - 1024).kind == "rate"
    with pytest.raises(EpsilonRangeError, match=r"use epsilon <= 4.61e\+18"):
        noise.count_noise_plan(2.0**62)


def test_error_message_takes_the_flag_name() -> None:
    with pytest.raises(EpsilonRangeError) as info:
        _laplace(1e-300)
    flag = info.value.for_parameter("--epsilon")
    assert flag.startswith("--epsilon=1e-300 is too small: column 'age'")
    assert "; use --epsilon >= " in flag
    assert "{parameter}" not in flag and "{parameter}" not in str(info.value)


# -- the command line -------------------------------------------------------------------------

SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 200000]},
        "job": {"type": "categorical", "protect": False},
        "label": {"type": "categorical", "protect": False},
    }
}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    people().to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    diffgen_schema = {
        "columns": {
            "age": {"type": "integer", "bounds": [17, 90]},
            "label": {"type": "categorical"},
            "income": {"type": "float", "protect": False},
            "job": {"type": "categorical", "protect": False},
        }
    }
    (tmp_path / "diffgen.json").write_text(json.dumps(diffgen_schema), encoding="utf-8")
    return tmp_path


COMMANDS = {
    "ir-dp": ["--k", "3", "--schema", "schema.json"],
    "laplace": ["--schema", "schema.json"],
    "mdav-dp": ["--k", "10", "--schema", "schema.json"],
    "randomized-response": ["--column", "job", "--domain", ",".join(DOMAIN)],
    "diffgen": [
        *("--target", "label", "--steps", "2"),
        *("--schema", "diffgen.json", "--classes", "no,yes"),
    ],
}


def _run(workdir: Path, method: str, epsilon: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.chdir(workdir)
    monkeypatch.delenv("DPFAST_DEBUG", raising=False)
    return cli.main(
        [
            *("release", method, "people.csv", "-o", "out.csv"),
            *("--epsilon", epsilon, "--seed", "1", "--quiet", "--force", *COMMANDS[method]),
        ]
    )


@pytest.mark.parametrize("method", sorted(COMMANDS))
@pytest.mark.parametrize("epsilon", ["1e-300", "inf", "nan", "-1", "0"])
def test_cli_refuses_with_one_line_naming_the_flag(
    workdir: Path,
    method: str,
    epsilon: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = {p.name for p in workdir.iterdir()}
    if epsilon == "1e-300" and method == "randomized-response":
        # served, spending 0: see test_randomized_response_tiny_epsilon_is_served_...
        assert _run(workdir, method, epsilon, monkeypatch) == 0
        report = json.loads((workdir / "out.csv.public-report.json").read_text(encoding="utf-8"))
        assert report["epsilon"] == 0.0
        return
    assert _run(workdir, method, epsilon, monkeypatch) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dpfast: error: --epsilon"), lines[0]
    assert "Traceback" not in err
    if epsilon == "1e-300":
        assert "is too small" in lines[0] and "; use --epsilon >= " in lines[0]
    else:
        assert "must be a finite number > 0" in lines[0]
    assert {p.name for p in workdir.iterdir()} == before


def test_cli_huge_epsilon(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(workdir, "laplace", "1e300", monkeypatch) == 0
    report = json.loads((workdir / "out.csv.public-report.json").read_text(encoding="utf-8"))
    assert report["epsilon"] == 1e300
    capsys.readouterr()
    assert _run(workdir, "diffgen", "1e300", monkeypatch) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith("dpfast: error: --epsilon=1e+300 is too large: ")
    maximum = float(line.rsplit("; use --epsilon <= ", 1)[1])
    assert _run(workdir, "diffgen", repr(maximum), monkeypatch) == 0
