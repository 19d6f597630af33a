"""The harness is a library for tests/test_privacy.py, not a test file."""

# Collecting them for doctests would import them a second time, outside their package.
collect_ignore = ["harness.py", "designs.py", "power.py"]
