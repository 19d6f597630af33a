"""The harness is a library for tests/test_privacy.py, not a test file."""

# Collecting it for doctests would import it a second time, outside its package.
collect_ignore = ["harness.py"]
