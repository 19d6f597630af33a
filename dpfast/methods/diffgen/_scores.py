"""DiffGen's utility functions and the split-value weights.

See docs/design.md#diffgen-scores, #diffgen-split.

``counts[c, cls]`` is the number of records of child ``c`` with class ``cls``:

* ``Max(D, v) = Σ_c max_cls counts[c, cls]``, sensitivity 1;
* ``InfoGain(D, v) = H_v - Σ_c (|D_c| / |D_v|) H_c``, sensitivity ``log2 |classes|``,
  computed as ``(N(v) - Σ_c N(c)) / |D_v|`` with ``N(x) = n_x log2 n_x - Σ_cls
  n_{x,cls} log2 n_{x,cls}`` (``0 log 0 = 0``) and ``0`` when ``|D_v| = 0``.
"""

from __future__ import annotations

import math

import numpy as np

UTILITIES = ("max", "info_gain")


def sensitivity(utility: str, n_classes: int) -> float:
    """``Δu``: 1 for Max, ``log2(n_classes)`` for InfoGain."""
    return 1.0 if utility == "max" else math.log2(n_classes)


def _xlog2x(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    positive = x > 0
    out[positive] = x[positive] * np.log2(x[positive])
    return out


def _spread(counts: np.ndarray) -> np.ndarray:
    # N(x) = n log2 n - Σ n_cls log2 n_cls per row of counts (rows, classes)
    return _xlog2x(counts.sum(axis=-1)) - _xlog2x(counts).sum(axis=-1)  # type: ignore[no-any-return]


def score(counts: np.ndarray, utility: str) -> float:
    """Return the utility of specialising a value whose children hold ``counts`` (``int[k, C]``)."""
    counts = np.asarray(counts)
    if utility == "max":
        return float(counts.max(axis=1).sum()) if counts.size else 0.0
    total = counts.sum(axis=0)
    n = float(total.sum())
    if n == 0:
        return 0.0
    gain = (float(_spread(total)) - float(_spread(counts).sum())) / n
    return max(gain, 0.0)


def split_scores(left: np.ndarray, total: np.ndarray, utility: str) -> np.ndarray:
    """Return the utility of each two-way split whose left child holds ``left[i]`` (``int[q, C]``).

    ``total`` (``int[C]``) is the class counts of the value being split; the right child
    holds ``total - left[i]``.
    """
    right = total[None, :] - left
    if utility == "max":
        return (left.max(axis=1) + right.max(axis=1)).astype(np.float64)  # type: ignore[no-any-return]
    n = float(total.sum())
    if n == 0:
        return np.zeros(left.shape[0], dtype=np.float64)
    gain = (float(_spread(total)) - _spread(left) - _spread(right)) / n
    return np.maximum(gain, 0.0)  # type: ignore[no-any-return]
