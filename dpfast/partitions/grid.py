"""The integer grid on which numeric columns are released (docs/design.md#exact-grid)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpfast._validation import option
from dpfast.exceptions import DPFastValueError

# Grid resolution: the domain is cut into at most 2**40 steps, so rounding a centroid moves
# it by at most 2**-41 of the domain (docs/design.md#exact-grid).
MAX_GRID_BITS = 40


@dataclass(frozen=True)
class Grid:
    """The integer grid a numeric column is released on.

    Values map to ``q = rint((clamp(x) - lower) / gamma)`` in ``[0, d_int]``, with ``gamma``
    a power of two, and back to ``lower + gamma * q``.

    Attributes
    ----------
    lower, upper : float
        The public domain.
    gamma : float
        Grid step (a power of two; 1.0 for a zero-width domain).
    d_int : int
        Domain width in grid steps (``ceil((upper - lower) / gamma)``).
    index_bits : int
        Bits of a packed word that hold the row index.
    """

    lower: float
    upper: float
    gamma: float
    d_int: int
    index_bits: int

    @classmethod
    def for_column(cls, lower: float, upper: float, n_records: int, k: int = 1) -> Grid:
        """Choose the finest grid whose values, row indices and group sums fit in 64 bits."""
        index_bits = max(1, (n_records - 1).bit_length())
        width = upper - lower
        grid_bits = min(MAX_GRID_BITS, 63 - index_bits, 62 - (2 * k - 1).bit_length())
        if grid_bits < 8:
            raise DPFastValueError(
                f"{n_records} rows with {option('k', k)} leave too few bits for the value "
                f"grid; release the table in parts or use a smaller {option('k')}"
            )
        if width == 0:
            return cls(lower, upper, 1.0, 0, index_bits)
        _, exponent = math.frexp(width)  # width <= 2**exponent
        gamma = math.ldexp(1.0, exponent - grid_bits)
        return cls(lower, upper, gamma, math.ceil(width / gamma), index_bits)
