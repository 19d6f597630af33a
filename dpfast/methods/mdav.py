"""``mdav``: k-anonymity by MDAV-generic microaggregation (not differentially private)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from dpfast._release import (
    CategoricalColumn,
    EngineChoice,
    MetricsReleaseOptions,
    NumericColumn,
    Release,
    Run,
    Unpack,
    open_run,
    option,
    partition_inputs,
    protected_columns,
    release_options,
    taxonomy_parameters,
)
from dpfast._validation import check_k_anonymity, in_cli
from dpfast.accounting import names
from dpfast.dataflow.writes import WriteClusters
from dpfast.engines import Clusters, engine_name, parse_memory
from dpfast.exceptions import DPFastValueError
from dpfast.partitions.categorical import cluster_centroids
from dpfast.partitions.mdav import mdav_labels
from dpfast.taxonomy import Taxonomy

#: MDAV's working memory per value of the table it aggregates (the standardised matrix,
#: distances, the centroids and the output), as a multiple of 8 bytes.
BYTES_PER_VALUE = 6 * 8


def mdav(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    taxonomies: Mapping[Hashable, Taxonomy] | None = None,
    **options: Unpack[MetricsReleaseOptions],
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

    MDAV is sequential (O(n^2 / k) distance passes over the whole table), so it runs in
    memory only: for data beyond memory use :func:`dpfast.ir_dp` or :func:`dpfast.mdav_dp`,
    both proven DP and released on every engine.

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
    **options : Unpack[MetricsReleaseOptions]
        The options the releases share (:class:`dpfast.MetricsReleaseOptions`):
        ``metrics``, ``risk``, ``progress``, ``engine``, ``output`` and
        ``memory_limit``. MDAV runs in memory only: ``engine`` is ``"memory"`` or
        ``None``, any other is refused; ``memory_limit`` (e.g. ``"8GiB"``) refuses,
        before any work, a table whose MDAV would need more: about 48 bytes per
        protected value.

    Returns
    -------
    Release
        Its report states k-anonymity and says the release is not differentially private.

    Raises
    ------
    TypeError, ValueError
        As :func:`dpfast.ir_dp` (NaN, non-numeric columns, ...); ``k`` outside ``[2, n]``;
        an input or ``engine`` that is not in memory; a table beyond ``memory_limit``.

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
    given = release_options("mdav", options, MetricsReleaseOptions)
    limit = None if given["memory_limit"] is None else parse_memory(given["memory_limit"])
    _check_in_memory(data, given["engine"])
    in_memory = {**options, "memory_limit": None}  # a table in memory takes no memory limit
    with open_run("mdav", data, in_memory, MetricsReleaseOptions) as run:
        with run.phase("validate"):
            k = check_k_anonymity(k, run.n_rows, "mdav")
            numeric, categorical = protected_columns(run.engine, columns, taxonomies)
            if limit is not None:
                name = f"{option('memory_limit')} ({limit:,} bytes)"
                check_fits(run.n_rows, len(numeric) + len(categorical), limit, name)
        with run.phase("partition"):
            clusters = _partition(run, numeric, categorical, k)
            run.tick("partition", 1, 1)
        with run.phase("aggregate"):
            _aggregate(run, numeric, categorical, clusters)
        guarantee = (
            f"k-anonymity with k={k} on columns {names(run.released_names())}: every released "
            f"combination of these columns is shared by at least {k} rows. NOT "
            "differentially private: the clusters depend on every record, so this output "
            "must never feed a DP noise step (use mdav_dp).",
            "none",
        )
        return run.finish(
            parameters=_parameters(k, clusters.count, categorical),
            guarantee=guarantee,
            metrics=run.metrics(numeric, categorical),
        )


def _check_in_memory(data: Any, engine: str | EngineChoice | None) -> None:
    """Refuse, before anything is opened, an input or engine that is not in memory."""
    name = engine_name(data, engine)
    if name != "memory":
        raise DPFastValueError(
            f"mdav is sequential (O(n^2/k) distance passes) and runs in memory only, and "
            f"this release would run on the {name} engine; release a table held in memory "
            f"(pandas, Arrow, polars, NumPy) without {option('engine')}, or, for data "
            "beyond memory, use ir_dp (individual ranking) or mdav_dp (insensitive MDAV), "
            "both proven DP and released on every engine, or mdav on a sample"
        )


def check_fits(n_rows: int, n_columns: int, limit: int, limit_name: str) -> None:
    """Refuse a table whose MDAV would need more than ``limit`` bytes (``limit_name``'s).

    MDAV needs about :data:`BYTES_PER_VALUE` bytes per value it aggregates; the message
    names the methods that run beyond memory.
    """
    needed = n_rows * n_columns * BYTES_PER_VALUE
    if needed <= limit:
        return
    size = f"{needed / 2**30:.1f} GiB" if needed >= 2**30 else f"{needed / 2**20:.1f} MiB"
    cli = in_cli()
    ir_dp, mdav_dp = ("ir-dp", "mdav-dp") if cli else ("ir_dp", "mdav_dp")
    raise DPFastValueError(
        f"mdav would need about {size} for {n_rows:,} rows of {n_columns} columns, more "
        f"than {limit_name}; MDAV is sequential (O(n^2/k)) and runs in memory only. For data "
        f"this size use {ir_dp} (individual ranking) or {mdav_dp} (insensitive MDAV), both "
        f"proven DP and out of core{' with --memory-limit' if cli else ''}, or mdav on a "
        "sample"
    )


def _partition(
    run: Run,
    numeric: Sequence[NumericColumn],
    categorical: Sequence[CategoricalColumn],
    k: int,
) -> Clusters:
    """MDAV-generic's clusters of the protected columns (values held in memory)."""
    matrix, codes, taxonomies = partition_inputs(numeric, categorical, run.n_rows)
    return Clusters.of(mdav_labels(matrix, k, codes=codes, taxonomies=taxonomies))


def _aggregate(
    run: Run,
    numeric: Sequence[NumericColumn],
    categorical: Sequence[CategoricalColumn],
    clusters: Clusters,
) -> None:
    """Replace every value by its cluster's mean (numeric) or centroid (categorical)."""
    labels, count, sizes = clusters.labels, clusters.count, clusters.sizes
    values = []
    for column in numeric:
        means = np.bincount(labels, weights=column.values, minlength=count) / sizes
        values.append(np.rint(means) if column.integer else means)
    for cat in categorical:
        values.append(cluster_centroids(cat.taxonomy, cat.codes, labels, count))
    run.engine.write(WriteClusters([*numeric, *categorical], clusters, values, None))
    released = [c.name for c in numeric] + [c.name for c in categorical]
    for i, name in enumerate(released):
        run.keep(name)
        run.tick("aggregate", i + 1, len(released))


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
