"""Multivariate microaggregation releases: ``mdav`` (k-anonymity) and ``mdav_dp`` (DP).

Both take a pandas DataFrame, an Arrow table or a 2-D NumPy array and return a
:class:`~dpfast.release.Release` of the same kind, like the other releases. Categorical
columns are protected with their taxonomies (``taxonomies=``), as in :func:`dpfast.ir_dp`.
"""

from __future__ import annotations

from dpfast.release_mdav._mdav import mdav
from dpfast.release_mdav._mdav_dp import CALIBRATIONS, mdav_dp

__all__ = ["CALIBRATIONS", "mdav", "mdav_dp"]
