"""``mdav``: standard MDAV microaggregation, k-anonymity on the chosen columns (not DP)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from dpfast._validation import check_k
from dpfast.accounting import PhaseTimer, Report, names
from dpfast.io import as_table_data
from dpfast.mdav import mdav_labels
from dpfast.release._common import (
    Progress,
    Release,
    _categorical_metrics,
    _finish,
    _report_progress,
    _split_columns,
    _unprotected_note,
    _utility_metrics,
)
from dpfast.release_mdav._common import _partition_inputs, _taxonomy_parameters
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
    MDAV-generic (:func:`dpfast.mdav.mdav_labels`); every value is replaced by its
    cluster's mean. Each released combination of these columns is then shared by at least
    ``k`` rows. Rows keep their order; integer columns are rounded.

    Categorical columns (given a taxonomy) join the distance with their semantic distance
    divided by the taxonomy's largest distance ``Δq`` (so a term lies in ``[0, 1]``, next
    to numeric terms in standard deviations), and are replaced by their cluster's
    marginality-based centroid: the taxonomy leaf of least total semantic distance to the
    cluster's values (SPEC §3.3; ties to the first leaf in label order). Mixed data take
    an exact O(n^2 / k) scan instead of the numeric k-d tree.

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table or 2-D numpy.ndarray
    k : int
        Minimum cluster size, ``1 <= k <= n_rows``.
    columns : sequence, optional
        The quasi-identifiers to aggregate together (default all). Others pass through.
    taxonomies : mapping, optional
        ``{column: Taxonomy}``: the protected categorical columns, as in
        :func:`dpfast.ir_dp`. Their values must be leaves of the taxonomy; the released
        column keeps its kind.
    metrics : bool
        Add relative error and Jensen-Shannon divergence per column to the report.
    progress : callable, optional
        Called as ``progress(phase, done, total)``.

    Returns
    -------
    Release
        Its report states k-anonymity and says the release is not differentially private.

    Raises
    ------
    TypeError, ValueError
        As :func:`dpfast.ir_dp` (NaN, non-numeric columns, ``k`` outside ``[1, n]``, ...).

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
    timer = PhaseTimer()
    with timer.phase("validate"):
        table = as_table_data(data)
        k = check_k(k, table.n_rows)
        protected, categorical = _split_columns(table, columns, taxonomies)
    with timer.phase("partition"):
        matrix, codes, found = _partition_inputs(protected, categorical, table.n_rows)
        labels = mdav_labels(matrix, k, codes=codes, taxonomies=found)
        _report_progress(progress, "partition", 1, 1)
    n_clusters = int(labels.max()) + 1
    sizes = np.bincount(labels, minlength=n_clusters)
    released: dict[Hashable, np.ndarray] = {}
    with timer.phase("aggregate"):
        for i, column in enumerate(protected):
            means = np.bincount(labels, weights=column.values, minlength=n_clusters) / sizes
            out = means[labels]
            released[column.name] = _finish(column, np.rint(out) if column.integer else out)
            _report_progress(progress, "aggregate", i + 1, len(protected) + len(categorical))
        released_codes: dict[Hashable, np.ndarray] = {}
        for i, cat in enumerate(categorical):
            centre = cat.taxonomy.centroid(cat.codes, labels, n_clusters)
            released_codes[cat.name] = centre[labels]
            released[cat.name] = table.categorical_output(
                cat.name, centre[labels], cat.taxonomy.domain
            )
            _report_progress(
                progress, "aggregate", len(protected) + i + 1, len(protected) + len(categorical)
            )
    with timer.phase("assemble"):
        result = table.rebuild(released, None)
    extra: dict[str, Any] = {}
    if metrics:
        with timer.phase("metrics"):
            extra["metrics"] = _utility_metrics(protected, released, {}, None)
            if categorical:
                _categorical_metrics(extra["metrics"], categorical, released_codes, {})
    protected_names = names([c.name for c in protected] + [c.name for c in categorical])
    unprotected = [str(n) for n in table.names if n not in released]
    mixed: dict[str, Any] = {}
    if categorical:
        mixed = {
            "categorical_distance": "semantic distance / Δq (the taxonomy's largest "
            "distance), squared and added to the numeric terms",
            "categorical_centroid": "marginality-based (SPEC §3.3) over the taxonomy's leaves",
            "taxonomies": _taxonomy_parameters(categorical),
        }
    report = Report(
        method="mdav",
        parameters={
            "k": k,
            "n_clusters": n_clusters,
            "standardisation": "population variance (weight 1 for constant columns)",
            "ties": "lowest row index",
            **mixed,
        },
        epsilon=None,
        ledger=[],
        guarantee=(
            f"k-anonymity with k={k} on columns {protected_names}: every released "
            f"combination of these columns is shared by at least {k} rows. NOT "
            "differentially private: the clusters depend on every record, so this output "
            "must never feed a DP noise step (use mdav_dp)." + _unprotected_note(unprotected)
        ),
        guarantee_level="none",
        protected_columns=protected_names,
        unprotected_columns=unprotected,
        clamped={},
        seeded=False,
        sampler=None,
        timings=timer.timings,
        n_rows=table.n_rows,
        extra=extra,
    )
    return Release(result, report)
