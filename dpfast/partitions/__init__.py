"""Deterministic groupings that no DP decision touches.

* :mod:`~dpfast.partitions.grid`: the power-of-two integer grid of a public domain;
* :mod:`~dpfast.partitions.ranking`: individual ranking's rank groups of one column;
* :mod:`~dpfast.partitions.mdav`: standard MDAV-generic (k-anonymity, never DP);
* :mod:`~dpfast.partitions.insensitive_mdav`: insensitive MDAV's data-independent order;
* :mod:`~dpfast.partitions.categorical`: categorical cluster qualities and centroids.
"""
