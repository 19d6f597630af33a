"""dpfast: fast differentially private release of tabular microdata."""

from __future__ import annotations

__version__ = "0.1.0"
