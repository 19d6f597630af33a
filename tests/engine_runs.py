"""Releases on a named engine, with its options, for the engine tests.

``on_engine("spark", dpfast.ir_dp, frame, part_rows=700, k=7, ...)`` runs the public
function with ``engine=EngineChoice("spark", {"part_rows": 700})`` and returns ``(data,
report, private)``: the options an engine takes (``batch_rows``, ``part_rows``) go to it,
the rest to the function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpfast.engines import EngineChoice

#: The options of the engines (EngineChoice), as opposed to the functions' arguments.
ENGINE_OPTIONS = ("batch_rows", "part_rows")


def on_engine(
    engine: str, function: Callable[..., Any], data: Any, **arguments: Any
) -> tuple[Any, Any, Any]:
    """Return ``(data, report, private)`` of ``function(data, **arguments)`` on ``engine``."""
    options = {name: arguments.pop(name) for name in ENGINE_OPTIONS if name in arguments}
    release = function(data, engine=EngineChoice(engine, options), **arguments)
    return release.data, release.report, release.private
