"""Individual-ranking microaggregation without noise: the paper's utility reference."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast._release import MetricsReleaseOptions, Release, Unpack, open_run
from dpfast._validation import check_columns, check_k_anonymity
from dpfast.dataflow.writes import WriteRanked
from dpfast.exceptions import DPFastValueError
from dpfast.partitions.ranking import RankGroups, Remainder


def individual_ranking(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    remainder: Remainder = "middle",
    **options: Unpack[MetricsReleaseOptions],
) -> Release:
    """Individual-ranking microaggregation without noise. Not differentially private.

    Each protected column is sorted (ties by row index) and every value is replaced by the
    mean of its rank group of ``k``; one group also holds the ``n mod k`` values left
    over, as ``remainder`` says. Rows keep their order. Integer columns are rounded.

    Parameters
    ----------
    data : table, pyarrow.dataset.Dataset, Parquet path or glob, Spark or Dask DataFrame
        Never modified; released where it lives, as :func:`dpfast.ir_dp` (docs/engines.md).
    k : int
        Group size, ``2 <= k <= n_rows``. ``k = 1`` is refused: it would release
        the input unchanged.
    columns : sequence, optional
        Numeric columns to aggregate (default all); the others are copied unchanged.
    remainder : {"middle", "last"}
        The rank group that holds the ``n mod k`` values left over: ``"middle"``
        (default; group ``n // k // 2``, among typical values, where the larger group
        costs least) or ``"last"`` (the group of the largest values, as sdcMicro does; for
        comparison with it). A public rule of ``(n, k)``; docs/privacy.md, "Which rank
        group holds the remainder".
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
        On NaN or non-numeric columns, ``k`` outside ``[2, n_rows]``, or an unknown
        ``remainder``.

    Examples
    --------
    >>> import numpy as np
    >>> individual_ranking(np.array([[1.0], [9.0], [2.0], [8.0]]), k=2).data.ravel().tolist()
    [1.5, 8.5, 1.5, 8.5]
    >>> values = np.array([[1.0], [2], [3], [4], [5], [6], [7], [8], [9], [1000]])
    >>> individual_ranking(values, k=3).data.ravel().tolist()
    [2.0, 2.0, 2.0, 5.5, 5.5, 5.5, 5.5, 339.0, 339.0, 339.0]
    >>> individual_ranking(values, k=3, remainder="last").data.ravel().tolist()
    [2.0, 2.0, 2.0, 5.0, 5.0, 5.0, 256.0, 256.0, 256.0, 256.0]
    """
    with open_run("individual_ranking", data, options, MetricsReleaseOptions) as run:
        n = run.n_rows
        with run.phase("validate"):
            k = check_k_anonymity(k, n, "individual ranking")
            layout = RankGroups(n, k, remainder)
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
                run.engine.write(WriteRanked(column, layout, GroupMeans(layout, column.integer)))
                run.keep(column.name)
                run.tick("microaggregation", i + 1, len(protected))
        return run.finish(
            parameters={"k": k, "remainder": layout.remainder},
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

    layout: RankGroups
    integer: bool

    def __call__(self, sums: np.ndarray) -> np.ndarray:
        """Return the groups' means, each sum over its group's size in ``layout``."""
        means: np.ndarray = sums / self.layout.sizes
        return np.rint(means) if self.integer else means
