"""The privacy-test harness: statistical checks of the ε-DP inequality (see harness.py)."""
