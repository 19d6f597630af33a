"""Releases on a named engine, with its options, for the engine tests.

``on_engine("spark", dpfast.ir_dp, frame, part_rows=700, k=7, ...)`` runs the public
function with ``engine=EngineChoice("spark", {"part_rows": 700})`` and returns ``(data,
report, private)``: the options an engine takes (``batch_rows``, ``part_rows``,
``send_ranks``) go to it, the rest to the function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dpfast.engines import EngineChoice

#: The options of the engines (EngineChoice), as opposed to the functions' arguments.
ENGINE_OPTIONS = ("batch_rows", "part_rows", "send_ranks")


def apart_from_engine(report: Any) -> dict[str, Any]:
    """Return a public report (a ``Report``, or its JSON as a dict) without its ``engine``.

    The report names the engine that ran the release, so releases on two engines are
    compared apart from it.
    """
    public = report if isinstance(report, dict) else report.to_dict()
    return {name: value for name, value in public.items() if name != "engine"}


def on_engine(
    engine: str, function: Callable[..., Any], data: Any, **arguments: Any
) -> tuple[Any, Any, Any]:
    """Return ``(data, report, private)`` of ``function(data, **arguments)`` on ``engine``."""
    options = {name: arguments.pop(name) for name in ENGINE_OPTIONS if name in arguments}
    release = function(data, engine=EngineChoice(engine, options), **arguments)
    return release.data, release.report, release.private


@dataclass(frozen=True)
class Hook:
    """A budget that calls ``hook(report)`` where a budget's spend is committed."""

    hook: Callable[[Any], None]

    def reserve(self, epsilon: float, *, method: str, output: Any, columns: Any) -> Hook:
        return self

    def commit(self, report: Any) -> None:
        self.hook(report)

    def abandon(self) -> None:
        pass


def out_of_core(
    function: Callable[..., Any],
    source: Any,
    output: Any,
    *,
    memory_limit: int,
    batch_rows: int = 1 << 20,
    before_publish: Callable[[Any], None] | None = None,
    after_publish: Callable[[], None] | None = None,
    **arguments: Any,
) -> tuple[Any, Any]:
    """Release ``source`` out of core into ``output``; return the public and private report.

    ``before_publish(report)`` runs once the output is complete, before it is visible
    (where a budget is committed); ``after_publish()`` once it is visible.
    """
    engine = EngineChoice("outofcore", {"batch_rows": batch_rows})
    if before_publish is not None:
        arguments["budget"] = Hook(before_publish)
    release = function(source, engine=engine, output=output, memory_limit=memory_limit, **arguments)
    if after_publish is not None:
        after_publish()
    return release.report, release.private


def ir_dp_dataset(source: Any, output: Any, **arguments: Any) -> tuple[Any, Any]:
    """``dpfast.ir_dp`` out of core (:func:`out_of_core`)."""
    import dpfast

    return out_of_core(dpfast.ir_dp, source, output, **arguments)


def laplace_dp_dataset(source: Any, output: Any, **arguments: Any) -> tuple[Any, Any]:
    """``dpfast.laplace_dp`` out of core (:func:`out_of_core`)."""
    import dpfast

    return out_of_core(dpfast.laplace_dp, source, output, **arguments)


def mdav_dp_dataset(source: Any, output: Any, **arguments: Any) -> tuple[Any, Any]:
    """``dpfast.mdav_dp`` out of core (:func:`out_of_core`)."""
    import dpfast

    return out_of_core(dpfast.mdav_dp, source, output, **arguments)
