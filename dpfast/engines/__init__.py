"""Engines: where a release's work runs (docs/engines.md).

The in-memory engine is the public functions themselves (``dpfast.ir_dp`` and the others).
The out-of-core engine (:mod:`dpfast.engines.outofcore`) runs a release over a Parquet
dataset larger than memory, column by column and part by part, with the same kernels,
keys and ledger, so that a seeded release is the same on both: every random draw is keyed
by what it is for (a column, a rank group, a bucket of a permutation), never by how the
data was split.
"""

from __future__ import annotations

import re

__all__ = ["parse_memory"]

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_memory(text: str) -> int:
    """Return the bytes of a size such as ``"4GiB"``, ``"512MiB"``, ``"2GB"`` or ``"1e9"``.

    Examples
    --------
    >>> parse_memory("4GiB"), parse_memory("1.5 GB"), parse_memory("64MiB")
    (4294967296, 1500000000, 67108864)
    """
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(
            f"cannot read {text!r} as a memory size; write a number and a unit, e.g. 4GiB, "
            "512MiB or 2GB"
        )
    value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"the memory size must be positive, got {text!r}")
    return value
