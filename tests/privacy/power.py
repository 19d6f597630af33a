"""Measure each design's power: how many independent blocks of seeds flag a 2x understatement.

Usage (from the repository root)::

    .venv/bin/python -m tests.privacy.power [--blocks 20] [--factor 2] [design ...]

Block ``b`` (``1 .. blocks``) runs the design's audit on seeds ``b * n_runs .. (b + 1) *
n_runs - 1``, which the suite (block 0) never uses, once at ``factor`` times the stated ε
(the understatement, which should be flagged) and once at the stated ε (honest, flagged
with chance at most ``alpha`` by construction). It prints both shares per design.
"""

from __future__ import annotations

import argparse
import time
import warnings

from dpfast.exceptions import NoiseDominatesWarning
from tests.privacy.designs import DESIGNS


def main(argv: list[str] | None = None) -> int:
    """Print, per design, the share of blocks flagged at ``factor * ε`` and at ``ε``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--factor", type=float, default=2.0)
    parser.add_argument("names", nargs="*", help="designs to measure (default: all)")
    args = parser.parse_args(argv)
    # advice on tables this small, as in the suite (conftest.py)
    warnings.filterwarnings("ignore", category=NoiseDominatesWarning)
    chosen = [d for d in DESIGNS if not args.names or d.name in args.names]
    print(f"{'design':24} {'eps':>4} {'runs':>5}  understated  honest   seconds")
    for design in chosen:
        start = time.perf_counter()
        flagged = honest = 0
        for block in range(1, args.blocks + 1):
            flagged += bool(design.audit(args.factor, block).violations)
            honest += bool(design.audit(1.0, block).violations)
        print(
            f"{design.name:24} {design.epsilon:4g} {design.n_runs:5d}  "
            f"{flagged:4d}/{args.blocks:<6d} {honest:4d}/{args.blocks:<4d} "
            f"{time.perf_counter() - start:8.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
