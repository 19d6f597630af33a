"""Input and output formats of the command line: .csv.gz, .tsv, --delimiter, --encoding.

Every format and option is run through ``dpfast.cli.main`` in process. A seeded release
of the same values must be the same whatever file format carries them; files that look
delimited by another character, or are not UTF-8, and header-only files get one line
naming the file and the fix.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dpfast import cli
from dpfast.io import output_format, read_table, write_table_atomic

N_ROWS = 50
SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 200000]},
        "job": {"type": "categorical", "protect": False},
    }
}
# seeded, and the unprotected "job" kept so that its text is written back
LAPLACE = ["--epsilon", "1", "--schema", "schema.json", "--seed", "7", "--unprotected", "keep"]


def people() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {
            "age": rng.integers(17, 91, N_ROWS),
            "income": rng.uniform(0, 150_000, N_ROWS).round(2),
            "job": rng.choice(["Bäcker", "Ärztin", "pilot"], N_ROWS),
        }
    )


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    frame = people()
    frame.to_csv(tmp_path / "people.csv", index=False)
    frame.to_parquet(tmp_path / "people.parquet", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def release(*args: str) -> int:
    return cli.main(["release", "laplace", *args, "--quiet", *LAPLACE])


def expected_release(workdir: Path) -> pd.DataFrame:
    """The seeded release of people.csv, written as plain CSV."""
    assert release("people.csv", "-o", "expected.csv") == 0
    return pd.read_csv(workdir / "expected.csv")


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dpfast: error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]


# -- formats ---------------------------------------------------------------------------


def test_output_format_from_the_extension() -> None:
    got = [output_format(name) for name in ("a.csv", "a.CSV.GZ", "a.tsv", "a.tsv.gz", "a.pq")]
    assert got == ["csv", "csv.gz", "tsv", "tsv.gz", "parquet"]
    assert output_format("my.data.csv") == "csv"
    for name in ("a.gz", "a.parquet.gz", "a.txt", "a"):
        with pytest.raises(ValueError, match=r"use \.parquet or \.csv \(also \.csv\.gz"):
            output_format(name)


def test_csv_gz_in_and_out(workdir: Path) -> None:
    expected = expected_release(workdir)
    with gzip.open(workdir / "people.csv.gz", "wb") as sink:
        sink.write((workdir / "people.csv").read_bytes())
    assert release("people.csv.gz", "-o", "out.csv.gz") == 0
    written = (workdir / "out.csv.gz").read_bytes()
    assert written[:2] == b"\x1f\x8b"  # gzip
    assert gzip.decompress(written) == (workdir / "expected.csv").read_bytes()
    pd.testing.assert_frame_equal(pd.read_csv(workdir / "out.csv.gz"), expected)
    assert Path("out.csv.gz.public-report.json").is_file()


def test_tsv_in_and_out(workdir: Path) -> None:
    expected = expected_release(workdir)
    people().to_csv(workdir / "people.tsv", sep="\t", index=False)
    assert release("people.tsv", "-o", "out.tsv") == 0
    text = (workdir / "out.tsv").read_text(encoding="utf-8")
    assert text.splitlines()[0].split("\t") == ['"age"', '"income"', '"job"']
    assert "," not in text.splitlines()[1]
    pd.testing.assert_frame_equal(pd.read_csv(workdir / "out.tsv", sep="\t"), expected)


def test_tsv_gz_output_from_parquet(workdir: Path) -> None:
    expected = expected_release(workdir)
    assert release("people.parquet", "-o", "out.tsv.gz") == 0
    got = pd.read_csv(workdir / "out.tsv.gz", sep="\t", compression="gzip")
    pd.testing.assert_frame_equal(got, expected)


@pytest.mark.parametrize(
    ("delimiter", "char"), [(";", ";"), ("|", "|"), ("tab", "\t"), (r"\t", "\t")]
)
def test_delimiter_for_input_and_output(workdir: Path, delimiter: str, char: str) -> None:
    expected = expected_release(workdir)
    people().to_csv(workdir / "people-d.csv", sep=char, index=False)
    assert release("people-d.csv", "-o", "out.csv", "--delimiter", delimiter) == 0
    header = (workdir / "out.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == char.join(['"age"', '"income"', '"job"'])
    pd.testing.assert_frame_equal(pd.read_csv(workdir / "out.csv", sep=char), expected)


def test_delimiter_applies_to_a_text_output_of_a_parquet_input(workdir: Path) -> None:
    expected = expected_release(workdir)
    assert release("people.parquet", "-o", "out.csv", "--delimiter", ";") == 0
    pd.testing.assert_frame_equal(pd.read_csv(workdir / "out.csv", sep=";"), expected)
    # and a text input's delimiter is not forced on a Parquet output
    people().to_csv(workdir / "people-d.csv", sep=";", index=False)
    assert release("people-d.csv", "-o", "out.parquet", "--delimiter", ";") == 0
    got = pd.read_parquet(workdir / "out.parquet")
    np.testing.assert_array_equal(got["income"].to_numpy(), expected["income"].to_numpy())


def test_encoding_option_reads_latin_1(workdir: Path) -> None:
    expected = expected_release(workdir)
    people().to_csv(workdir / "latin.csv", index=False, encoding="latin-1")
    assert release("latin.csv", "-o", "out.csv", "--encoding", "latin-1") == 0
    # read as Latin-1, written as UTF-8
    got = pd.read_csv(workdir / "out.csv", encoding="utf-8")
    pd.testing.assert_frame_equal(got, expected)
    assert {"Bäcker", "Ärztin"} <= set(got["job"])


def test_other_commands_take_the_options(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    people().to_csv(workdir / "latin.tsv", sep="\t", index=False, encoding="latin-1")
    common = ["latin.tsv", "--quiet", "--encoding", "latin-1", "--schema", "schema.json"]
    domain = "Bäcker,Ärztin,pilot"
    argv = [*common, "-o", "rr.csv", "--column", "job", "--domain", domain, "--epsilon", "1"]
    assert cli.main(["release", "randomized-response", *argv]) == 0
    assert set(pd.read_csv(workdir / "rr.csv")["job"]) <= set(domain.split(","))
    assert cli.main(["release", "mdav", *common, "-o", "m.csv.gz", "--k", "5"]) == 0
    assert len(pd.read_csv(workdir / "m.csv.gz")) == N_ROWS
    # diffgen reads through the same options
    schema = {
        "columns": {
            "age": {"type": "integer", "bounds": [17, 90]},
            "job": {"type": "categorical"},
        }
    }
    (workdir / "dg.json").write_text(json.dumps(schema), encoding="utf-8")
    argv = ["latin.tsv", "-o", "dg.tsv", "--quiet", "--encoding", "latin-1", "--schema", "dg.json"]
    argv += ["--target", "job", "--classes", domain, "--epsilon", "1", "--steps", "2"]
    assert cli.main(["release", "diffgen", *argv]) == 0
    assert "Ärztin" in (workdir / "dg.tsv").read_text(encoding="utf-8")
    capsys.readouterr()


# -- what is refused, with the fix -----------------------------------------------------


def test_semicolon_file_names_the_delimiter(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    people().to_csv(workdir / "semi.csv", sep=";", index=False)
    code = release("semi.csv", "-o", "out.csv")
    assert_one_line_error(code, capsys.readouterr().err, "'semi.csv'", "--delimiter ';'")
    assert not (workdir / "out.csv").exists()


@pytest.mark.parametrize(("char", "fix"), [("\t", "--delimiter tab"), ("|", "--delimiter '|'")])
def test_other_common_delimiters_are_named(
    workdir: Path, capsys: pytest.CaptureFixture[str], char: str, fix: str
) -> None:
    people().to_csv(workdir / "other.csv", sep=char, index=False)
    code = release("other.csv", "-o", "out.csv")
    assert_one_line_error(code, capsys.readouterr().err, "'other.csv'", fix)


def test_comma_file_named_tsv_names_the_comma(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    people().to_csv(workdir / "comma.tsv", index=False)
    code = release("comma.tsv", "-o", "out.csv")
    assert_one_line_error(code, capsys.readouterr().err, "'comma.tsv'", "--delimiter ','")


def test_single_column_with_a_semicolon_in_its_name_is_read(tmp_path: Path) -> None:
    path = tmp_path / "one.csv"
    path.write_text("size;m\n1.5\n2.5\n", encoding="utf-8")
    table = read_table(path)
    assert table.column_names == ["size;m"]
    assert table.column(0).to_pylist() == [1.5, 2.5]
    # a header-only file has no value to tell: its header decides
    (tmp_path / "header.csv").write_text("age;income\n", encoding="utf-8")
    with pytest.raises(ValueError, match="--delimiter ';'"):
        read_table(tmp_path / "header.csv")


def test_latin_1_values_name_the_encoding(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    people().to_csv(workdir / "latin.csv", index=False, encoding="latin-1")
    code = release("latin.csv", "-o", "out.csv")
    err = capsys.readouterr().err
    assert_one_line_error(code, err, "'latin.csv'", "not UTF-8", "column 'job'", "--encoding")


def test_latin_1_header_names_the_encoding(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    people().rename(columns={"job": "Stadtteil-Größe"}).to_csv(
        workdir / "header.csv", index=False, encoding="latin-1"
    )
    code = release("header.csv", "-o", "out.csv")
    err = capsys.readouterr().err
    assert_one_line_error(code, err, "'header.csv'", "not UTF-8", "--encoding latin-1")


def test_latin_1_in_a_gzip_file_names_the_encoding(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = people().to_csv(index=False).encode("latin-1")
    (workdir / "latin.csv.gz").write_bytes(gzip.compress(data))
    code = release("latin.csv.gz", "-o", "out.csv")
    assert_one_line_error(code, capsys.readouterr().err, "'latin.csv.gz'", "--encoding")


EMPTY_COMMANDS = {
    "laplace": LAPLACE,
    "ir-dp": ["--k", "5", "--epsilon", "1", "--schema", "schema.json"],
    "individual-ranking": ["--k", "3", "--columns", "age"],
    "randomized-response": ["--column", "job", "--domain", "a,b", "--epsilon", "1"],
    "diffgen": [
        *("--target", "job", "--classes", "a,b", "--epsilon", "1", "--steps", "2"),
        *("--schema", "schema.json"),
    ],
}


@pytest.mark.parametrize("method", sorted(EMPTY_COMMANDS))
def test_header_only_csv_gets_the_empty_parquet_message(
    workdir: Path, capsys: pytest.CaptureFixture[str], method: str
) -> None:
    empty = people().iloc[:0]
    empty.to_parquet(workdir / "empty.parquet", index=False)
    empty.to_csv(workdir / "empty.csv", index=False)
    assert (workdir / "empty.csv").read_text(encoding="utf-8") == "age,income,job\n"
    errors = {}
    for source in ("empty.parquet", "empty.csv", "empty.tsv"):
        if source.endswith(".tsv"):
            empty.to_csv(workdir / source, sep="\t", index=False)
        argv = ["release", method, source, "-o", "out.csv", "--quiet", *EMPTY_COMMANDS[method]]
        code = cli.main(argv)
        err = capsys.readouterr().err
        assert_one_line_error(code, err, "the table is empty (0 rows)", source)
        errors[source] = err.replace(source, "INPUT")
    assert errors["empty.csv"] == errors["empty.parquet"] == errors["empty.tsv"]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["people.csv", "-o", "out.csv", "--delimiter", "ab"], ["--delimiter", "one character"]),
        (["people.csv", "-o", "out.csv", "--delimiter", '"'], ["quote"]),
        (["people.csv", "-o", "out.csv", "--delimiter", "é"], ["ASCII"]),
        (["people.parquet", "-o", "out.parquet", "--delimiter", ";"], ["--delimiter", "Parquet"]),
        (["people.parquet", "-o", "out.csv", "--encoding", "latin-1"], ["--encoding", "Parquet"]),
        (["people.csv", "-o", "out.csv", "--encoding", "klingon"], ["'klingon'", "--encoding"]),
        (["people.csv", "-o", "out.xlsx"], ["'out.xlsx'", ".csv.gz"]),
    ],
)
def test_bad_options_fail_cleanly(
    workdir: Path, capsys: pytest.CaptureFixture[str], args: list[str], needles: list[str]
) -> None:
    before = {p.name for p in workdir.iterdir()}
    code = release(*args)
    assert_one_line_error(code, capsys.readouterr().err, *needles)
    assert {p.name for p in workdir.iterdir()} == before


def test_corrupt_gzip_fails_cleanly(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "bad.csv.gz").write_bytes(b"age,income\n1,2\n")  # not gzip
    code = release("bad.csv.gz", "-o", "out.csv")
    assert_one_line_error(code, capsys.readouterr().err, "cannot read 'bad.csv.gz' as csv.gz")


# -- the io functions ------------------------------------------------------------------


def test_read_table_refuses_text_options_for_parquet(workdir: Path) -> None:
    with pytest.raises(ValueError, match="Parquet"):
        read_table(workdir / "people.parquet", delimiter=";")
    with pytest.raises(ValueError, match="Parquet"):
        read_table(workdir / "people.parquet", encoding="latin-1")
    with pytest.raises(ValueError, match="Parquet"):
        write_table_atomic(pa.table({"a": [1]}), workdir / "x.parquet", delimiter=";")


def test_utf8_spellings_need_no_check_and_utf8_text_passes(workdir: Path) -> None:
    for encoding in ("utf-8", "UTF8", "utf_8"):
        table = read_table(workdir / "people.csv", encoding=encoding)
        assert set(table.column("job").to_pylist()) == {"Bäcker", "Ärztin", "pilot"}


def test_write_then_read_every_text_format(tmp_path: Path) -> None:
    table = pa.table({"a": [1, 2, 3], "b": ["x;y", "z\tw", "ü"]})
    for name, delimiter in [
        ("t.csv", None),
        ("t.csv.gz", None),
        ("t.tsv", None),
        ("t.tsv.gz", None),
        ("t.csv", ";"),
        ("t.tsv.gz", "|"),
    ]:
        write_table_atomic(table, tmp_path / name, delimiter=delimiter)
        got = read_table(tmp_path / name, delimiter=delimiter)
        assert got.equals(table), (name, delimiter)
