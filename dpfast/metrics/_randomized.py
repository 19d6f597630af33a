"""Reconstructing category frequencies after randomized response.

See docs/design.md#randomized-response.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import pandas as pd

from dpfast._validation import quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.io import as_table_data


def reconstruct_distribution(
    released: Any,
    column: Hashable,
    retention: float | None = None,
    *,
    domain: Any = None,
) -> pd.DataFrame:
    """Estimate a column's original category frequencies after randomized response.

    The unbiased estimator of docs/design.md#randomized-response: with ``n`` released rows, ``m``
    public categories, retention ``p`` and observed frequencies ``λ̂_y = f_y / n``,
    ``π̂_y = (λ̂_y - (1 - p) / m) / p`` is unbiased because ``E[λ̂_y] = p π_y + (1 - p) / m``;
    its standard error is ``sqrt(λ̂_y (1 - λ̂_y) / n) / p``.
    Estimates may fall outside ``[0, 1]``; they are not clipped (clipping would bias them).
    Reading only the released data, this is post-processing: it costs no budget.

    Parameters
    ----------
    released : Release, pandas.DataFrame, pyarrow.Table or 2-D numpy.ndarray
        The output of :func:`dpfast.randomized_response`, or its data.
    column : hashable
        The perturbed column.
    retention : float, optional
        The retention ``p`` used, in ``(0, 1)``. Default: the one in the release's report
        (the exact value sampled).
    domain : sequence or Taxonomy, optional
        The public categories. Default: the release's report.

    Returns
    -------
    pandas.DataFrame
        Indexed by category, with columns ``observed`` (``λ̂``), ``estimate`` (``π̂``) and
        ``standard_error``.

    Raises
    ------
    ValueError
        A retention outside ``(0, 1)``, no domain, or released values outside it.

    Examples
    --------
    >>> import pandas as pd
    >>> released = pd.DataFrame({"c": ["a"] * 70 + ["b"] * 30})
    >>> reconstruct_distribution(released, "c", 0.5, domain=["a", "b"])["estimate"].round(2)
    a    0.9
    b    0.1
    Name: estimate, dtype: float64
    """
    report = getattr(released, "report", None)
    data = getattr(released, "data", released) if report is not None else released
    parameters = getattr(report, "parameters", {}) if report is not None else {}
    if retention is None:
        if "retention" not in parameters:
            raise DPFastValueError(
                "retention is required unless released is a Release from "
                "randomized_response; pass the retention p used"
            )
        retention = parameters["retention"]
    if domain is None:
        extra = getattr(report, "extra", {}) if report is not None else {}
        if "domain" not in extra:
            raise DPFastValueError(
                "domain is required unless released is a Release from randomized_response; "
                "pass the public list of categories"
            )
        domain = extra["domain"]
    for attribute in ("leaves", "domain"):
        if not isinstance(domain, (list, tuple, np.ndarray, pd.Index)) and hasattr(
            domain, attribute
        ):
            domain = getattr(domain, attribute)
            domain = domain() if callable(domain) else domain
            break
    if isinstance(retention, bool) or not isinstance(retention, (int, float, np.number)):
        raise DPFastTypeError(f"retention must be a number, got {quoted(retention)}")
    p = float(retention)
    if not 0.0 < p < 1.0:
        raise DPFastValueError(
            f"retention must be in (0, 1), got {quoted(retention)}; with 0 the release carries no "
            "information about the original values"
        )
    categories = pd.Index(list(domain))
    if len(categories) < 2 or not categories.is_unique:
        raise DPFastValueError("domain must hold at least 2 distinct categories")
    table = as_table_data(data)
    if column not in table.names:
        raise DPFastValueError(f"no column {quoted(column)}; the table has {quoted(table.names)}")
    values = table.column(column)
    n = values.shape[0]
    if n == 0:
        raise DPFastValueError(f"column {quoted(column)} is empty; nothing to estimate")
    codes = categories.get_indexer(values)
    if (codes < 0).any():
        bad = pd.unique(values[codes < 0])[:5]
        raise DPFastValueError(
            f"column {quoted(column)} holds value(s) outside the domain: {quoted(list(bad))}; pass "
            "the "
            "domain used for the release"
        )
    m = len(categories)
    observed = np.bincount(codes, minlength=m) / n
    estimate = (observed - (1.0 - p) / m) / p
    error = np.sqrt(observed * (1.0 - observed) / n) / p
    return pd.DataFrame(
        {"observed": observed, "estimate": estimate, "standard_error": error},
        index=categories,
    )
