"""Individual-ranking microaggregation without noise: the paper's utility reference."""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast._release import EngineChoice, Progress, Release, open_run
from dpfast._validation import check_columns, check_k_anonymity
from dpfast.exceptions import DPFastValueError


def individual_ranking(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    metrics: bool = False,
    risk: bool | Mapping[str, Any] = False,
    progress: Progress | None = None,
    engine: str | EngineChoice | None = None,
    output: str | os.PathLike[str] | None = None,
    memory_limit: str | int | None = None,
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
    metrics : bool
        Compare each aggregated column with the original in ``release.private.metrics``
        (relative error, Jensen-Shannon divergence over the observed range, variance
        variation).
    risk : bool or dict
        Disclosure risk, each released row paired with its source through the release's
        own order, into ``release.private.risk`` (private; in memory only; a dict says
        what to measure: docs/risk.md#risk-at-release-time).
    progress : callable, optional
        Called as ``progress("microaggregation", done, total)``.
    engine : str or EngineChoice, optional
        Where the release runs: ``"memory"``, ``"outofcore"``, ``"spark"`` or ``"dask"``
        (default: chosen from ``data``'s type); see :func:`dpfast.engines.open_engine`.
    output : str or path, optional
        Where the release is written: a ``.parquet`` file or a directory of Parquet
        files (on Spark and Dask always a directory), published at once when complete
        (required out of core).
    memory_limit : str or int, optional
        The working memory of a release out of core (e.g. ``"4GiB"``; default 4 GiB).
        The release does not depend on it.

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
    with open_run(
        "individual_ranking",
        data,
        engine,
        output,
        memory_limit,
        progress,
        metrics=metrics,
        risk=risk,
    ) as run:
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
            metrics=run.metrics(protected) if metrics else None,
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
