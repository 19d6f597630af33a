"""Test configuration shared by the suite."""

# tests/reference holds slow reference implementations imported by the tests; they are not
# test files, and collecting them for doctests would import them outside their package.
collect_ignore = ["reference"]
