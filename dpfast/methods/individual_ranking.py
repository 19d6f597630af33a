"""Individual-ranking microaggregation without noise: the paper's utility reference."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast._release import MetricsReleaseOptions, Release, Unpack, open_run
from dpfast._validation import check_columns, check_k_anonymity
from dpfast.exceptions import DPFastValueError


def individual_ranking(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    **options: Unpack[MetricsReleaseOptions],
) -> Release:
    """Individual-ranking microaggregation without noise. Not differentially private.

    Each protected column is sorted (ties by row index) and every value is replaced by the
    mean of its rank group of ``k`` (the remainder joins the last group). Rows keep their
    order. Integer columns are rounded.

    Parameters
    ----------
    data : table, pyarrow.dataset.Dataset, Parquet path or glob, Spark or Dask DataFrame
        Never modified; released where it lives, as :func:`dpfast.ir_dp` (docs/engines.md).
    k : int
        Group size, ``2 <= k <= n_rows``. ``k = 1`` is refused: it would release
        the input unchanged.
    columns : sequence, optional
        Numeric columns to aggregate (default all); the others are copied unchanged.
    **options : Unpack[MetricsReleaseOptions]
        The options the releases share (:class:`dpfast.MetricsReleaseOptions`):
        ``metrics``, ``risk``, ``progress``, ``engine``, ``output`` and
        ``memory_limit``. ``metrics``' Jensen-Shannon divergence is over the observed
        range; ``progress`` is called as ``progress("microaggregation", done, total)``.

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
    with open_run("individual_ranking", data, options, MetricsReleaseOptions) as run:
        n = run.n_rows
        with run.phase("validate"):
            k = check_k_anonymity(k, n, "individual ranking")
            selected = check_columns(columns, run.engine.names)
            protected = run.engine.numeric_columns(selected, categorical=False)
            needed = (n // k) * 8 * 3
            memory = run.engine.column_memory(1, n_threads=1, held_bytes=needed)
            if needed > memory:
                raise DPFastValueError(
                    f"{n:,} rows with k={k} make {n // k:,} rank groups per column, whose "
                    f"means need {needed:,} bytes, more than the memory limit; raise the "
                    "memory limit or k"
                )
        with run.phase("microaggregation"):
            for i, column in enumerate(protected):
                run.engine.write_ranked(column, k, GroupMeans(n, k, column.integer))
                run.keep(column.name)
                run.tick("microaggregation", i + 1, len(protected))
        return run.finish(
            parameters={"k": k, "remainder": "last group"},
            guarantee=(
                "NOT differentially private: values are replaced by exact group means of the "
                f"original data (groups of at least {k} per column), with no noise.",
                "none",
            ),
            metrics=run.metrics(protected),
        )


@dataclass(frozen=True)
class GroupMeans:
    """Every rank group's mean from its float sum (rounded for an integer column)."""

    n: int
    k: int
    integer: bool

    def __call__(self, sums: np.ndarray) -> np.ndarray:
        """Return the groups' means: ``k`` rows each, the remainder in the last group."""
        sizes = np.full(sums.shape[0], self.k, dtype=np.int64)
        sizes[-1] = self.n - self.k * (sums.shape[0] - 1)
        means = sums / sizes
        return np.rint(means) if self.integer else means
