"""The writes a cluster engine keeps for its lazy frame until it publishes, and that frame.

See :mod:`dpfast.engines.outofcore._cluster_engine` and
:meth:`~dpfast.engines.base.Engine.publish`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import pyarrow as pa

from dpfast.dataflow.writes import CopyColumns, WriteGroups
from dpfast.engines.frames.parts import RowsColumn
from dpfast.engines.frames.sent_ranks import RankedState

__all__ = ["FrameShape", "KeptWrites"]

T = TypeVar("T")

#: How a release is made (:meth:`KeptWrites.shape`).
FrameShape = Literal["table", "exchange", "groups", "rows", "files"]


@dataclass
class KeptWrites:
    """The writes kept for the lazy frame, by kind; each column's by its name.

    * ``groups``: columns in a keyed permutation of their rank groups;
    * ``rows``: numeric columns released row by row (their cells);
    * ``copies``: unprotected columns copied, each request in the rows' order or a keyed one;
    * ``ranked``: numeric or categorical columns of rank groups the write's tasks sort and
      send (:class:`~dpfast.engines.frames.sent_ranks.RankedState`);
    * ``table``: a table the method computed, the whole release.
    """

    groups: dict[str, WriteGroups] = field(default_factory=dict)
    rows: dict[str, RowsColumn] = field(default_factory=dict)
    copies: list[CopyColumns] = field(default_factory=list)
    ranked: dict[str, RankedState] = field(default_factory=dict)
    table: pa.Table | None = None

    @property
    def copied(self) -> list[str]:
        """Every column copied, in the order the copies were asked for."""
        return [str(name) for copy in self.copies for name in copy.names]

    def shape(self, written: bool) -> FrameShape:
        """Return how the release is made, ``written``: this process wrote a released column.

        ``"table"``: the computed table; ``"exchange"``: one exchange of the input's rows
        (copies or ranked columns, beside any kept ones); ``"groups"`` or ``"rows"``: a frame
        the workers compute from the kept state alone; ``"files"``: the kept columns written
        here beside the written ones, read back as a frame (also where the engine finds that
        the exchange cannot hold the copies).
        """
        if self.table is not None:
            return "table"
        if written:
            return "files"
        if self.copies or self.ranked:
            return "exchange"
        if self.groups and not self.rows:
            return "groups"
        if self.rows and not self.groups:
            return "rows"
        return "files"

    @staticmethod
    def in_order(kept: Mapping[str, T], order: Sequence[str]) -> list[T]:
        """Return ``kept``'s values in ``order`` (the input's column order)."""
        return [kept[name] for name in order if name in kept]
