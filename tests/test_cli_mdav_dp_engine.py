"""``dpfast release mdav-dp`` out of core: datasets, --memory-limit, the in-memory release."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast import cli
from dpfast._release import cli_spelling
from dpfast.datasets import adult, adult_taxonomy
from dpfast.exceptions import NoiseDominatesWarning

SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "hours-per-week": {"type": "float", "bounds": [1, 99]},
        "occupation": {
            "type": "categorical",
            "taxonomy": str(
                Path(dpfast.__file__).parent / "datasets/hierarchies/adult_hierarchy_occupation.csv"
            ),
        },
        "sex": {"type": "categorical", "protect": False},
    }
}
N = 5003


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    frame = adult("train", drop_missing=True)[["age", "hours-per-week", "occupation", "sex"]]
    frame = frame.iloc[:N].reset_index(drop=True)
    (tmp_path / "parts").mkdir()
    for i, (first, last) in enumerate([(0, 1000), (1000, 1001), (1001, N)]):
        table = pa.Table.from_pandas(frame.iloc[first:last], preserve_index=False)
        pq.write_table(table, tmp_path / "parts" / f"p{i}.parquet")
    frame.to_parquet(tmp_path / "people.parquet", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    return tmp_path


def _expected(workdir: Path, reference: str) -> dpfast.Release:
    frame = pd.read_parquet(workdir / "people.parquet")
    frame["hours-per-week"] = frame["hours-per-week"].astype(np.float64)  # declared float
    with cli_spelling(), warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        return dpfast.mdav_dp(
            frame,
            k=40,
            epsilon=1.5,
            bounds={"age": (17, 90), "hours-per-week": (1, 99)},
            taxonomies={"occupation": adult_taxonomy("occupation")},
            columns=["age", "hours-per-week", "occupation"],
            reference=reference,
            seed=5,
        )


def _release(workdir: Path, source: str, output: str, *extra: str) -> int:
    paths = [str(workdir / source), "-o", str(workdir / output)]
    options = ["--k", "40", "--epsilon", "1.5", "--schema", str(workdir / "schema.json")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        return cli.main(["release", "mdav-dp", *paths, *options, "--seed", "5", "--quiet", *extra])


@pytest.mark.parametrize(
    ("source", "output", "extra"),
    [
        ("parts", "released.parquet", ["--reference", "cycling"]),
        ("parts", "released", []),  # a dataset directory output
        ("people.parquet", "released.parquet", ["--memory-limit", "600kB"]),
    ],
)
def test_release_out_of_core_equals_in_memory(workdir, source, output, extra):
    reference = "cycling" if "cycling" in extra else "corners"
    expected = _expected(workdir, reference)
    assert _release(workdir, source, output, *extra) == 0
    got = pq.read_table(workdir / output).to_pandas()
    assert list(got.columns) == ["age", "hours-per-week", "occupation"]
    for name in got.columns:
        np.testing.assert_array_equal(got[name].to_numpy(), expected.data[name].to_numpy())
    public = json.loads((workdir / f"{output}.public-report.json").read_text(encoding="utf-8"))
    assert public["parameters"] == json.loads(json.dumps(expected.report.parameters))
    assert public["guarantee"] == expected.report.guarantee
    assert public["epsilon"] == expected.report.epsilon
    assert sorted(p.name for p in workdir.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("policy", ["shuffle", "keep"])
def test_every_unprotected_policy_runs_out_of_core(workdir, policy):
    # the out-of-core release of a policy is the in-memory command's, table for table
    extra = ["--unprotected", policy]
    assert _release(workdir, "people.parquet", "memory.parquet", *extra) == 0
    assert _release(workdir, "parts", "r.parquet", *extra) == 0
    got, want = pq.read_table(workdir / "r.parquet"), pq.read_table(workdir / "memory.parquet")
    assert got.equals(want)
    assert {p.name for p in workdir.iterdir() if p.name.startswith(".")} == set()


def test_mdav_names_mdav_dp_and_ir_dp_beyond_memory(workdir, capsys):
    paths = [str(workdir / "people.parquet"), "-o", str(workdir / "k.parquet"), "--quiet"]
    assert cli.main(["release", "mdav", *paths, "--k", "5", "--memory-limit", "100kB"]) == 2
    err = capsys.readouterr().err
    assert "use ir-dp" in err and "mdav-dp" in err and "out of core" in err
    assert cli.main(["release", "mdav", str(workdir / "parts"), "-o", "x.parquet", "--k", "5"]) == 2
    err = capsys.readouterr().err
    assert "ir-dp (individual ranking, proven DP) or mdav-dp" in err
    from dpfast.cli._runner import OUT_OF_CORE

    assert OUT_OF_CORE in err and "mdav-dp" in OUT_OF_CORE


def test_interrupt_before_publishing_refunds_the_budget_and_leaves_nothing(workdir, monkeypatch):
    from dpfast.budget import BudgetFile
    from dpfast.engines.outofcore._output import Output

    budget = workdir / "b.json"
    assert cli.main(["budget", "init", str(budget), "--total-epsilon", "2"]) == 0

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(Output, "_stitch", interrupted)
        assert _release(workdir, "parts", "released", "--budget", str(budget)) == 130
    assert BudgetFile(budget).remaining() == pytest.approx(2.0)
    assert not (workdir / "released").exists()
    assert [p.name for p in workdir.iterdir() if p.name.startswith(".")] == []  # no scratch
    assert _release(workdir, "parts", "released", "--budget", str(budget)) == 0
    assert BudgetFile(budget).remaining() == pytest.approx(0.5)
