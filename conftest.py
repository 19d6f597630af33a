"""pytest configuration for every run in this repository: tests, doctests, benchmarks."""

from __future__ import annotations


def pytest_configure(config):
    """Ignore NoiseDominatesWarning in every run (see the comment below)."""
    # NoiseDominatesWarning is advice from public quantities, which tiny test and doctest
    # tables trigger everywhere; its own tests use pytest.warns, which sees it regardless.
    # Named only if the dpfast being run has it: bench-compare measures older revisions.
    from dpfast import exceptions

    if hasattr(exceptions, "NoiseDominatesWarning"):
        config.addinivalue_line("filterwarnings", "ignore::dpfast.exceptions.NoiseDominatesWarning")
