"""The harness, its designs and the power script serve tests/test_privacy.py; no tests here."""

# Collecting them for doctests would import them a second time, outside their package.
collect_ignore = ["harness.py", "designs.py", "power.py"]
