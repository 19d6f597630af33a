"""``mdav_dp`` out of core gives the in-memory release bit for bit, whatever the split.

Also the cluster steps (``insensitive_clusters``, ``cluster_totals``:
dpfast/steps/clusters.py) and the engines' ``WriteClusters`` on the memory and
out-of-core engines, the held table read as passes against the fast path on skewed
columns, and ``mdav``'s refusal of any engine but memory.
"""

from __future__ import annotations

import warnings
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast.dataflow.writes import WriteClusters
from dpfast.datasets import adult, adult_taxonomy
from dpfast.engines import EngineChoice
from dpfast.engines.outofcore import _output as output_files
from dpfast.engines.outofcore._sources import ArrowSource, ParquetDataset
from dpfast.exceptions import NoiseDominatesWarning, PrivacyLeakWarning
from dpfast.steps import point_orders
from tests.engine_runs import apart_from_engine

BOUNDS = {"age": (17, 90), "hours-per-week": (1, 99), "share": (0.0, 100.0)}


def _table(n: int) -> pd.DataFrame:
    frame = adult("train", drop_missing=True)[["age", "hours-per-week", "occupation"]]
    frame = frame.iloc[:n].reset_index(drop=True)
    rng = np.random.default_rng(n)
    # beyond the bounds on both sides (clamped); a coarse grid: many ties in the distances
    frame["share"] = np.round(rng.uniform(-5, 105, len(frame)), 0)
    return frame


def _write_parts(frame: pd.DataFrame, directory: Path, cuts: list[int]) -> None:
    directory.mkdir()
    for i, (first, last) in enumerate(pairwise([0, *cuts, len(frame)])):
        part = pa.Table.from_pandas(frame.iloc[first:last], preserve_index=False)
        pq.write_table(part, directory / f"part-{i:03d}.parquet")


def _arguments(**changes):
    arguments = {
        "k": 7,
        "epsilon": 200.0,  # noise small beside the domains: the centroids show
        "bounds": BOUNDS,
        "taxonomies": {"occupation": adult_taxonomy("occupation")},
        "seed": 3,
    }
    arguments.update(changes)
    return arguments


def _in_memory(frame: pd.DataFrame, **arguments) -> dpfast.Release:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        return dpfast.mdav_dp(frame, **arguments)


def _mdav_dp(source, output: Path, memory: int, batch_rows: int = 1 << 20, **arguments):
    """``dpfast.mdav_dp`` out of core into ``output``: the release."""
    engine = EngineChoice("outofcore", {"batch_rows": batch_rows})
    return dpfast.mdav_dp(source, engine=engine, output=output, memory_limit=memory, **arguments)


def _out_of_core(source, output: Path, memory: int, batch_rows: int, **arguments):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        release = _mdav_dp(source, output, memory, batch_rows, **arguments)
    return release.report, release.private


def _assert_same(output: Path, expected: dpfast.Release, report, private) -> None:
    got = pq.read_table(output).to_pandas()
    assert list(got.columns) == list(expected.data.columns)
    for name in got.columns:
        np.testing.assert_array_equal(got[name].to_numpy(), expected.data[name].to_numpy())
        assert got[name].dtype == expected.data[name].dtype
    assert apart_from_engine(report) == apart_from_engine(expected.report)
    assert private.clamped == expected.private.clamped
    assert private.clamped_output == expected.private.clamped_output
    assert private.input_rows == expected.private.input_rows


class _Spy:
    """Count the sorted ranges, the ranges with ties, and the histogram refinements."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ranges = self.ties = self.runs = 0
        sort_range, gather, runs = (
            point_orders._sort_range,
            point_orders.Attributes.gather,
            point_orders.cut_ranges,
        )

        def counted_sort(*args, **kwargs):
            self.ranges += 1
            return sort_range(*args, **kwargs)

        def counted_gather(*args, **kwargs):
            self.ties += 1
            return gather(*args, **kwargs)

        def counted_runs(*args, **kwargs):
            self.runs += 1
            return runs(*args, **kwargs)

        monkeypatch.setattr(point_orders, "_sort_range", counted_sort)
        monkeypatch.setattr(point_orders.Attributes, "gather", counted_gather)
        monkeypatch.setattr(point_orders, "cut_ranges", counted_runs)


@pytest.mark.parametrize("reference", ["corners", "cycling"])
@pytest.mark.parametrize(
    ("cuts", "memory", "batch_rows", "k"),
    [
        ([], 2**30, 1 << 20, 7),  # one file, everything in one sorted range
        ([4000], 500_000, 1000, 50),  # two files, several ranges per order
        ([1, 2, 999, 5000, 5001, 9000], 600_000, 64, 40),  # seven files, 1-row ones too
    ],
)
def test_parquet_dataset_release_equals_in_memory(
    tmp_path, monkeypatch, reference, cuts, memory, batch_rows, k
):
    frame = _table(12_007)  # n % k != 0: a remainder cluster
    _write_parts(frame, tmp_path / "in", cuts)
    arguments = _arguments(reference=reference, k=k)
    expected = _in_memory(frame, **arguments)
    spy = _Spy(monkeypatch)
    output = tmp_path / "out.parquet"
    report, private = _out_of_core(
        ParquetDataset.open(tmp_path / "in"), output, memory, batch_rows, **arguments
    )
    _assert_same(output, expected, report, private)
    points = 2 if reference == "corners" else 16  # 2 ** 4 corners of 4 attributes
    assert spy.ties >= points  # ties in the distances, broken by values, codes, rows
    if memory < 2**30:
        assert spy.ranges > 2 * points  # several sorted ranges per order
    else:
        assert spy.ranges == points
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out.parquet"]


@pytest.mark.parametrize("batch_rows", [64, 1000, 1 << 20])
def test_arrow_source_batches_give_the_same_release(tmp_path, batch_rows):
    frame = _table(3001)
    arguments = _arguments(k=25, seed=11)
    expected = _in_memory(frame, **arguments)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    output = tmp_path / "out.parquet"
    report, private = _out_of_core(ArrowSource(table), output, 500_000, batch_rows, **arguments)
    _assert_same(output, expected, report, private)


@pytest.mark.parametrize("n", [7, 13, 14])
def test_one_or_two_clusters_and_the_remainder(tmp_path, n):
    # n < 2k: one cluster of every row, no sort; n = 2k: two clusters of k
    frame = _table(n)
    arguments = _arguments(k=7)
    expected = _in_memory(frame, **arguments)
    output = tmp_path / "out.parquet"
    table = pa.Table.from_pandas(frame, preserve_index=False)
    report, private = _out_of_core(ArrowSource(table), output, 2**26, 3, **arguments)
    _assert_same(output, expected, report, private)
    assert report.parameters["n_clusters"] == n // 7


def test_float_columns_explicit_points_and_a_dataset_directory_output(tmp_path, monkeypatch):
    monkeypatch.setattr(output_files, "FILE_ROWS", 2000)
    monkeypatch.setattr(output_files, "WRITE_ROWS", 500)
    rng = np.random.default_rng(5)
    # distances in a sliver of the key space: one top-bits bucket, refined histograms
    frame = pd.DataFrame({"x": rng.uniform(5.0, 5.001, 5003), "y": rng.uniform(0, 1e-3, 5003)})
    frame.loc[::50, "y"] = 0.0  # exact ties on one attribute
    bounds = {"x": (0.0, 10.0), "y": (0.0, 1.0)}
    points = [[0.0, 0.0], [10.0, 0.0], [0.0, 1.0]]
    arguments = {"k": 10, "epsilon": 50.0, "bounds": bounds, "reference": points, "seed": 2}
    expected = _in_memory(frame, **arguments)
    spy = _Spy(monkeypatch)
    report, private = _out_of_core(
        ArrowSource(pa.Table.from_pandas(frame)), tmp_path / "out", 200_000, 333, **arguments
    )
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "part-00000.parquet",
        "part-00001.parquet",
        "part-00002.parquet",
    ]
    _assert_same(tmp_path / "out", expected, report, private)
    assert spy.runs > 3 and spy.ranges > 3 * 2  # refined, in several ranges per order


def test_as_published_warns_as_in_memory(tmp_path):
    frame = _table(2000)
    arguments = _arguments(k=50, calibration="as_published", epsilon=1.0)
    with pytest.warns(PrivacyLeakWarning):
        expected = _in_memory(frame, **arguments)
    with pytest.warns(PrivacyLeakWarning, match="really spends"):
        report, private = _out_of_core(
            ArrowSource(pa.Table.from_pandas(frame)),
            tmp_path / "o.parquet",
            2**26,
            500,
            **arguments,
        )
    _assert_same(tmp_path / "o.parquet", expected, report, private)


def test_more_than_64_reference_points_are_refused_before_any_pass(tmp_path):
    table = pa.table({f"x{j}": np.zeros(300) for j in range(7)})
    bounds = {f"x{j}": (0.0, 1.0) for j in range(7)}
    with pytest.raises(ValueError, match=r"128 distinct points.*at most 64.*'corners'"):
        _mdav_dp(
            ArrowSource(table),
            tmp_path / "o.parquet",
            2**26,
            k=2,
            epsilon=1.0,
            bounds=bounds,
            reference="cycling",
        )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("memory", [140_000, 2**26])
def test_more_equal_distances_than_fit_are_cut_by_values_codes_then_rows(
    tmp_path, monkeypatch, memory
):
    rng = np.random.default_rng(4)
    n = 6000
    frame = pd.DataFrame(
        {
            "x": rng.integers(0, 3, n).astype(np.float64),
            "y": rng.integers(0, 3, n).astype(np.float64),
            "occupation": np.where(rng.random(n) < 0.5, "Sales", "Tech-support"),
        }
    )
    # 2,200 rows at (2, 2), half of them per occupation: more than a sort holds (1,024
    # rows at 140 kB), the same key, values and then code
    block = rng.permutation(n)[:2200]
    frame.loc[block, ["x", "y"]] = 2.0
    frame.loc[block, "occupation"] = np.where(np.arange(2200) % 2 == 0, "Sales", "Tech-support")
    arguments = {
        "k": 50,
        "epsilon": 5.0,
        "bounds": {"x": (0.0, 4.0), "y": (0.0, 4.0)},
        "taxonomies": {"occupation": adult_taxonomy("occupation")},
        "seed": 9,
    }
    expected = _in_memory(frame, **arguments)
    depth = [0]
    select = point_orders._Components.select

    def deepest(self, prefix, *rest):
        depth[0] = max(depth[0], len(prefix))
        return select(self, prefix, *rest)

    monkeypatch.setattr(point_orders._Components, "select", deepest)
    output = tmp_path / "o.parquet"
    table = pa.Table.from_pandas(frame, preserve_index=False)
    report, private = _out_of_core(ArrowSource(table), output, memory, 1000, **arguments)
    _assert_same(output, expected, report, private)
    assert depth[0] == (3 if memory < 2**20 else 0)  # key, x, y, then the codes


def test_cluster_arrays_must_fit_in_the_memory_limit(tmp_path):
    table = pa.table({"x": np.arange(100_000, dtype=np.float64)})
    with pytest.raises(ValueError, match=r"50,000 clusters.*raise the memory limit or k"):
        _mdav_dp(
            ArrowSource(table),
            tmp_path / "o.parquet",
            1_000_000,
            k=2,
            epsilon=1.0,
            bounds={"x": (0.0, 1e5)},
        )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (np.nan, r"'x' has \d+ non-finite value\(s\) \(first at row 1234: NaN or missing"),
        (None, r"'x' has \d+ non-finite value\(s\) \(first at row 1234: NaN or missing"),
    ],
)
def test_bad_value_leaves_no_output_and_no_scratch(tmp_path, value, message):
    values = [float(i % 97) for i in range(3000)]
    values[1234] = value
    table = pa.table({"x": pa.array(values, pa.float64())})
    with pytest.raises(ValueError, match=message):
        _mdav_dp(
            ArrowSource(table),
            tmp_path / "o.parquet",
            2**26,
            100,
            k=5,
            epsilon=1.0,
            bounds={"x": (0.0, 100.0)},
        )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("phase", ["order", "clusters", "writing"])
def test_interrupt_leaves_no_output(tmp_path, monkeypatch, phase):
    monkeypatch.setattr(output_files, "WRITE_ROWS", 500)
    table = pa.Table.from_pandas(_table(3000), preserve_index=False)

    def progress(name: str, done: int, total: int) -> None:
        if name.startswith(phase) and done > 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _out_of_core(
            ArrowSource(table),
            tmp_path / "o.parquet",
            400_000,
            500,
            progress=progress,
            **_arguments(),
        )
    assert list(tmp_path.iterdir()) == []


def test_merge_kernel_takes_the_first_untaken_rows_of_each_order():
    from dpfast._kernels import insensitive_mdav, mdav_stream

    rng = np.random.default_rng(0)
    orders = np.stack([rng.permutation(40) for _ in range(3)]).astype(np.int64)
    sequence = rng.integers(0, 3, size=40 // 4 - 1).astype(np.int64)
    expected = insensitive_mdav.take_in_order(orders, sequence, 4)
    # buffers of 3 rows and an output of 5: every refill and flush happens
    buffers = np.zeros((3, 3), dtype=np.int64)
    starts, stops, cursors = np.zeros(3, np.int64), np.zeros(3, np.int64), [0, 0, 0]
    taken, out, state = np.zeros(5, np.uint8), np.empty(5, np.int64), np.zeros(3, np.int64)
    labels, emitted = np.full(40, sequence.shape[0], dtype=np.int64), 0
    while True:
        status = mdav_stream.merge_orders(buffers, starts, stops, sequence, state, 4, taken, out)
        if status < 0:
            rows = out[: state[2]]
            labels[rows] = (emitted + np.arange(rows.shape[0])) // 4
            emitted += rows.shape[0]
            state[2] = 0
            if status == mdav_stream.MERGE_DONE:
                break
            continue
        part = orders[status, cursors[status] : cursors[status] + 3]
        buffers[status, : part.shape[0]] = part
        starts[status], stops[status] = 0, part.shape[0]
        cursors[status] += part.shape[0]
    np.testing.assert_array_equal(labels, expected)


def test_orderable_bits_keep_the_order_of_floats():
    from dpfast._kernels import mdav_stream

    keys = np.array([-np.inf, -2.5, -1e-300, 0.0, 1e-300, 0.5, 3.0, np.inf])
    bits = mdav_stream.orderable_bits(keys)
    assert (np.diff(bits.astype(object)) > 0).all()


# -- the cluster steps and WriteClusters ----------------------------------------------------------


def _engines(table: pa.Table, tmp_path: Path, memory: int = 600_000) -> list:
    """The memory engine and the out-of-core one (tiny batches, ranges sorted one by one)."""
    from dpfast.engines import Opening
    from dpfast.engines.memory import MemoryEngine
    from dpfast.engines.outofcore import OutOfCoreEngine

    return [
        MemoryEngine.open(table, Opening("test")),
        OutOfCoreEngine.open(
            ArrowSource(table),
            Opening("test", output=tmp_path / "o.parquet", memory_limit=memory),
            batch_rows=64,
        ),
    ]


@pytest.mark.parametrize("reference", ["corners", "cycling"])
def test_cluster_primitives_give_the_partition_on_the_memory_and_out_of_core_engines(
    tmp_path, reference
):
    from dpfast import noise, steps
    from dpfast._kernels import insensitive_mdav as kernels
    from dpfast.partitions.grid import Grid
    from dpfast.partitions.insensitive_mdav import insensitive_mdav_labels, reference_geometry

    frame, k = _table(3001), 25
    n, names = len(frame), ["age", "hours-per-week", "share"]
    taxonomy = adult_taxonomy("occupation")
    bounds = np.array([BOUNDS[name] for name in names], dtype=np.float64)
    codes = taxonomy.encode(frame["occupation"].tolist())
    labels = insensitive_mdav_labels(
        frame[names].to_numpy(np.float64), k, bounds, reference, codes=codes, taxonomies=[taxonomy]
    )
    count = int(labels.max()) + 1
    geometry = reference_geometry(reference, bounds[:, 0], bounds[:, 1], [taxonomy], n // k - 1)
    grids = [Grid.for_column(lo, hi, n, k) for lo, hi in bounds]
    key = noise.NoiseSource.from_seed(4).key("test", "row-order")
    order = noise.permutation(key, n)
    leaves = len(taxonomy.domain)
    for opened in _engines(pa.Table.from_pandas(frame, preserve_index=False), tmp_path):
        numeric = opened.numeric_columns(names)
        categorical = opened.categorical_columns({"occupation": taxonomy})
        clusters = steps.insensitive_clusters(opened.dataflow, numeric, categorical, geometry, k)
        assert clusters.count == count == n // k
        np.testing.assert_array_equal(clusters.sizes, np.bincount(labels))
        totals = steps.cluster_totals(opened.dataflow, clusters, numeric, grids, categorical)
        for j, name in enumerate(names):
            g = grids[j]
            values = frame[name].to_numpy(np.float64)
            sums, _, clamped = kernels.cluster_grid_sums(
                values, labels, count, g.lower, g.upper, g.gamma, g.d_int, g.warp
            )
            np.testing.assert_array_equal(totals.sums[j], sums)
            assert totals.clamped[j] == clamped
        expected_counts = np.bincount(labels * leaves + codes, minlength=count * leaves)
        np.testing.assert_array_equal(totals.counts[0], expected_counts.reshape(count, leaves))
        # each row's cluster number as its released value: in row order, then permuted
        ids = np.arange(count, dtype=np.float64)
        opened.write(WriteClusters(numeric[:1], clusters, [ids], None))
        coded = [ids, np.arange(count) % leaves]
        opened.write(WriteClusters([numeric[2], *categorical], clusters, coded, key))
        data = opened.publish(None, reindex=True).reveal()
        got = data if isinstance(data, pa.Table) else data.to_table()
        assert got.column_names == ["age", "occupation", "share"]
        np.testing.assert_array_equal(got.column("age").to_numpy(), labels)
        np.testing.assert_array_equal(got.column("share").to_numpy(), labels[order])
        released = taxonomy.encode(got.column("occupation").to_pylist())
        np.testing.assert_array_equal(released, labels[order] % leaves)
        opened.close()


@pytest.mark.parametrize("shape", ["uniform", "lognormal", "pareto"])
def test_the_partition_in_passes_is_the_fast_paths_on_skewed_columns(tmp_path, shape):
    import dataclasses

    from dpfast import steps
    from dpfast.dataflow.flow import Limits
    from dpfast.partitions.grid import Grid
    from dpfast.partitions.insensitive_mdav import reference_geometry

    rng = np.random.default_rng(17)
    n, k = 2000, 20
    draw = {
        "uniform": lambda: rng.uniform(0.0, 1000.0, n),
        "lognormal": lambda: rng.lognormal(7.0, 1.5, n),
        "pareto": lambda: (rng.pareto(1.1, n) + 1.0) * 100.0,
    }[shape]
    frame = pd.DataFrame({"income": np.round(draw(), 0), "sales": np.round(draw(), 1)})
    frame["occupation"] = adult("train", drop_missing=True)["occupation"].iloc[:n].to_numpy()
    taxonomy = adult_taxonomy("occupation")
    names = ["income", "sales"]
    upper = [float(np.quantile(frame[c], 0.9)) for c in names]  # the tail is clamped
    bounds = np.array([[0.0, hi] for hi in upper])
    geometry = reference_geometry("corners", bounds[:, 0], bounds[:, 1], [taxonomy], n // k - 1)
    grids = [Grid.for_column(lo, hi, n, k) for lo, hi in bounds]
    memory = _engines(pa.Table.from_pandas(frame, preserve_index=False), tmp_path)[0]
    numeric = memory.numeric_columns(names)
    categorical = memory.categorical_columns({"occupation": taxonomy})
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    flows = {
        "fast path": memory.dataflow,
        "passes": dataclasses.replace(
            memory.dataflow,
            table=None,
            limits=Limits(memory=400_000, batch_rows=97),
            scratch=lambda: scratch,
        ),
    }
    found = {}
    for way, flow in flows.items():
        clusters = steps.insensitive_clusters(flow, numeric, categorical, geometry, k)
        totals = steps.cluster_totals(flow, clusters, numeric, grids, categorical)
        labels = clusters.labels if clusters.held is None else clusters.held.read(0, n)
        found[way] = (clusters.count, clusters.sizes, labels, totals)
    assert flows["passes"].holds is False and found["passes"][2].shape == (n,)
    (count, sizes, labels, totals), (count2, sizes2, labels2, totals2) = found.values()
    assert count == count2 == n // k
    np.testing.assert_array_equal(sizes, sizes2)
    np.testing.assert_array_equal(labels, labels2)
    for j in range(2):
        np.testing.assert_array_equal(totals.sums[j], totals2.sums[j])
    assert totals.clamped == totals2.clamped and min(totals.clamped) >= n // 20
    np.testing.assert_array_equal(totals.counts[0], totals2.counts[0])


def test_a_held_dataflow_has_no_scratch_folder():
    from dpfast.dataflow.flow import Dataflow
    from dpfast.exceptions import DPFastRuntimeError
    from dpfast.io import as_table_data

    flow = Dataflow.held(as_table_data(pd.DataFrame({"x": [1.0, 2.0]})))
    with pytest.raises(DPFastRuntimeError, match="no scratch folder"):
        flow.scratch()


def test_the_out_of_core_partition_refuses_before_any_pass(tmp_path):
    from dpfast import steps
    from dpfast.partitions.insensitive_mdav import reference_geometry

    table = pa.table({f"x{j}": np.zeros(300) for j in range(7)})
    opened = _engines(table, tmp_path, memory=60_000)[1]
    numeric = opened.numeric_columns(table.column_names)
    cycling = reference_geometry("cycling", np.zeros(7), np.ones(7), [], 300 // 2 - 1)
    corners = reference_geometry("corners", np.zeros(2), np.ones(2), [], 300 // 2 - 1)

    class Refused:  # no pass may read the source
        names, schema, n_rows = table.column_names, table.schema, table.num_rows

        def map_column(self, *args):
            raise AssertionError("a pass before the refusal")

    opened.source = Refused()
    with pytest.raises(ValueError, match=r"128 distinct points; out of core, the clusters"):
        steps.insensitive_clusters(opened.dataflow, numeric, [], cycling, 2)
    with pytest.raises(ValueError, match=r"150 clusters.*more than half the memory limit"):
        steps.insensitive_clusters(opened.dataflow, numeric[:2], [], corners, 2)
    opened.close()
    assert list(tmp_path.iterdir()) == []


# -- mdav runs in memory only --------------------------------------------------------------


def test_mdav_refuses_every_engine_but_memory_before_opening_it(tmp_path):
    frame = pd.DataFrame({"x": np.arange(30.0), "y": np.arange(30.0) % 7})
    pq.write_table(pa.Table.from_pandas(frame), tmp_path / "in.parquet")
    message = r"mdav is sequential .* runs in memory only.*outofcore engine.*ir_dp.*mdav_dp"
    with pytest.raises(ValueError, match=message):
        dpfast.mdav(str(tmp_path / "in.parquet"), k=3, output=tmp_path / "o.parquet")
    with pytest.raises(ValueError, match=message):
        dpfast.mdav(frame, k=3, engine="outofcore")  # refused before output is asked for
    with pytest.raises(ValueError, match=message):
        dpfast.mdav(frame, k=3, engine=EngineChoice("outofcore", {"batch_rows": 8}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]
    assert dpfast.mdav(frame, k=3, engine="memory").data.shape == (30, 2)


def test_mdav_memory_limit_refuses_a_table_too_large_and_output_is_written(tmp_path):
    frame = pd.DataFrame({"x": np.arange(300.0), "y": (np.arange(300) % 7).astype(np.int64)})
    with pytest.raises(ValueError, match=r"mdav would need about .* more than memory_limit"):
        dpfast.mdav(frame, k=3, memory_limit=10_000)  # 300 rows x 2 columns x 48 bytes
    expected = dpfast.mdav(frame, k=3)
    release = dpfast.mdav(frame, k=3, memory_limit="1MiB", output=tmp_path / "o.parquet")
    pd.testing.assert_frame_equal(release.data, expected.data)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "o.parquet"), expected.data)
    assert apart_from_engine(release.report) == apart_from_engine(expected.report)
