"""Individual-ranking microaggregation without noise: the paper's utility reference."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from dpfast._release import Progress, Release, TableRun, numeric_columns
from dpfast._release.dispatch import is_dask_frame, is_spark_frame, on_dask, on_spark
from dpfast._validation import check_k_anonymity
from dpfast.partitions.ranking import group_means


def individual_ranking(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    metrics: bool = False,
    progress: Progress | None = None,
) -> Release:
    """Individual-ranking microaggregation without noise. Not differentially private.

    Each protected column is sorted (ties by row index) and every value is replaced by the
    mean of its rank group of ``k`` (the remainder joins the last group). Rows keep their
    order. Integer columns are rounded.

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table or 2-D numpy.ndarray
        Never modified.
    k : int
        Group size, ``2 <= k <= n_rows``. ``k = 1`` is refused: it would release
        the input unchanged.
    columns : sequence, optional
        Numeric columns to aggregate (default all); the others are copied unchanged.
    metrics : bool
        Compare each aggregated column with the original in ``release.private.metrics``
        (relative error, Jensen-Shannon divergence over the observed range, variance
        variation).
    progress : callable, optional
        Called as ``progress("microaggregation", done, total)``.

    Returns
    -------
    Release
        Its report says the release is not differentially private.

    Raises
    ------
    TypeError, ValueError
        On NaN or non-numeric columns, or ``k`` outside ``[2, n_rows]``.

    Examples
    --------
    >>> import numpy as np
    >>> individual_ranking(np.array([[1.0], [9.0], [2.0], [8.0]]), k=2).data.ravel().tolist()
    [1.5, 8.5, 1.5, 8.5]
    """
    if is_spark_frame(data):  # runs on Spark, docs/engines.md
        return on_spark("individual_ranking", locals())  # type: ignore[no-any-return]
    if is_dask_frame(data):  # runs on Dask, docs/engines.md
        return on_dask("individual_ranking", locals())  # type: ignore[no-any-return]
    run = TableRun("individual_ranking", data, progress)
    with run.phase("validate"):
        k = check_k_anonymity(k, run.table.n_rows, "individual ranking")
        protected = numeric_columns(run.table, columns)
    with run.phase("microaggregation"):
        for i, column in enumerate(protected):
            means = group_means(column.values, k)
            run.keep(column, np.rint(means) if column.integer else means)
            run.tick("microaggregation", i + 1, len(protected))
    result = run.assemble()
    return run.finish(
        result,
        parameters={"k": k, "remainder": "last group"},
        guarantee=(
            "NOT differentially private: values are replaced by exact group means of the "
            f"original data (groups of at least {k} per column), with no noise.",
            "none",
        ),
        metrics=run.metrics(protected) if metrics else None,
    )
