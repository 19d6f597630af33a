"""``mdav``: k-anonymity by MDAV-generic microaggregation (not differentially private)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from dpfast._release import (
    CategoricalColumn,
    NumericColumn,
    Progress,
    Release,
    TableRun,
    partition_inputs,
    split_columns,
    taxonomy_parameters,
)
from dpfast._validation import check_k_anonymity
from dpfast.accounting import names
from dpfast.partitions.categorical import cluster_centroids
from dpfast.partitions.mdav import mdav_labels
from dpfast.taxonomy import Taxonomy


def mdav(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    taxonomies: Mapping[Hashable, Taxonomy] | None = None,
    metrics: bool = False,
    progress: Progress | None = None,
) -> Release:
    """Release with standard MDAV microaggregation: k-anonymity on the chosen columns, not DP.

    The protected columns are standardised (population variance) and partitioned by
    MDAV-generic (:func:`dpfast.partitions.mdav.mdav_labels`); every value is replaced by its
    cluster's mean. Each released combination of these columns is then shared by at least
    ``k`` rows. Rows keep their order; integer columns are rounded.

    Categorical columns (given a taxonomy) join the distance with their semantic distance
    divided by the taxonomy's largest distance ``Δq`` (so a term lies in ``[0, 1]``, next
    to numeric terms in standard deviations), and are replaced by their cluster's
    marginality-based centroid: the taxonomy leaf of least total semantic distance to the
    cluster's values (docs/design.md#semantic-centroid; ties to the first leaf in label order).
    Mixed data take an exact O(n^2 / k) scan instead of the numeric k-d tree.

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table or 2-D numpy.ndarray
    k : int
        Minimum cluster size, ``2 <= k <= n_rows``. ``k = 1`` is refused: it would release
        the input unchanged.
    columns : sequence, optional
        The quasi-identifiers to aggregate together (default all). Others pass through.
    taxonomies : mapping, optional
        ``{column: Taxonomy}``: the protected categorical columns, as in
        :func:`dpfast.ir_dp`. Their values must be leaves of the taxonomy; the released
        column keeps its kind.
    metrics : bool
        Add relative error and Jensen-Shannon divergence per column to the private
        report (``release.private.metrics``).
    progress : callable, optional
        Called as ``progress(phase, done, total)``.

    Returns
    -------
    Release
        Its report states k-anonymity and says the release is not differentially private.

    Raises
    ------
    TypeError, ValueError
        As :func:`dpfast.ir_dp` (NaN, non-numeric columns, ...); ``k`` outside ``[2, n]``.

    Notes
    -----
    MDAV's clusters depend on every record: one changed record can change all of them.
    Never add DP noise to its output; use :func:`mdav_dp` for that.

    Examples
    --------
    >>> import numpy as np
    >>> data = np.array([[2.0, 1.0], [3.0, 2.0], [3.0, 2.0], [20.0, 19.0], [21.0, 20.0]])
    >>> mdav(data, k=2).data[:, 0].tolist()
    [2.6666666666666665, 2.6666666666666665, 2.6666666666666665, 20.5, 20.5]
    >>> import pandas as pd
    >>> from dpfast.taxonomy import Taxonomy
    >>> jobs = Taxonomy.from_mapping({"*": {"Care": ["nurse", "doctor"], "Air": ["pilot"]}})
    >>> table = pd.DataFrame({"age": [30, 32, 31, 60, 62, 61],
    ...                       "job": ["nurse", "doctor", "nurse", "pilot", "pilot", "nurse"]})
    >>> mdav(table, k=3, taxonomies={"job": jobs}).data["job"].tolist()
    ['nurse', 'nurse', 'nurse', 'pilot', 'pilot', 'pilot']
    """
    run = TableRun("mdav", data, progress)
    with run.phase("validate"):
        k = check_k_anonymity(k, run.table.n_rows, "mdav")
        numeric, categorical = split_columns(run.table, columns, taxonomies)
    with run.phase("partition"):
        matrix, codes, found = partition_inputs(numeric, categorical, run.table.n_rows)
        labels = mdav_labels(matrix, k, codes=codes, taxonomies=found)
        run.tick("partition", 1, 1)
    with run.phase("aggregate"):
        _aggregate(run, numeric, categorical, labels)
    result = run.assemble()

    n_clusters = int(labels.max()) + 1
    return run.finish(
        result,
        parameters=_parameters(k, n_clusters, categorical),
        guarantee=(
            f"k-anonymity with k={k} on columns {names(list(run.released))}: every released "
            f"combination of these columns is shared by at least {k} rows. NOT "
            "differentially private: the clusters depend on every record, so this output "
            "must never feed a DP noise step (use mdav_dp).",
            "none",
        ),
        metrics=run.metrics(numeric, categorical) if metrics else None,
    )


def _aggregate(
    run: TableRun,
    numeric: Sequence[NumericColumn],
    categorical: Sequence[CategoricalColumn],
    labels: np.ndarray,
) -> None:
    """Replace every value by its cluster's mean (numeric) or centroid (categorical)."""
    n_clusters = int(labels.max()) + 1
    sizes = np.bincount(labels, minlength=n_clusters)
    total = len(numeric) + len(categorical)
    for i, column in enumerate(numeric):
        means = np.bincount(labels, weights=column.values, minlength=n_clusters) / sizes
        out = means[labels]
        run.keep(column, np.rint(out) if column.integer else out)
        run.tick("aggregate", i + 1, total)
    for i, cat in enumerate(categorical):
        centre = cluster_centroids(cat.taxonomy, cat.codes, labels, n_clusters)
        run.keep_codes(cat, centre[labels], clamped=False)
        run.tick("aggregate", len(numeric) + i + 1, total)


def _parameters(
    k: int, n_clusters: int, categorical: Sequence[CategoricalColumn]
) -> dict[str, Any]:
    parameters: dict[str, Any] = {
        "k": k,
        "n_clusters": n_clusters,
        "standardisation": "population variance (weight 1 for constant columns)",
        "ties": "lowest row index",
    }
    if categorical:
        parameters["categorical_distance"] = (
            "semantic distance / Δq (the taxonomy's largest distance), squared and added to "
            "the numeric terms"
        )
        parameters["categorical_centroid"] = (
            "marginality-based (docs/design.md#semantic-centroid) over the taxonomy's leaves"
        )
        parameters["taxonomies"] = taxonomy_parameters(categorical)
    return parameters
