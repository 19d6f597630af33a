"""The command line, run as a user runs it: ``python -m dpfast ...`` in a subprocess."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast as dpfast_api
from dpfast import cli

ROOT = Path(__file__).resolve().parents[1]
N_ROWS = 60
SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 200000]},
        "job": {"type": "categorical", "protect": False},
    }
}


def dpfast(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("DPFAST_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "dpfast", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def people(n: int = N_ROWS) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "age": rng.integers(17, 91, n),
            "income": rng.uniform(0, 150_000, n),
            "job": rng.choice(["clerk", "nurse", "pilot"], n),
            "note": [f"row {i}" for i in range(n)],  # not in the schema: passes through
        }
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    frame = people()
    frame.to_csv(tmp_path / "people.csv", index=False)
    frame.to_parquet(tmp_path / "people.parquet", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    return tmp_path


def read_output(path: Path) -> pd.DataFrame:
    if path.suffix == ".csv":
        return pd.read_csv(path)
    return pq.read_table(path).to_pandas()


def assert_one_line_error(result: subprocess.CompletedProcess[str], match: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("dpfast: error: "), lines[0]
    assert match in lines[0], lines[0]
    assert "Traceback" not in result.stderr


def assert_no_output(directory: Path, before: set[str]) -> None:
    assert {p.name for p in directory.iterdir()} == before


def check_report(output: Path, method: str, epsilon: float | None) -> dict[str, Any]:
    report = json.loads(Path(f"{output}.public-report.json").read_text(encoding="utf-8"))
    for key in ("method", "epsilon", "ledger", "guarantee"):
        assert key in report
    assert report["method"] == method
    if epsilon is None:
        assert report["epsilon"] is None
        assert report["ledger"] == []
    else:
        assert report["epsilon"] == pytest.approx(epsilon)
        assert sum(e["epsilon"] for e in report["ledger"]) == pytest.approx(epsilon)
    return report  # type: ignore[no-any-return]


# -- success paths ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "target"), [("people.csv", "out.parquet"), ("people.parquet", "out.csv")]
)
def test_ir_dp(workdir: Path, source: str, target: str) -> None:
    result = dpfast(
        "release",
        "ir-dp",
        source,
        "-o",
        target,
        "--k",
        "5",
        "--epsilon",
        "1",
        "--schema",
        "schema.json",
        "--seed",
        "3",
        cwd=workdir,
    )
    assert result.returncode == 0, result.stderr
    output = workdir / target
    report = check_report(output, "ir_dp", 1.0)
    assert report["protected_columns"] == ["age", "income"]
    assert set(report["unprotected_columns"]) == {"job", "note"}
    assert report["unprotected"] == "drop" and report["guarantee_level"] == "proven"
    assert report["seeded"] is True
    got = read_output(output)
    assert list(got.columns) == ["age", "income"]
    assert len(got) == N_ROWS
    assert got["age"].dtype == np.int64
    assert got["age"].between(17, 90).all()
    assert got["income"].between(0, 200_000).all()
    assert "unprotected columns job, note: left out (--unprotected drop)" in result.stdout
    assert f"wrote {target} ({N_ROWS} rows)" in result.stdout
    assert "guarantee: proven" in result.stdout
    assert {p.name for p in workdir.iterdir()} == {
        "people.csv",
        "people.parquet",
        "schema.json",
        target,
        f"{target}.public-report.json",
        f"{target}.private-report.json",
    }
    private = json.loads((workdir / f"{target}.private-report.json").read_text())
    assert private["report"].startswith("PRIVATE") and private["input_rows"] == N_ROWS
    assert set(private["clamped"]) == {"age", "income"} and "clamped" not in report


def test_ir_dp_unprotected_shuffle_and_keep(workdir: Path) -> None:
    base = ["release", "ir-dp", "people.csv", "--k", "5", "--epsilon", "1"]
    base += ["--schema", "schema.json", "--seed", "3"]
    shuffled = dpfast(*base, "-o", "s.csv", "--unprotected", "shuffle", cwd=workdir)
    assert shuffled.returncode == 0, shuffled.stderr
    report = check_report(workdir / "s.csv", "ir_dp", 1.0)
    assert report["guarantee_level"] == "protected_only" and report["unprotected"] == "shuffle"
    got = read_output(workdir / "s.csv")
    assert list(got.columns) == ["age", "income", "job", "note"]
    assert sorted(got["note"]) == sorted(people()["note"])
    assert "written unchanged in a random row order of their own" in shuffled.stdout
    records = dpfast(
        *base, "-o", "k.csv", "--linkage", "records", "--unprotected", "keep", cwd=workdir
    )
    assert records.returncode == 0, records.stderr
    report = check_report(workdir / "k.csv", "ir_dp", 1.0)
    assert report["guarantee_level"] == "none"
    assert "guarantee: NOT differentially private" in records.stdout
    # the texts a CLI user reads name the CLI's flags, never Python keywords
    assert "--unprotected drop" in report["guarantee"] and "unprotected=" not in report["guarantee"]
    assert "dpfast: warning: NOT proven differentially private" in records.stderr
    assert "--linkage columns" in records.stderr and "linkage=" not in records.stderr


def test_ir_dp_refuses_keep_under_column_linkage_naming_the_flags(workdir: Path) -> None:
    base = ["release", "ir-dp", "people.csv", "-o", "k.csv", "--k", "5", "--epsilon", "1"]
    result = dpfast(*base, "--schema", "schema.json", "--unprotected", "keep", cwd=workdir)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpfast: error: --unprotected keep"), lines
    for flag in ("--unprotected shuffle", "--unprotected drop", "--linkage records"):
        assert flag in lines[0]
    assert not list(workdir.glob("k.csv*"))
    # the help says so too
    shown = dpfast("release", "ir-dp", "--help", cwd=workdir).stdout
    assert "needs --linkage records" in " ".join(shown.split())


def test_ir_dp_options_and_quiet(workdir: Path) -> None:
    result = dpfast(
        "release",
        "ir-dp",
        "people.csv",
        "-o",
        "out.csv",
        "--k",
        "15",  # under the noise warning's threshold: --quiet prints nothing at all
        "--epsilon",
        "2",
        "--schema",
        "schema.json",
        "--linkage",
        "columns",
        "--threads",
        "1",
        "--quiet",
        cwd=workdir,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == ""
    report = check_report(workdir / "out.csv", "ir_dp", 2.0)
    assert report["parameters"]["linkage"] == "columns"
    assert report["seeded"] is False


def test_ir_dp_no_shuffle_keeps_row_order(workdir: Path) -> None:
    result = dpfast(
        "release",
        "ir-dp",
        "people.csv",
        "-o",
        "out.csv",
        "--k",
        "5",
        "--epsilon",
        "1",
        "--schema",
        "schema.json",
        "--linkage",
        "records",
        "--no-shuffle",
        "--unprotected",
        "keep",
        "--seed",
        "1",
        cwd=workdir,
    )
    assert result.returncode == 0, result.stderr
    assert list(read_output(workdir / "out.csv")["note"]) == list(people()["note"])
    report = check_report(workdir / "out.csv", "ir_dp", 1.0)
    assert report["parameters"]["shuffle"] is False and report["guarantee_level"] == "none"
    assert "NOT proven differentially private" in result.stderr


def test_seed_makes_runs_reproducible(workdir: Path) -> None:
    args = ("--k", "5", "--epsilon", "1", "--schema", "schema.json", "--seed", "11", "--quiet")
    first = dpfast("release", "ir-dp", "people.csv", "-o", "a.parquet", *args, cwd=workdir)
    second = dpfast("release", "ir-dp", "people.csv", "-o", "b.parquet", *args, cwd=workdir)
    assert first.returncode == second.returncode == 0
    pd.testing.assert_frame_equal(
        read_output(workdir / "a.parquet"), read_output(workdir / "b.parquet")
    )


def test_laplace(workdir: Path) -> None:
    result = dpfast(
        "release",
        "laplace",
        "people.parquet",
        "-o",
        "noisy.parquet",
        "--epsilon",
        "1",
        "--schema",
        "schema.json",
        "--unprotected",
        "keep",
        "--seed",
        "5",
        cwd=workdir,
    )
    assert result.returncode == 0, result.stderr
    report = check_report(workdir / "noisy.parquet", "laplace_dp", 1.0)
    assert report["guarantee_level"] == "protected_only"  # per-row noise: keeping is safe
    got = read_output(workdir / "noisy.parquet")
    assert len(got) == N_ROWS
    assert list(got["note"]) == list(people()["note"])  # rows keep their order


@pytest.mark.parametrize("selection", [["--columns", "age,income"], ["--schema", "schema.json"]])
def test_individual_ranking(workdir: Path, selection: list[str]) -> None:
    result = dpfast(
        "release",
        "individual-ranking",
        "people.csv",
        "-o",
        "grouped.csv",
        "--k",
        "3",
        *selection,
        cwd=workdir,
    )
    assert result.returncode == 0, result.stderr
    assert "NOT differentially private" in result.stderr
    report = check_report(workdir / "grouped.csv", "individual_ranking", None)
    assert "NOT differentially private" in report["guarantee"]
    got = read_output(workdir / "grouped.csv")
    assert got["income"].nunique() <= N_ROWS // 3
    assert got["income"].sum() == pytest.approx(people()["income"].sum())


@pytest.mark.parametrize("remainder", ["middle", "last"])
def test_the_remainder_rule_reaches_the_release_and_its_report(
    workdir: Path, remainder: str
) -> None:
    # 60 rows in groups of 7: 8 groups, group 4 (middle) or 7 (last) of 11
    grouped, noisy = workdir / "grouped.parquet", workdir / "noisy.parquet"
    people_path, schema = str(workdir / "people.parquet"), str(workdir / "schema.json")
    rule = ["--k", "7", "--remainder", remainder, "--quiet"]
    command = ["release", "individual-ranking", people_path, "-o", str(grouped)]
    assert cli.main([*command, "--columns", "income", *rule]) == 0
    expected = dpfast_api.individual_ranking(people(), k=7, columns=["income"], remainder=remainder)
    np.testing.assert_array_equal(read_output(grouped)["income"], expected.data["income"])
    report = check_report(grouped, "individual_ranking", None)
    assert report["parameters"]["remainder"] == remainder
    command = ["release", "ir-dp", people_path, "-o", str(noisy), "--epsilon", "1"]
    assert cli.main([*command, "--schema", schema, "--seed", "5", *rule]) == 0
    assert check_report(noisy, "ir_dp", 1.0)["parameters"]["remainder"] == remainder


def test_an_unknown_remainder_rule_is_refused_by_the_cli(workdir: Path) -> None:
    result = dpfast(
        "release", "individual-ranking", "people.csv", "-o", "out.csv", "--k", "7",
        "--remainder", "first", cwd=workdir,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--remainder: invalid choice: 'first' (choose from" in result.stderr
    assert not (workdir / "out.csv").exists()


def test_demo(tmp_path: Path) -> None:
    result = dpfast("demo", "--out", "demo-out", "--seed", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "demo-out"
    assert sorted(p.name for p in out.iterdir()) == [
        "adult_ir_dp.parquet",
        "adult_ir_dp.parquet.private-report.json",
        "adult_ir_dp.parquet.public-report.json",
    ]
    report = check_report(out / "adult_ir_dp.parquet", "ir_dp", 1.0)
    assert "metrics" not in report and report["guarantee_level"] == "proven"
    private = json.loads((out / "adult_ir_dp.parquet.private-report.json").read_text())
    assert set(private["metrics"]["relative_error"]) == set(report["protected_columns"])
    assert "do not publish" in private["metrics"]["warning"]
    assert report["parameters"]["shuffle"] is True
    released = read_output(out / "adult_ir_dp.parquet")
    assert list(released.columns) == ["age", "education-num", "hours-per-week"]
    assert released.shape == (30_162, 3)
    for text in ("epsilon ledger", "guarantee", "relative error", "JSD", "centroid noise"):
        assert text in result.stdout
    assert "a larger k shares each noise draw" in result.stdout  # the numbers are explained
    assert len(report["ledger"]) == 3 and report["parameters"]["k"] == 100
    # the default shows a good release: every column within 15% on average
    assert max(private["metrics"]["relative_error"].values()) < 0.15
    everything = dpfast("demo", "--out", "all", "--all-columns", "--seed", "1", cwd=tmp_path)
    assert everything.returncode == 0, everything.stderr
    assert read_output(tmp_path / "all" / "adult_ir_dp.parquet").shape == (30_162, 6)
    # the README's reruns into the same folder replace the demo's own files (public data)
    (out / "mine.txt").write_text("kept", encoding="utf-8")
    for rerun in (["--k", "50", "--epsilon", "0.5"], ["--mixed"]):
        again = dpfast("demo", "--out", "demo-out", "--seed", "2", *rerun, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
    assert read_output(out / "adult_ir_dp.parquet").shape == (30_162, 4)  # --mixed's table
    assert check_report(out / "adult_ir_dp.parquet", "ir_dp", 1.0)["parameters"]["k"] == 100
    assert (out / "mine.txt").read_text(encoding="utf-8") == "kept"


# -- usage and input errors --------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ([], "required: COMMAND"),
        (["release"], "required: METHOD"),
        (["release", "nope"], "invalid choice: 'nope'"),
        (["release", "ir-dp", "people.csv"], "required: -o/--output, --k, --epsilon, --schema"),
        (
            [
                "release",
                "ir-dp",
                "people.csv",
                "-o",
                "o.csv",
                "--k",
                "three",
                "--epsilon",
                "1",
                "--schema",
                "schema.json",
            ],
            "expected a whole number, got 'three'",
        ),
        (
            [
                "release",
                "individual-ranking",
                "people.csv",
                "-o",
                "o.csv",
                "--k",
                "2",
                "--columns",
                "a,,b",
            ],
            "comma-separated column names",
        ),
        (["demo", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors(workdir: Path, args: list[str], match: str) -> None:
    before = {p.name for p in workdir.iterdir()}
    result = dpfast(*args, cwd=workdir)
    assert_one_line_error(result, match)
    assert "--help" in result.stderr
    assert_no_output(workdir, before)


BAD_SCHEMAS = {
    "inverted bounds": (
        {"columns": {"age": {"type": "integer", "bounds": [90, 17]}}},
        "lower bound 90 is greater than upper bound 17",
    ),
    "missing column": (
        {
            "columns": {
                "age": {"type": "integer", "bounds": [17, 90]},
                "salary": {"type": "float", "bounds": [0, 1]},
            }
        },
        "declares column(s) 'salary' that the input does not have",
    ),
    "protected categorical": (
        {
            "columns": {
                "age": {"type": "integer", "bounds": [17, 90]},
                "job": {"type": "categorical"},
            }
        },
        "protects numeric columns only",
    ),
    "numeric column holds text": (
        {"columns": {"job": {"type": "float", "bounds": [0, 1]}}},
        "column 'job' is declared float",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SCHEMAS))
def test_bad_schema_fails_cleanly(workdir: Path, case: str) -> None:
    schema, match = BAD_SCHEMAS[case]
    (workdir / "bad.json").write_text(json.dumps(schema), encoding="utf-8")
    before = {p.name for p in workdir.iterdir()}
    result = dpfast(
        "release",
        "ir-dp",
        "people.csv",
        "-o",
        "out.parquet",
        "--k",
        "5",
        "--epsilon",
        "1",
        "--schema",
        "bad.json",
        cwd=workdir,
    )
    assert_one_line_error(result, match)
    assert_no_output(workdir, before)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--epsilon", "0"], "epsilon must be a finite number > 0"),
        (["--epsilon", "nan"], "epsilon must be a finite number > 0"),
        (["--k", "0"], "k must be in [1, 60]"),
        (["--k", "61"], "k must be in [1, 60]"),
        (["--seed", "-1"], "seed"),
    ],
)
def test_bad_parameters_fail_cleanly(workdir: Path, args: list[str], match: str) -> None:
    options = {"--k": "5", "--epsilon": "1"}
    options.update(dict(zip(args[::2], args[1::2], strict=True)))
    flat = [item for pair in options.items() for item in pair]
    before = {p.name for p in workdir.iterdir()}
    result = dpfast(
        "release",
        "ir-dp",
        "people.csv",
        "-o",
        "out.parquet",
        "--schema",
        "schema.json",
        *flat,
        cwd=workdir,
    )
    assert_one_line_error(result, match)
    assert_no_output(workdir, before)


@pytest.mark.parametrize(
    ("paths", "match"),
    [
        (["missing.csv", "-o", "out.csv"], "'missing.csv' does not exist"),
        (["people.csv", "-o", "out.xlsx"], "use .parquet or .csv"),
        (["people.txt", "-o", "out.csv"], "use .parquet or .csv"),
        (["people.csv", "-o", "nodir/out.csv"], "output directory 'nodir' does not exist"),
        (["people.csv", "-o", "people.csv"], "would overwrite the input"),
    ],
)
def test_bad_paths_fail_cleanly(workdir: Path, paths: list[str], match: str) -> None:
    before = {p.name for p in workdir.iterdir()}
    result = dpfast(
        "release",
        "ir-dp",
        *paths,
        "--k",
        "5",
        "--epsilon",
        "1",
        "--schema",
        "schema.json",
        cwd=workdir,
    )
    assert_one_line_error(result, match)
    assert_no_output(workdir, before)


def test_missing_schema_file(workdir: Path) -> None:
    result = dpfast(
        "release",
        "laplace",
        "people.csv",
        "-o",
        "out.csv",
        "--epsilon",
        "1",
        "--schema",
        "nope.json",
        cwd=workdir,
    )
    assert_one_line_error(result, "schema file 'nope.json' does not exist")


def test_unknown_column_for_individual_ranking(workdir: Path) -> None:
    before = {p.name for p in workdir.iterdir()}
    result = dpfast(
        "release",
        "individual-ranking",
        "people.csv",
        "-o",
        "out.csv",
        "--k",
        "3",
        "--columns",
        "age,salary",
        "--quiet",
        cwd=workdir,
    )
    assert_one_line_error(result, "salary")
    assert_no_output(workdir, before)


def test_failure_while_writing_the_report_removes_the_output(workdir: Path) -> None:
    (workdir / "out.parquet.public-report.json").mkdir()  # the report cannot replace a directory
    before = {p.name for p in workdir.iterdir()}
    result = dpfast(
        "release",
        "ir-dp",
        "people.csv",
        "-o",
        "out.parquet",
        "--k",
        "20",  # under the noise warning's threshold: the error is the one line
        "--epsilon",
        "2",
        "--schema",
        "schema.json",
        "--quiet",
        "--force",  # past the check for existing files, to the failing write
        cwd=workdir,
    )
    assert_one_line_error(result, "out.parquet.public-report.json")
    assert_no_output(workdir, before)


# -- in-process: help, version, progress, unexpected errors ------------------------------


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["release"],
        ["release", "ir-dp"],
        ["release", "laplace"],
        ["release", "individual-ranking"],
        ["demo"],
    ],
)
def test_help_shows_examples(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*command, "--help"]) == 0
    got = capsys.readouterr().out
    assert "examples:" in got
    assert "dpfast " in got.split("examples:")[1]


def test_help_by_subprocess(tmp_path: Path) -> None:
    result = dpfast("release", "ir-dp", "--help", cwd=tmp_path)
    assert result.returncode == 0
    assert "examples:" in result.stdout
    assert "--linkage" in result.stdout


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import dpfast

    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"dpfast {dpfast.__version__}"


def test_unexpected_error_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(args: Any) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "_demo", broken)
    assert cli.main(["demo"]) == 1
    err = capsys.readouterr().err
    assert "RuntimeError: boom" in err
    assert "bug in dpfast" in err


class FakeStream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_progress_on_a_pipe_prints_one_line_per_phase() -> None:
    stream = FakeStream(tty=False)
    progress = cli.ProgressLine(stream)
    for done in range(5):
        progress("noise", done, 4)
    progress("microaggregation", 1, 2)
    progress("microaggregation", 2, 2)
    progress.close()
    assert stream.getvalue() == "dpfast: noise...\ndpfast: microaggregation...\n"


def test_progress_on_a_pipe_repeats_a_long_phase_every_few_seconds(monkeypatch) -> None:
    clock = [100.0]
    monkeypatch.setattr("dpfast.cli._progress.time.monotonic", lambda: clock[0])
    stream = FakeStream(tty=False)
    progress = cli.ProgressLine(stream, every=5.0)
    progress("noise", 0, 10)
    for done in range(1, 11):
        clock[0] += 2.0  # a tick every 2 s: a line at most every 5 s
        progress("noise", done, 10)
    lines = stream.getvalue().splitlines()
    assert lines == [
        "dpfast: noise...",
        "dpfast: noise 30%",
        "dpfast: noise 60%",
        "dpfast: noise 90%",
    ]


def test_progress_on_a_terminal_redraws_only_on_change() -> None:
    stream = FakeStream(tty=True)
    progress = cli.ProgressLine(stream)
    for done in range(1001):
        progress("noise", done, 1000)
    got = stream.getvalue()
    assert got.count("\r") == 101  # 0%..100%, one redraw per whole percent
    assert got.endswith("dpfast: noise 100%")
    progress("assemble", 1, 1)
    progress.close()
    assert stream.getvalue().endswith("\r")
    assert "\n" not in stream.getvalue()


def test_progress_handles_zero_total() -> None:
    stream = FakeStream(tty=True)
    cli.ProgressLine(stream)("assemble", 0, 0)
    assert stream.getvalue().endswith("100%")


def test_schema_column_pyarrow_types_round_trip(workdir: Path) -> None:
    # Guard for the fixtures above: CSV integers are read as int64, as the schema expects.
    from dpfast.io import read_table

    table = read_table(workdir / "people.csv")
    assert table.schema.field("age").type == pa.int64()


def test_progress_with_a_delay_stays_silent_for_a_quick_phase(monkeypatch) -> None:
    clock = [10.0]
    monkeypatch.setattr("dpfast.cli._progress.time.monotonic", lambda: clock[0])
    stream = FakeStream(tty=False)
    progress = cli.ProgressLine(stream, delay=1.0)
    for done in range(4):
        clock[0] += 0.2
        progress("reading a.csv", done, 4)
    assert stream.getvalue() == ""  # 0.6 s after its first call: never shown
    progress("writing b.csv", 0, 10)
    clock[0] += 1.5
    progress("writing b.csv", 5, 10)
    assert stream.getvalue() == "dpfast: writing b.csv...\n"


@pytest.mark.parametrize("name", ["people.csv", "people.parquet"])
def test_reading_reports_bytes_read(workdir: Path, name: str) -> None:
    from dpfast.io import read_table

    calls: list[tuple[str, int, int]] = []
    table = read_table(workdir / name, progress=lambda *call: calls.append(call))
    size = (workdir / name).stat().st_size
    assert calls and {phase for phase, _, _ in calls} == {f"reading {name}"}
    assert all(total == size for _, _, total in calls)
    done = [d for _, d, _ in calls]
    assert done == sorted(done) and done[-1] == size
    assert table.equals(read_table(workdir / name))


@pytest.mark.parametrize("name", ["out.csv", "out.parquet", "out.tsv.gz"])
def test_writing_reports_rows_and_writes_the_same_table(
    workdir: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dpfast import io as dpfast_io

    monkeypatch.setattr(dpfast_io._files, "WRITE_ROWS", 7)
    table = dpfast_io.read_table(workdir / "people.parquet")
    calls: list[tuple[str, int, int]] = []
    dpfast_io.write_table_atomic(table, workdir / name, progress=lambda *call: calls.append(call))
    n = table.num_rows
    assert calls == [(f"writing {name}", min(s + 7, n), n) for s in range(0, n, 7)]
    assert dpfast_io.read_table(workdir / name).to_pandas().equals(table.to_pandas())
    if name.endswith(".parquet"):
        assert pq.ParquetFile(workdir / name).num_row_groups == -(-n // 7)


def test_cli_shows_reading_and_writing_on_a_pipe_when_slow(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dpfast import io as dpfast_io
    from dpfast.cli import _progress

    monkeypatch.setattr(_progress, "IO_PROGRESS_DELAY", 1e-9)  # every file counts as slow
    monkeypatch.setattr(dpfast_io._files, "WRITE_ROWS", 10)  # several calls: the second one shows
    paths = [str(workdir / "people.csv"), "-o", str(workdir / "out.csv")]
    options = ["--epsilon", "1", "--schema", str(workdir / "schema.json"), "--seed", "1"]
    code = cli.main(["release", "laplace", *paths, *options])
    assert code == 0
    err = capsys.readouterr().err
    assert "dpfast: reading people.csv..." in err
    assert "dpfast: writing out.csv..." in err


def test_the_program_ends_with_its_code_after_pythons_exit_handlers(tmp_path):
    # run() ends the process without C++ static destructors (pyarrow's thread pools can
    # abort there, apache/arrow#34314), but only after what Python runs at exit
    script = f"""
import atexit, sys, threading, time
from pathlib import Path
atexit.register(lambda: Path({str(tmp_path / "atexit")!r}).write_text("ran"))
def late():
    time.sleep(0.3)
    Path({str(tmp_path / "thread")!r}).write_text("joined")
threading.Thread(target=late).start()
sys.argv = ["dpfast", "release", "laplace", "missing.parquet", "-o", "out", "--epsilon", "1"]
from dpfast.cli import run
run()
print("never")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("dpfast: error:") and done.stdout == ""
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "joined"
    shown = subprocess.run(
        [sys.executable, "-m", "dpfast", "--version"], capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0 and shown.stdout.startswith("dpfast ")  # flushed into a pipe
