"""The options the releases share (``**options``): each release takes exactly its own.

Every release refuses a keyword it does not take, as Python refuses an unknown keyword
argument, with a :class:`~dpfast.exceptions.DPFastTypeError` that names it and lists the
options the release takes; the options classes document every option they hold.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

import dpfast
from dpfast._release import options_class
from dpfast._release.options import DEFAULTS
from dpfast.exceptions import DPFastError, DPFastTypeError

BASE = {"risk", "progress", "engine", "output", "memory_limit"}

#: Each release's options, and its own required arguments (a call that binds).
RELEASES: dict[str, tuple[set[str], dict[str, Any]]] = {
    "ir_dp": (BASE | {"seed", "metrics", "budget", "max_on_bound"}, {"k": 2, "epsilon": 1.0}),
    "laplace_dp": (
        BASE | {"seed", "metrics", "budget", "max_on_bound"},
        {"epsilon": 1.0, "bounds": {}},
    ),
    "mdav_dp": (BASE | {"seed", "metrics", "budget", "max_on_bound"}, {"k": 2, "epsilon": 1.0}),
    "mdav": (BASE | {"metrics"}, {"k": 2}),
    "individual_ranking": (BASE | {"metrics"}, {"k": 2}),
    "k_noise": (BASE | {"seed"}, {"k": 2}),
    "k_pram": (BASE | {"seed"}, {"k": 2}),
    "randomized_response": (BASE | {"seed", "budget"}, {"column": "age", "domain": [1, 2]}),
    "diffgen": (BASE | {"seed", "budget"}, {"target": "age", "epsilon": 1.0, "steps": 1}),
}

OPTIONS_CLASSES = (
    dpfast.ReleaseOptions,
    dpfast.MetricsReleaseOptions,
    dpfast.SeededReleaseOptions,
    dpfast.DPReleaseOptions,
    dpfast.DPMetricsReleaseOptions,
)

TABLE = pd.DataFrame({"age": [23, 35, 41, 52]})


def _call(name: str, **options: Any) -> Any:
    _, required = RELEASES[name]
    function: Callable[..., Any] = getattr(dpfast, name)
    return function(TABLE, **required, **options)


def test_the_table_names_every_release():
    releases = {n for n in dpfast.__all__ if inspect.isfunction(getattr(dpfast, n))}

    assert set(RELEASES) == releases - {"forecast", "accuracy"}  # the two that release nothing


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_a_release_refuses_an_unknown_keyword_naming_it_and_its_options(name):
    accepted, _ = RELEASES[name]

    with pytest.raises(DPFastTypeError) as raised:
        _call(name, memory_limt="4GiB")

    assert isinstance(raised.value, TypeError) and isinstance(raised.value, DPFastError)
    text = str(raised.value)
    assert f"{name}() got an unexpected keyword argument 'memory_limt'" in text
    assert "did you mean 'memory_limit'?" in text
    assert ", ".join(sorted(accepted)) in text


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_a_release_takes_exactly_its_options(name):
    accepted, _ = RELEASES[name]

    assert set(options_class(getattr(dpfast, name)).__optional_keys__) == accepted
    for option in sorted(set(DEFAULTS) - accepted):  # e.g. mdav(..., budget=...)
        with pytest.raises(DPFastTypeError, match=f"unexpected keyword argument '{option}'"):
            _call(name, **{option: DEFAULTS[option]})


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_a_forecast_refuses_the_options_its_release_refuses(name):
    accepted, required = RELEASES[name]
    refused = sorted(set(DEFAULTS) - accepted) or ["memory_limt"]

    with pytest.raises(DPFastTypeError, match=f"unexpected keyword argument '{refused[0]}'"):
        dpfast.forecast(name, 10, **required, **{refused[0]: None})


def test_an_option_at_its_default_is_the_option_left_out():
    given = dpfast.laplace_dp(TABLE, epsilon=1.0, bounds={"age": (17, 90)}, seed=3)
    defaults = dpfast.laplace_dp(
        TABLE,
        epsilon=1.0,
        bounds={"age": (17, 90)},
        seed=3,
        **{k: DEFAULTS[k] for k in RELEASES["laplace_dp"][0] - {"seed"}},
    )

    assert given.data.equals(defaults.data)


def test_the_options_are_passed_by_name_from_a_typed_dict():
    options: dpfast.DPMetricsReleaseOptions = {"seed": 7, "metrics": True}

    release = dpfast.laplace_dp(TABLE, epsilon=1.0, bounds={"age": (17, 90)}, **options)

    again = dpfast.laplace_dp(TABLE, epsilon=1.0, bounds={"age": (17, 90)}, seed=7)
    assert release.report.to_dict()["seeded"] and release.data.equals(again.data)
    assert release.private.metrics is not None and again.private.metrics is None


def _documented(doc: str) -> set[str]:
    """Return the names a NumPy docstring's Attributes section (a TypedDict's keys) describes."""
    section = doc.split("Attributes\n----------\n", 1)[-1] if "Attributes\n---" in doc else ""
    return set(re.findall(r"^(\w+) : ", section, flags=re.MULTILINE))


@pytest.mark.parametrize("kind", OPTIONS_CLASSES, ids=lambda kind: kind.__name__)
def test_every_option_is_documented_by_its_class_or_a_class_it_builds_on(kind):
    keys = set(kind.__optional_keys__)
    # the classes whose options this one holds: its own and those it is built on
    under = [c for c in OPTIONS_CLASSES if set(c.__optional_keys__) <= keys]
    documented = set().union(*(_documented(inspect.getdoc(c) or "") for c in under))

    assert keys <= documented, f"{kind.__name__} leaves {keys - documented} undocumented"
    assert set(DEFAULTS) == set(dpfast.DPMetricsReleaseOptions.__optional_keys__)


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_a_release_documents_its_options_class(name):
    doc = inspect.getdoc(getattr(dpfast, name)) or ""
    kind = options_class(getattr(dpfast, name)).__name__

    assert f"**options : Unpack[{kind}]" in doc
    assert f":class:`dpfast.{kind}`" in doc
