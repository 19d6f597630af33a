"""How the workers write each release frame a cluster engine returned, kept beside the frame.

A Spark or Dask release frame of rank groups (:class:`GeneratedParts`) or of the exchange
(:class:`ExchangedParts`) is best written by the tasks that compute its parts: each part is
then computed once, in Arrow, with the ranked columns' counts. :meth:`ClusterEngine.write_release`
may get it long after the release, so its plan is kept here by the frame's identity while the
frame lives (nothing is set on the frame, a Spark or Dask object); a frame derived from it (a
``select``, a filter) has none (:data:`NO_PLAN`).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

from dpfast.engines.frames.exchange import ExchangedParts
from dpfast.engines.frames.parts import GeneratedParts

__all__ = ["WritePlan", "plan_of", "remember"]


@dataclass(frozen=True)
class WritePlan:
    """What the engine that made a release frame knows of writing it.

    ``generated``: the parts each task computes from the groups' state; ``exchanged``:
    the parts the exchange assembles; ``tasks``: the engine's own handle on the tasks
    that assemble the exchange's parts (Spark: a function returning the pieces, part ``p``'s
    in partition ``p``; Dask: the assembling tasks, each giving its part's table and counts).
    """

    generated: GeneratedParts | None = None
    exchanged: ExchangedParts | None = None
    tasks: Any = None


#: A frame with no plan: written by Spark's or Dask's own writer.
NO_PLAN = WritePlan()

#: ``id(frame)``: a weak reference to the frame and its plan.
_PLANS: dict[int, tuple[weakref.ref[Any], WritePlan]] = {}
#: Reentrant: a collection that runs a frame's callback may start while this thread holds it.
_LOCK = threading.RLock()


def remember(frame: Any, plan: WritePlan) -> Any:
    """Keep ``plan`` for ``frame`` while the frame lives; return the frame, unchanged."""
    key = id(frame)

    def forget(reference: weakref.ref[Any]) -> None:
        with _LOCK:
            entry = _PLANS.get(key)
            if entry is not None and entry[0] is reference:  # not a later frame's
                del _PLANS[key]

    reference = weakref.ref(frame, forget)
    with _LOCK:
        _PLANS[key] = (reference, plan)
    return frame


def plan_of(frame: Any) -> WritePlan:
    """Return the plan kept for ``frame`` itself, else :data:`NO_PLAN`."""
    with _LOCK:
        entry = _PLANS.get(id(frame))
    if entry is None or entry[0]() is not frame:  # an id reused by another object
        return NO_PLAN
    return entry[1]
