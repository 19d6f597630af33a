"""Exceptions and warnings raised by dpfast."""

from __future__ import annotations


class DPFastError(Exception):
    """Base class of dpfast's own errors."""


class BudgetExceededError(DPFastError, ValueError):
    """A step would spend more privacy budget than the ledger has left."""


class PrivacyLeakWarning(UserWarning):
    """A parameter was derived from the data, so the release is not differentially private."""


class UnsafeSamplerWarning(UserWarning):
    """A sampler that is not safe for publication (floating-point leakage) was selected."""


class UnprovenReleaseWarning(PrivacyLeakWarning):
    """A release mode that no proof covers was chosen; its report says it is not proven DP."""


class NoiseDominatesWarning(UserWarning):
    """A column's noise scale exceeds half its public domain: the release is mostly noise."""
