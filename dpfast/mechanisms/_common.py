"""Helpers shared by the perturbation mechanisms: noise source, threads, ranges, retention."""

from __future__ import annotations

import math
import os
from collections.abc import Hashable
from fractions import Fraction
from typing import Any

import numpy as np

from dpfast import noise
from dpfast._kernels import mechanisms as _kernels
from dpfast._validation import check_threads
from dpfast.release._common import _unprotected_note

_KEEP_BITS = 32


def _source(seed: int | None) -> noise.NoiseSource:
    return noise.NoiseSource.secure() if seed is None else noise.NoiseSource.from_seed(seed)


def _threads(n_threads: Any) -> int:
    return check_threads(n_threads, os.cpu_count() or 1)


def _range(values: np.ndarray, name: Hashable) -> tuple[float, float]:
    lo, hi = _kernels.min_max(values)
    width = float(hi) - float(lo)
    if not math.isfinite(width):
        raise ValueError(
            f"column {name!r}: max - min overflows float64 ({lo!r} to {hi!r}); rescale the "
            "column first"
        )
    if width > 0 and not math.isfinite(values.shape[0] / width):
        raise ValueError(
            f"column {name!r}: its values differ by less than float64 can divide "
            f"(range {width!r}); rescale the column first"
        )
    return float(lo), float(hi)


def _not_dp(what: str, unprotected: list[str]) -> str:
    return (
        f"NOT differential privacy: {what} A k-anonymity-style heuristic (Biswal, Arbuckle "
        "and Kulik); it gives no formal guarantee." + _unprotected_note(unprotected)
    )


def _keep_numerator(retention: float) -> int:
    """Largest ``a`` with ``a / 2**32 <= retention`` (exact)."""
    exact = Fraction(retention)
    return exact.numerator * (1 << _KEEP_BITS) // exact.denominator


def _check_retention(retention: Any) -> float:
    if isinstance(retention, (bool, np.bool_)) or not isinstance(
        retention, (int, float, np.number)
    ):
        raise TypeError(f"retention must be a number, got {retention!r}")
    value = float(retention)
    if not 0.0 <= value < 1.0:
        raise ValueError(
            f"retention must be in [0, 1), got {retention!r}; 1 would release the data unchanged"
        )
    return value
