"""Test configuration shared by the suite."""

# tests/reference holds slow reference implementations imported by the tests; they are not
# test files, and collecting them for doctests would import them outside their package.
collect_ignore = ["reference"]


def pytest_configure(config):
    # Advice from public quantities, which tiny test tables trigger everywhere; the tests of
    # the warning itself use pytest.warns, which sees it regardless.
    config.addinivalue_line("filterwarnings", "ignore::dpfast.exceptions.NoiseDominatesWarning")
