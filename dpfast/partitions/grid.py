"""The integer grid on which numeric columns are released (docs/design.md#exact-grid).

A grid may apply a public monotone transform to its column (docs/privacy.md#transforms):
``"log"`` (``log1p``, for non-negative values) or ``"asinh"`` (for signed values). The
bounds stay in the data's units; the grid covers ``[T(lower), T(upper)]``, so the noise is
added on the transformed scale, and a grid value maps back through ``T^-1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from dpfast._kernels import grid as _grid_kernels
from dpfast._validation import option, quoted
from dpfast.exceptions import DPFastValueError

# Grid resolution: the domain is cut into at most 2**40 steps, so rounding a centroid moves
# it by at most 2**-41 of the domain (docs/design.md#exact-grid).
MAX_GRID_BITS = 40

#: The public transforms a numeric column may take, and their codes in the kernels.
TRANSFORM_CODES = {"log": _grid_kernels.LOG1P, "asinh": _grid_kernels.ASINH}


def forward(value: float, transform: str | None) -> float:
    """Return ``T(value)``: ``log1p`` for ``"log"``, ``asinh`` for ``"asinh"``, else ``value``.

    The same C functions as the kernels' :func:`dpfast._kernels.grid.forward`.

    Examples
    --------
    >>> forward(0.0, "log"), forward(0.0, "asinh"), forward(3.0, None)
    (0.0, 0.0, 3.0)
    """
    if transform == "log":
        return math.log1p(value)
    if transform == "asinh":
        return math.asinh(value)
    return value


@dataclass(frozen=True)
class Grid:
    """The integer grid a numeric column is released on.

    Values map to ``q = rint((clamp(x) - lower) / gamma)`` in ``[0, d_int]``, with ``gamma``
    a power of two, and back to ``lower + gamma * q``. With a ``transform`` ``T``, values
    map to ``q = rint((T(clamp(x)) - T(lower)) / gamma)`` and back through ``T^-1``
    (:meth:`value`).

    Attributes
    ----------
    lower, upper : float
        The public domain, in the data's units.
    gamma : float
        Grid step (a power of two; 1.0 for a zero-width domain), on the transformed scale.
    d_int : int
        Domain width in grid steps (``ceil((T(upper) - T(lower)) / gamma)``).
    index_bits : int
        Bits of a packed word that hold the row index.
    transform : {None, "log", "asinh"}
        The public monotone transform of the column (``None``: the identity).
    shift : float
        ``log E[e^Y]`` of the noise ``Y`` on the transformed scale, which the mapping
        back divides out (:meth:`corrected`); 0 for no correction.
    """

    lower: float
    upper: float
    gamma: float
    d_int: int
    index_bits: int
    transform: str | None = None
    shift: float = 0.0

    @classmethod
    def for_column(
        cls, lower: float, upper: float, n_records: int, k: int = 1, transform: str | None = None
    ) -> Grid:
        """Choose the finest grid whose values, row indices and group sums fit in 64 bits."""
        if transform is not None and transform not in TRANSFORM_CODES:
            raise DPFastValueError(
                f"a transform must be one of {sorted(TRANSFORM_CODES)}, got {quoted(transform)}"
            )
        index_bits = max(1, (n_records - 1).bit_length())
        width = forward(upper, transform) - forward(lower, transform)
        grid_bits = min(MAX_GRID_BITS, 63 - index_bits, 62 - (2 * k - 1).bit_length())
        if grid_bits < 8:
            raise DPFastValueError(
                f"{n_records} rows with {option('k', k)} leave too few bits for the value "
                f"grid; release the table in parts or use a smaller {option('k')}"
            )
        if width == 0:
            return cls(lower, upper, 1.0, 0, index_bits, transform)
        _, exponent = math.frexp(width)  # width <= 2**exponent
        gamma = math.ldexp(1.0, exponent - grid_bits)
        return cls(lower, upper, gamma, math.ceil(width / gamma), index_bits, transform)

    @property
    def origin(self) -> float:
        """``T(lower)``: where grid value 0 lies on the transformed scale."""
        return forward(self.lower, self.transform)

    @property
    def width(self) -> float:
        """The domain's width on the scale the noise is added on: ``T(upper) - T(lower)``."""
        return forward(self.upper, self.transform) - self.origin

    @property
    def warp(self) -> tuple[int, float, float] | None:
        """The kernels' ``(code, origin, shift)``, ``None`` for the identity.

        The kernels are compiled once for ``None`` and once for a tuple, so the identity
        runs its own specialised code (:mod:`dpfast._kernels.grid`).
        """
        if self.transform is None:
            return None
        return (TRANSFORM_CODES[self.transform], self.origin, self.shift)

    def corrected(self, shift: float) -> Grid:
        """Return this grid, mapping back divided by the noise's mean factor ``e**shift``."""
        return replace(self, shift=float(shift))

    def value(self, y: int, integer: bool = False) -> float:
        """Return the value grid value ``y`` is released as (the kernels' ``grid_value``).

        Examples
        --------
        >>> grid = Grid.for_column(0.0, 1000.0, 100, transform="log")
        >>> grid.value(0), grid.value(grid.d_int), round(grid.value(grid.d_int // 2), 3)
        (0.0, 1000.0, 30.639)
        """
        if self.transform is None:
            value = self.lower + self.gamma * y
        elif y <= 0:
            value = self.lower
        elif y >= self.d_int:
            value = self.upper
        else:
            z = self.origin + self.gamma * y
            if self.transform == "log":
                value = math.expm1(z - self.shift)
            else:
                value = math.sinh(z) * math.exp(-self.shift)
        if integer:
            value = float(round(value))  # half to even, as np.rint
        return min(max(value, self.lower), self.upper)

    def values(self, y: np.ndarray, integer: bool = False) -> np.ndarray:
        """Return the values grid values ``y`` are released as: :meth:`value`, vectorised.

        The kernels' ``grid_value`` in NumPy (float64): ``lower + gamma y`` without a
        transform, bit for bit; with one, ``T^-1`` of ``origin + gamma y`` corrected by
        ``shift`` strictly inside ``(0, d_int)`` and the bounds at its ends. Rounded half
        to even for an ``integer`` column, clamped to ``[lower, upper]``.

        Examples
        --------
        >>> grid = Grid.for_column(0.0, 1000.0, 100, transform="log")
        >>> y = np.array([0, grid.d_int // 2, grid.d_int])
        >>> [round(v, 3) for v in grid.values(y)] == [round(grid.value(v), 3) for v in y]
        True
        """
        y = np.asarray(y)
        if self.transform is None:
            value = self.lower + self.gamma * y.astype(np.float64)
        else:
            z = self.origin + self.gamma * y.astype(np.float64)
            with np.errstate(over="ignore"):
                inside = (
                    np.expm1(z - self.shift)
                    if self.transform == "log"
                    else np.sinh(z) * math.exp(-self.shift)
                )
            value = np.where(y <= 0, self.lower, np.where(y >= self.d_int, self.upper, inside))
        if integer:
            value = np.rint(value)
        return np.clip(value, self.lower, self.upper)
