"""Every public function's docstring has the NumPy sections STYLE.md asks for.

The public functions are those in ``__all__`` of ``dpfast``, ``dpfast.metrics``,
``dpfast.risk``, ``dpfast.datasets`` and ``dpfast.engines``. Each needs ``Parameters`` (if
it takes any), ``Returns`` and ``Examples`` (which pytest runs as doctests); the release
methods also need ``Raises`` and a sentence saying what privacy guarantee holds.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

import dpfast
from dpfast import datasets, engines, metrics, risk

MODULES: tuple[ModuleType, ...] = (dpfast, metrics, risk, datasets, engines)

#: The functions of ``dpfast.__all__``: the releases, and the forecast of one.
RELEASE_METHODS = (
    "diffgen",
    "forecast",
    "individual_ranking",
    "ir_dp",
    "k_noise",
    "k_pram",
    "laplace_dp",
    "mdav",
    "mdav_dp",
    "randomized_response",
)
#: The other functions of ``dpfast.__all__``: what a released file is worth.
OTHER_FUNCTIONS = ("accuracy",)

# A NumPy section header: a title line underlined by dashes of the same length.
_HEADER = re.compile(r"^([A-Z][A-Za-z ]*)\n(-+)$", re.MULTILINE)
# What a release's guarantee sentence speaks of: (local) differential privacy, or none.
_GUARANTEE = re.compile(r"differential(ly)? priva|\bDP\b")


def public_functions() -> Iterator[tuple[str, Callable[..., Any]]]:
    """Yield ``(dotted name, function)`` for every function in the modules' ``__all__``."""
    for module in MODULES:
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isfunction(value):
                yield f"{module.__name__}.{name}", value


FUNCTIONS = dict(public_functions())


def sections(doc: str) -> list[str]:
    """Return the titles of the NumPy sections of a (dedented) docstring, in order."""
    return [m.group(1) for m in _HEADER.finditer(doc) if len(m.group(1)) == len(m.group(2))]


def takes_parameters(function: Callable[..., Any]) -> bool:
    return bool(inspect.signature(function).parameters)


def required_sections(name: str, function: Callable[..., Any]) -> list[str]:
    """Return the sections ``function``'s docstring must have."""
    required = ["Parameters"] if takes_parameters(function) else []
    required.append("Returns")
    if name.removeprefix("dpfast.") in RELEASE_METHODS:
        required.append("Raises")
    required.append("Examples")
    return required


def missing_sections(name: str, function: Callable[..., Any]) -> list[str]:
    """Return the required sections that ``function``'s docstring lacks."""
    found = sections(inspect.getdoc(function) or "")
    return [title for title in required_sections(name, function) if title not in found]


def test_the_release_methods_are_the_top_level_functions() -> None:
    got = sorted(name.removeprefix("dpfast.") for name in FUNCTIONS if name.count(".") == 1)

    assert got == sorted(RELEASE_METHODS + OTHER_FUNCTIONS)


def test_every_module_has_public_functions() -> None:
    got = {name.rsplit(".", 1)[0] for name in FUNCTIONS}

    assert got == {module.__name__ for module in MODULES}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_public_function_has_its_sections(name: str) -> None:
    got = missing_sections(name, FUNCTIONS[name])

    assert got == [], f"{name}'s docstring lacks the NumPy section(s) {got}"


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_public_function_has_a_one_line_summary_and_a_doctest(name: str) -> None:
    doc = inspect.getdoc(FUNCTIONS[name]) or ""
    summary, _, rest = doc.partition("\n")
    examples = doc.split("Examples\n--------", 1)[-1]

    assert summary.strip() and rest.startswith("\n"), f"{name}: no one-line summary"
    assert ">>> " in examples, f"{name}: its Examples section holds no doctest"


@pytest.mark.parametrize("name", RELEASE_METHODS)
def test_release_method_states_its_guarantee(name: str) -> None:
    doc = inspect.getdoc(getattr(dpfast, name)) or ""
    before_parameters = doc.split("Parameters\n----------", 1)[0]

    assert _GUARANTEE.search(before_parameters), f"{name}: no sentence on its guarantee"


def _documented(doc: str) -> Callable[..., Any]:
    def function(data: Any, *, k: int) -> Any:
        return data

    function.__doc__ = doc
    return function


_FULL = """Do something.

    Parameters
    ----------
    data : table
    k : int

    Returns
    -------
    table

    Raises
    ------
    ValueError
        Bad ``k``.

    Examples
    --------
    >>> 1
    1
    """


@pytest.mark.parametrize("title", ["Parameters", "Returns", "Raises", "Examples"])
def test_the_check_fails_when_a_section_is_missing(title: str) -> None:
    underline = "-" * len(title)
    doc = _FULL.replace(f"    {title}\n    {underline}\n", f"    {title}\n")
    assert doc != _FULL

    got = missing_sections("dpfast.ir_dp", _documented(doc))

    assert got == [title]


def test_the_check_passes_a_full_docstring_and_needs_no_parameters_without_any() -> None:
    def constant() -> int:
        """Return 1.

        Returns
        -------
        int

        Examples
        --------
        >>> constant()
        1
        """
        return 1

    assert missing_sections("dpfast.ir_dp", _documented(_FULL)) == []
    assert missing_sections("dpfast.metrics.constant", constant) == []
